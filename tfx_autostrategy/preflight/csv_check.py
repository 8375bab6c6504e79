"""Preflight check of the CSV files that CsvExampleGen will read.

CsvExampleGen reports bad input as a Beam stack trace ending in "Invalid CSV
line" (or a UnicodeDecodeError) minutes into a run. `check_csv_dir` reads the
same files in a second or two first and either returns a `csv_report.CsvReport` or raises
one `csv_layout.CsvDataError` whose message starts with `path:line:`.

Records are found the way CsvExampleGen (TFX 1.16) finds them, so the check
accepts what the pipeline accepts and rejects what it would fail on:

* The header is the first physical line split on commas, without CSV quoting.
  A quoted header, a UTF-8 byte-order mark, or duplicate column names would
  give the pipeline wrong column names, so they are errors.
* A record is a run of physical lines ('\\n') whose count of '"' characters is
  even, parsed with Python's csv module (default dialect). Every record needs
  exactly as many fields as the header. A stray '"' makes a record run on:
  the quote is reported as unbalanced when the file ends inside it, when the
  joined record has the wrong number of fields or is not valid CSV, or when a
  line swallowed into a quoted field parses as a record of its own (the case
  in which the csv module silently returns one huge field).
* Blank lines are skipped, as CsvExampleGen skips them (counted in warnings).

Policy decisions:

* Encoding: CsvExampleGen decodes every line as strict UTF-8. By default
  (`encoding_errors='strict'`) the first non-UTF-8 byte is an error naming the
  file, line and byte offset. `encoding_errors='replace'` is an audit mode:
  the check goes on, counts the affected rows in `invalid_utf8_rows` and adds
  a warning; the files must still be re-encoded before the pipeline can read
  them.
* Labels must be spelled exactly like one of `allowed_labels` ('0', '1').
  '1.0' would make CsvExampleGen infer a float column and ' 1' or '' are not
  labels, while the curated schema wants INT in {0, 1}; all bad values are
  collected over all files and reported at once with counts.
* Training data with a single label is an error naming the column, the
  label and the row count: the model could only learn a constant, and its
  eval AUC is undefined. Training data is all rows in the 'single' layout
  (split by hash later) and train/ in the 'presplit' one. An eval split with
  a single label is a warning: the run goes on, reports the AUC as undefined
  and does not bless the model.
* Empty or whitespace-only text is valid (the schema allows a missing text
  value); such rows are counted in `empty_text`.
* All files must have the same header, across splits too, because one schema
  applies to every split.
* Too little data for one global batch (`csv_report.check_batch_size`, run by the CLI
  after `check_csv_dir`): the Trainer reads fixed-shape batches and drops a
  partial one, so each split needs at least one full global batch. The
  Trainer checks the exact example counts after Transform; this check runs
  first, with the smallest global batch the options allow. Presplit counts are
  exact, so a short split is an error; the 'single' layout is split 4:1 by
  hash only later, so fewer rows in all than one batch is an error and an
  expected eval split below one batch is a warning.

Layouts (see `conventions.input_patterns`): 'single' is `data_root/*.csv`,
which the pipeline splits by hash; 'presplit' is `data_root/train/*.csv` plus
`data_root/eval/*.csv`. Both at once is ambiguous and an error.

This module is the front door; the work is in `csv_layout` (files, header),
`csv_scanner` (records) and `csv_report` (verdicts on the whole data, the
report). None of them imports TensorFlow or TFX: the CLI runs the check
before those are imported.
"""

import os
from typing import Dict, List, Optional, Sequence

from tfx_autostrategy import conventions
from tfx_autostrategy.preflight import csv_layout
from tfx_autostrategy.preflight import csv_report
from tfx_autostrategy.preflight import csv_scanner
from tfx_autostrategy.preflight import text_lengths
from tfx_autostrategy import settings

_DEFAULTS = settings.TextSettings()

ENCODING_ERRORS = ('strict', 'replace')


def check_csv_dir(data_root: str,
                  text_column: str = _DEFAULTS.text_column,
                  label_column: str = _DEFAULTS.label_column,
                  allowed_labels: Sequence[int] = conventions.LABELS,
                  encoding_errors: str = 'strict',
                  id_column: str = _DEFAULTS.id_column,
                  lang_column: str = _DEFAULTS.slice_column,
                  lengths: Optional[text_lengths.LengthCounter] = None
                  ) -> csv_report.CsvReport:
  """Checks the CSV files under `data_root` before the pipeline reads them.

  Args:
    data_root: directory holding `*.csv`, or `train/*.csv` and `eval/*.csv`.
    text_column: column with the comment text.
    label_column: column with the label.
    allowed_labels: integer labels a row may have.
    encoding_errors: 'strict' rejects non-UTF-8 bytes; 'replace' counts the
      affected rows and warns (see the module docstring).
    id_column: column with the row id ('' if none); only its type is checked.
    lang_column: optional language column, reported as `has_lang`.
    lengths: if given, counts the id lengths of the training texts (all rows
      of the 'single' layout, train/ of the 'presplit' one) in the same pass,
      for `--sequence-length auto` and `--char-ngram-length auto`.

  Returns:
    A `csv_report.CsvReport` of the valid input.

  Raises:
    csv_layout.CsvDataError: the input would fail or mislead the pipeline; the message
      starts with the file (and line) at fault.
    ValueError: an argument is invalid.
  """
  if encoding_errors not in ENCODING_ERRORS:
    raise ValueError(f'encoding_errors must be one of {ENCODING_ERRORS}, got '
                     f'{encoding_errors!r}')
  if not allowed_labels:
    raise ValueError('allowed_labels must not be empty')
  allowed = {str(int(label)): int(label) for label in allowed_labels}
  layout, files = csv_layout.find_files(data_root)

  columns: Optional[List[str]] = None
  header_file = ''
  scanner: Optional[csv_scanner.FileScanner] = None
  stats: Dict[str, csv_scanner.SplitStats] = {}
  for split, paths in files.items():
    stats[split] = csv_scanner.SplitStats()
    for path in paths:
      with open(path, 'rb') as handle:
        file_columns = csv_layout.read_header(path, handle, text_column,
                                              label_column)
        if columns is None:
          columns, header_file = file_columns, path
          scanner = csv_scanner.FileScanner(columns, text_column, label_column,
                                            id_column, allowed, encoding_errors)
        elif file_columns != columns:
          raise csv_layout.CsvDataError(
              f'{path}:1: header {file_columns} differs from the header of '
              f'{header_file}: {columns}')
        scanner.scan(path, handle, stats[split],
                     None if split == conventions.EVAL_SPLIT else lengths)

  # Dicts keep insertion order, so the first entry is the first bad row read.
  bad: Dict[str, List] = {}
  for split_stats in stats.values():
    for value, count in split_stats.labels.items():
      if value not in allowed:
        entry = bad.setdefault(value, [0, split_stats.label_first_seen[value]])
        entry[0] += count
  for split, split_stats in stats.items():
    if not split_stats.rows:
      directory = os.path.dirname(files[split][0])
      raise csv_layout.CsvDataError(
          f'{directory}: split {split!r} has no data rows (files: '
          f'{", ".join(os.path.basename(p) for p in files[split])})')
  if bad:
    raise csv_report.label_error(bad, label_column, allowed_labels)
  csv_report.check_training_classes(data_root, layout, files, stats,
                                    label_column, allowed)

  return csv_report.CsvReport(
      data_root=data_root,
      layout=layout,
      files=files,
      columns=columns,
      rows={split: s.rows for split, s in stats.items()},
      label_counts={
          split: {allowed[value]: count
                  for value, count in sorted(s.labels.items(),
                                             key=lambda item: allowed[item[0]])}
          for split, s in stats.items()},
      empty_text={split: s.empty_text for split, s in stats.items()},
      has_lang=lang_column in columns,
      id_is_int=bool(id_column in columns and
                     all(s.id_type == csv_scanner.INT for s in stats.values())),
      invalid_utf8_rows=sum(s.invalid_utf8_rows for s in stats.values()),
      warnings=csv_report.warnings_of(stats, columns, id_column, allowed))
