"""Preflight check of the CSV files that CsvExampleGen will read.

CsvExampleGen reports bad input as a Beam stack trace ending in "Invalid CSV
line" (or a UnicodeDecodeError) minutes into a run. `check_csv_dir` reads the
same files in a second or two first and either returns a `CsvReport` or raises
one `CsvDataError` whose message starts with `path:line:`.

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
* Too little data for one global batch (`check_batch_size`, run by the CLI
  after `check_csv_dir`): the Trainer reads fixed-shape batches and drops a
  partial one, so each split needs at least one full global batch. The
  Trainer checks the exact example counts after Transform; this check runs
  first, with the smallest global batch the options allow. Presplit counts are
  exact, so a short split is an error; the 'single' layout is split 4:1 by
  hash only later, so fewer rows in all than one batch is an error and an
  expected eval split below one batch is a warning.

Layouts (see `conventions.input_patterns`): 'single' is `data_root/*.csv`, which the
pipeline splits by hash; 'presplit' is `data_root/train/*.csv` plus
`data_root/eval/*.csv`. Both at once is ambiguous and an error.
"""

import collections
import csv
import dataclasses
import fnmatch
import os
from typing import Dict, List, Optional, Sequence, Tuple

from tfx_autostrategy.components import conventions
from tfx_autostrategy.components import settings

_DEFAULTS = settings.TextSettings()

SINGLE = 'single'
PRESPLIT = 'presplit'
SINGLE_SPLIT = conventions.SINGLE_SPLIT
PRESPLIT_SPLITS = conventions.PRESPLIT_SPLITS
FILE_PATTERN = conventions.FILE_PATTERN
ENCODING_ERRORS = ('strict', 'replace')

_EXCERPT_CHARS = 80
_UTF8_BOM = b'\xef\xbb\xbf'

# Type levels of CsvExampleGen's column type inference (tfx_bsl csv_decoder):
# a column takes the highest level any of its values has.
_UNKNOWN, _INT, _FLOAT, _STRING = range(4)
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


class CsvDataError(ValueError):
  """Input that would fail or mislead the pipeline; the message says where."""


@dataclasses.dataclass
class CsvReport:
  """What `check_csv_dir` found in valid input.

  Attributes:
    data_root: the directory checked.
    layout: `SINGLE` or `PRESPLIT`.
    files: split name -> CSV paths, sorted.
    columns: header column names, in file order.
    rows: split name -> number of data rows.
    label_counts: split name -> {label: rows}.
    empty_text: split name -> rows whose text is empty or whitespace only.
    has_lang: whether a `lang_column` column exists.
    id_is_int: whether CsvExampleGen will type the id column as INT (every id
      is an integer); False when there is no id column.
    invalid_utf8_rows: rows with non-UTF-8 bytes (only with
      encoding_errors='replace'; such files need re-encoding).
    warnings: things the pipeline survives but a user should know.
  """
  data_root: str
  layout: str
  files: Dict[str, List[str]]
  columns: List[str]
  rows: Dict[str, int]
  label_counts: Dict[str, Dict[int, int]]
  empty_text: Dict[str, int]
  has_lang: bool
  id_is_int: bool
  invalid_utf8_rows: int = 0
  warnings: List[str] = dataclasses.field(default_factory=list)

  @property
  def total_rows(self) -> int:
    """Data rows over all splits."""
    return sum(self.rows.values())


def _excerpt(text: str) -> str:
  text = text.rstrip('\r\n')
  if len(text) > _EXCERPT_CHARS:
    text = text[:_EXCERPT_CHARS] + '...'
  return repr(text)


def _csv_files(directory: str) -> List[str]:
  """Paths in `directory` that CsvExampleGen's glob would match."""
  if not os.path.isdir(directory):
    return []
  return [os.path.join(directory, name)
          for name in sorted(os.listdir(directory))
          if fnmatch.fnmatchcase(name, FILE_PATTERN)]


def _other_case_csv(directory: str) -> List[str]:
  if not os.path.isdir(directory):
    return []
  return sorted(name for name in os.listdir(directory)
                if name.lower().endswith('.csv') and
                not fnmatch.fnmatchcase(name, FILE_PATTERN))


def _find_files(data_root: str) -> Tuple[str, Dict[str, List[str]]]:
  """Detects the layout; returns it and the files of each split."""
  if not os.path.isdir(data_root):
    raise CsvDataError(f'{data_root}: data directory does not exist')
  top = _csv_files(data_root)
  split_dirs = {split: os.path.join(data_root, split)
                for split in PRESPLIT_SPLITS}
  split_files = {split: _csv_files(d) for split, d in split_dirs.items()}
  if top and any(split_files.values()):
    nested = next(files[0] for files in split_files.values() if files)
    raise CsvDataError(
        f'{data_root}: ambiguous layout: top-level CSV files ({top[0]}) and '
        f'split subdirectories ({nested}); keep either {FILE_PATTERN} or '
        f'train/{FILE_PATTERN} + eval/{FILE_PATTERN}')
  if top:
    layout, files = SINGLE, {SINGLE_SPLIT: top}
  elif any(os.path.isdir(d) for d in split_dirs.values()):
    layout, files = PRESPLIT, split_files
    for split, paths in split_files.items():
      if not paths:
        raise CsvDataError(
            f'{split_dirs[split]}: split {split!r} has no CSV files '
            f'(expected {os.path.join(split_dirs[split], FILE_PATTERN)})')
  else:
    hint = ''
    other = _other_case_csv(data_root)
    if other:
      hint = (f'; {other[0]} does not match: the pattern {FILE_PATTERN!r} is '
              'case-sensitive')
    raise CsvDataError(
        f'{data_root}: no CSV files found (expected '
        f'{os.path.join(data_root, FILE_PATTERN)}, or train/{FILE_PATTERN} '
        f'and eval/{FILE_PATTERN} below it){hint}')
  for paths in files.values():
    for path in paths:
      if not os.path.isfile(path):
        raise CsvDataError(f'{path}: matches {FILE_PATTERN!r} but is not a '
                           'file; CsvExampleGen would try to read it')
  return layout, files


def _read_header(path: str, handle, text_column: str,
                 label_column: str) -> List[str]:
  """Parses the header line exactly as CsvExampleGen does."""
  raw = handle.readline()
  if not raw.strip():
    raise CsvDataError(f'{path}:1: no header line (the file is empty or '
                       'starts with a blank line)')
  if raw.startswith(_UTF8_BOM):
    raise CsvDataError(
        f'{path}:1: the file starts with a UTF-8 byte-order mark, which '
        'CsvExampleGen keeps as part of the first column name; save it as '
        'UTF-8 without BOM')
  try:
    line = raw.decode('utf-8')
  except UnicodeDecodeError as error:
    raise CsvDataError(
        f'{path}:1: header is not valid UTF-8 (byte 0x{raw[error.start]:02x} '
        f'at byte offset {error.start})') from None
  line = line.strip()
  if '\r' in line:
    raise CsvDataError(f'{path}:1: lines end in a bare carriage return (\\r); '
                       'CsvExampleGen needs \\n or \\r\\n line endings')
  if '"' in line:
    raise CsvDataError(
        f'{path}:1: header {_excerpt(line)} is quoted; CsvExampleGen splits '
        'the header on commas without CSV quoting, so the quotes would become '
        'part of the column names')
  columns = line.split(',')
  duplicates = sorted({c for c in columns if columns.count(c) > 1})
  if duplicates:
    raise CsvDataError(f'{path}:1: duplicate column names {duplicates} in '
                       f'header {columns}')
  if '' in columns:
    raise CsvDataError(f'{path}:1: empty column name at position '
                       f'{columns.index("") + 1} in header {columns}')
  for role, column in (('text', text_column), ('label', label_column)):
    if column not in columns:
      padded = [c for c in columns if c.strip() == column]
      hint = (f'; {padded[0]!r} has surrounding spaces' if padded else
              f'; choose the {role} column with --{role}-column')
      raise CsvDataError(
          f'{path}:1: header has no {role} column {column!r} (columns found: '
          f'{columns}){hint}')
  return columns


class _Feeder:
  """Feeds one record at a time to a long-lived csv.reader (as tfx_bsl does)."""

  def __init__(self):
    self.record = ''

  def __iter__(self):
    return self

  def __next__(self) -> str:
    return self.record


@dataclasses.dataclass
class _SplitStats:
  rows: int = 0
  empty_text: int = 0
  blank_lines: int = 0
  empty_ids: int = 0
  id_type: int = _UNKNOWN
  invalid_utf8_rows: int = 0
  first_invalid_utf8: str = ''
  labels: collections.Counter = dataclasses.field(
      default_factory=collections.Counter)
  # Raw label value -> 'path:line' of its first row.
  label_first_seen: Dict[str, str] = dataclasses.field(default_factory=dict)


def _value_type(value: str) -> int:
  """CsvExampleGen's type of one cell (tfx_bsl `_InferValueType`)."""
  if not value:
    return _UNKNOWN
  try:
    return _INT if _INT64_MIN <= int(value) <= _INT64_MAX else _STRING
  except ValueError:
    pass
  try:
    float(value)
  except ValueError:
    return _STRING
  return _FLOAT


class _FileScanner:
  """Checks the records of CSV files that share one header."""

  def __init__(self, columns: List[str], text_column: str, label_column: str,
               id_column: str, allowed: Dict[str, int], encoding_errors: str):
    self._columns = columns
    self._num_fields = len(columns)
    self._text_index = columns.index(text_column)
    self._label_index = columns.index(label_column)
    self._id_index = columns.index(id_column) if id_column in columns else -1
    self._allowed = allowed
    self._strict = encoding_errors == 'strict'
    self._feeder = _Feeder()
    self._reader = csv.reader(self._feeder)

  def _describe_fields(self) -> str:
    return f'{self._num_fields} fields ({", ".join(self._columns)})'

  def scan(self, path: str, handle, stats: _SplitStats) -> None:
    """Reads records after the header from `handle`, updating `stats`."""
    offset = handle.tell()
    line_number = 1
    pending: List[str] = []
    pending_quotes = 0
    start_line = 0
    pending_invalid = False
    for raw in handle:
      line_number += 1
      try:
        line = raw.decode('utf-8')
        invalid = False
      except UnicodeDecodeError as error:
        where = f'{path}:{line_number}'
        if self._strict:
          raise CsvDataError(
              f'{where}: invalid UTF-8 byte 0x{raw[error.start]:02x} at byte '
              f'offset {offset + error.start} of the file; re-encode the file '
              "as UTF-8 (encoding_errors='replace' only audits the rest)"
          ) from None
        line = raw.decode('utf-8', 'replace')
        invalid = True
        if not stats.first_invalid_utf8:
          stats.first_invalid_utf8 = (
              f'{where}, byte offset {offset + error.start}')
      offset += len(raw)
      quotes = line.count('"')
      if pending:
        pending.append(line)
        pending_quotes += quotes
        pending_invalid |= invalid
        if pending_quotes % 2:
          continue
        self._record(path, start_line, pending, stats, pending_invalid)
        pending = []
      elif quotes % 2:
        pending = [line]
        pending_quotes = quotes
        start_line = line_number
        pending_invalid = invalid
      else:
        self._record(path, line_number, [line], stats, invalid)
    if pending:
      raise CsvDataError(
          f'{path}:{start_line}: unbalanced quote: a quoted field opens on '
          f'this line and is still open at the end of the file (line '
          f'{line_number}): {_excerpt(pending[0])}')

  def _record(self, path: str, line_number: int, lines: List[str],
              stats: _SplitStats, invalid_utf8: bool) -> None:
    record = lines[0] if len(lines) == 1 else ''.join(lines)
    self._feeder.record = record
    where = f'{path}:{line_number}'
    last_line = line_number + len(lines) - 1
    try:
      fields = next(self._reader)
    except csv.Error as error:
      if len(lines) > 1:
        # The csv module's advice ("open the file in universal-newline mode")
        # does not apply here; its first clause says what it found.
        reason = str(error).split(' - ', 1)[0]
        raise CsvDataError(
            f'{where}: unbalanced quote: a \'"\' joins lines {line_number}-'
            f'{last_line} into one record that is not valid CSV ({reason}): '
            f'{_excerpt(lines[0])}') from None
      raise CsvDataError(f'{where}: malformed CSV record ({error}): '
                         f'{_excerpt(record)}') from None
    if not fields:
      stats.blank_lines += 1
      return
    if len(fields) != self._num_fields:
      if len(lines) > 1:
        raise CsvDataError(
            f'{where}: expected {self._describe_fields()}, found '
            f'{len(fields)} in a record spanning lines {line_number}-'
            f'{last_line} (a quoted field holds newlines; look for a stray '
            f'\'"\'): {_excerpt(lines[0])}')
      raise CsvDataError(
          f'{where}: expected {self._describe_fields()}, found '
          f'{len(fields)}: {_excerpt(record)}')
    if len(lines) > 1:
      self._check_swallowed(path, line_number, lines)
    stats.rows += 1
    label = fields[self._label_index]
    if label not in stats.labels:
      stats.label_first_seen[label] = where
    stats.labels[label] += 1
    if not fields[self._text_index].strip():
      stats.empty_text += 1
    if invalid_utf8:
      stats.invalid_utf8_rows += 1
    if self._id_index >= 0:
      identifier = fields[self._id_index]
      if not identifier:
        stats.empty_ids += 1
      elif stats.id_type != _STRING:
        stats.id_type = max(stats.id_type, _value_type(identifier))

  def _check_swallowed(self, path: str, line_number: int,
                       lines: List[str]) -> None:
    """Rejects a multi-line record that looks like several records joined.

    A stray quote at the start of a field makes the csv module read the
    following lines into that field and still return the right number of
    fields, so the lost rows only show in the field's content: the opening
    line is a whole record once its quote is ignored, or a line fully inside
    the field parses as a record. (The closing line is not a clue: it holds
    the end of the field followed by the remaining fields.)

    Args:
      path: the file, for the message.
      line_number: line where the record starts.
      lines: the physical lines of the record.

    Raises:
      CsvDataError: if the record looks like joined records.
    """
    last_line = line_number + len(lines) - 1
    if self._looks_like_record(lines[0].replace('"', '')):
      raise CsvDataError(
          f'{path}:{line_number}: unbalanced quote: this line is a complete '
          f'record except for a \'"\' that runs on to line {last_line}: '
          f'{_excerpt(lines[0])}')
    for offset, line in enumerate(lines[1:-1], start=1):
      if self._looks_like_record(line):
        raise CsvDataError(
            f'{path}:{line_number}: unbalanced quote: a quoted field that '
            f'opens on this line swallows line {line_number + offset}, which '
            f'looks like a record of its own: {_excerpt(line)}')

  def _looks_like_record(self, line: str) -> bool:
    if line.count(',') < self._num_fields - 1:
      return False
    try:
      fields = next(csv.reader([line]))
    except csv.Error:
      return False
    return (len(fields) == self._num_fields and
            fields[self._label_index] in self._allowed)


def _label_error(bad: Dict[str, List], label_column: str,
                 allowed_labels: Sequence[int]) -> CsvDataError:
  """One message for every disallowed label value, most frequent first.

  Args:
    bad: value -> [rows, 'path:line' of the first row], in reading order.
    label_column: name of the label column.
    allowed_labels: the allowed labels.

  Returns:
    The error, starting with the location of the first bad row read.
  """
  first_location = next(iter(bad.values()))[1]
  ordered = sorted(bad.items(), key=lambda item: -item[1][0])
  parts = []
  for value, (count, first) in ordered:
    shown = repr(value) + (' (empty)' if not value else '')
    parts.append(f'{shown} in {count} row{"s" if count > 1 else ""} '
                 f'(first at {first})')
  allowed = ', '.join(str(label) for label in allowed_labels)
  return CsvDataError(
      f'{first_location}: label column {label_column!r} has values outside '
      f'{{{allowed}}}: ' + '; '.join(parts))


def check_csv_dir(data_root: str,
                  text_column: str = _DEFAULTS.text_column,
                  label_column: str = _DEFAULTS.label_column,
                  allowed_labels: Sequence[int] = conventions.LABELS,
                  encoding_errors: str = 'strict',
                  id_column: str = _DEFAULTS.id_column,
                  lang_column: str = _DEFAULTS.slice_column) -> CsvReport:
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

  Returns:
    A `CsvReport` of the valid input.

  Raises:
    CsvDataError: the input would fail or mislead the pipeline; the message
      starts with the file (and line) at fault.
    ValueError: an argument is invalid.
  """
  if encoding_errors not in ENCODING_ERRORS:
    raise ValueError(f'encoding_errors must be one of {ENCODING_ERRORS}, got '
                     f'{encoding_errors!r}')
  if not allowed_labels:
    raise ValueError('allowed_labels must not be empty')
  allowed = {str(int(label)): int(label) for label in allowed_labels}
  layout, files = _find_files(data_root)

  columns: Optional[List[str]] = None
  header_file = ''
  scanner: Optional[_FileScanner] = None
  stats: Dict[str, _SplitStats] = {}
  for split, paths in files.items():
    stats[split] = _SplitStats()
    for path in paths:
      with open(path, 'rb') as handle:
        file_columns = _read_header(path, handle, text_column, label_column)
        if columns is None:
          columns, header_file = file_columns, path
          scanner = _FileScanner(columns, text_column, label_column,
                                 id_column, allowed, encoding_errors)
        elif file_columns != columns:
          raise CsvDataError(
              f'{path}:1: header {file_columns} differs from the header of '
              f'{header_file}: {columns}')
        scanner.scan(path, handle, stats[split])

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
      raise CsvDataError(
          f'{directory}: split {split!r} has no data rows (files: '
          f'{", ".join(os.path.basename(p) for p in files[split])})')
  if bad:
    raise _label_error(bad, label_column, allowed_labels)
  _check_training_classes(data_root, layout, files, stats, label_column,
                          allowed)

  return CsvReport(
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
                     all(s.id_type == _INT for s in stats.values())),
      invalid_utf8_rows=sum(s.invalid_utf8_rows for s in stats.values()),
      warnings=_warnings(stats, columns, id_column, allowed))


def _check_training_classes(data_root: str, layout: str,
                            files: Dict[str, List[str]],
                            stats: Dict[str, _SplitStats], label_column: str,
                            allowed: Dict[str, int]) -> None:
  """Rejects training data whose rows all have one label.

  Such a model learns a constant and its eval AUC is undefined, which TFMA
  would report as 0 after minutes of training. The 'single' layout is split
  by hash later, so all its rows are the training data (if they have one
  label, so do both splits); in the 'presplit' layout it is train/. An eval
  split with one label is only a warning (see `_warnings`).

  Raises:
    CsvDataError: naming the directory, column, label and row count.
  """
  split = SINGLE_SPLIT if layout == SINGLE else conventions.TRAIN_SPLIT
  labels = stats[split].labels
  if len(labels) != 1:
    return
  (value, rows), = labels.items()
  where = (data_root if layout == SINGLE else
           os.path.dirname(files[split][0]))
  names = sorted(allowed.values())
  needed = (f'both labels {names[0]} and {names[1]}' if len(names) == 2 else
            'at least two of the labels ' + ', '.join(map(str, names)))
  raise CsvDataError(
      f'{where}: the training data has only label {allowed[value]} in column '
      f'{label_column!r} ({rows} row{"s" if rows > 1 else ""}); a classifier '
      f'needs rows of {needed}')


def check_batch_size(report: CsvReport, per_replica_batch_size: int,
                     min_replicas: int = 1) -> List[str]:
  """Rejects data that cannot fill one global batch; returns warnings.

  Args:
    report: `check_csv_dir`'s report.
    per_replica_batch_size: the Trainer's per-replica batch.
    min_replicas: the fewest replicas the run can have (global batch =
      per-replica batch x replicas, so this gives its smallest value).

  Returns:
    Warnings (the 'single' layout's eval split will likely be too small).

  Raises:
    CsvDataError: a split certainly has fewer rows than one global batch.
  """
  replicas = max(1, min_replicas)
  floor = per_replica_batch_size * replicas
  batch = (f'one global batch of {floor} (--per-replica-batch-size '
           f'{per_replica_batch_size} x {replicas} '
           f'replica{"s" if replicas > 1 else ""})')
  advice = ('every training and evaluation step needs a full batch; use more '
            'data or a smaller --per-replica-batch-size')
  if report.layout == PRESPLIT:
    for split, rows in report.rows.items():
      if rows < floor:
        directory = os.path.dirname(report.files[split][0])
        raise CsvDataError(f'{directory}: split {split!r} has {rows} rows, '
                           f'fewer than {batch}; {advice}')
    return []
  total = report.total_rows
  if total < floor:
    raise CsvDataError(
        f'{report.data_root}: {total} rows in all (to be split '
        f'{conventions.SPLIT_RATIO} into train and eval), fewer than {batch}; '
        f'{advice}')
  expected_eval = conventions.eval_share(total)
  if expected_eval < floor:
    return [f'the eval split will hold about {expected_eval} of the {total} '
            f'rows (a 1-in-{sum(conventions.HASH_BUCKETS.values())} hash '
            f'split), fewer than {batch}; the Trainer '
            'will stop unless it holds more']
  return []


def _warnings(stats: Dict[str, _SplitStats], columns: List[str],
              id_column: str, allowed: Dict[str, int]) -> List[str]:
  """Findings the pipeline survives but that a user should see."""
  warnings = []
  invalid = sum(s.invalid_utf8_rows for s in stats.values())
  if invalid:
    first = next(s.first_invalid_utf8 for s in stats.values()
                 if s.first_invalid_utf8)
    warnings.append(
        f'{invalid} rows contain bytes that are not UTF-8 (first at {first}); '
        'CsvExampleGen decodes strictly, so re-encode the files as UTF-8 '
        'before running the pipeline')
  blank = sum(s.blank_lines for s in stats.values())
  if blank:
    warnings.append(f'{blank} blank lines are skipped')
  if id_column and id_column not in columns:
    warnings.append(f'no id column {id_column!r} (columns: {columns}); pass '
                    "--id-column '' if the data has none")
  elif id_column:
    empty = sum(s.empty_ids for s in stats.values())
    if empty:
      warnings.append(f'{empty} rows have an empty {id_column!r}')
    types = {split: s.id_type for split, s in stats.items()}
    if len(set(types.values())) > 1:
      names = {_INT: 'integers', _FLOAT: 'floats', _STRING: 'strings',
               _UNKNOWN: 'empty'}
      warnings.append(f'{id_column!r} values are ' + ', '.join(
          f'{names[t]} in split {split!r}' for split, t in types.items()) +
                      '; CsvExampleGen types each split on its own')
    elif _FLOAT in types.values():
      warnings.append(f'{id_column!r} values look like floats; CsvExampleGen '
                      'will type the column as FLOAT')
  for split, s in stats.items():
    missing = sorted(set(allowed.values()) -
                     {allowed[value] for value in s.labels})
    if missing:
      # With one label the training split is an error (see
      # `_check_training_classes`); this is an eval split, or a third
      # allowed label that no row uses.
      warnings.append(f'split {split!r} has no rows with label '
                      f'{", ".join(map(str, missing))}; AUC is undefined there')
      if split == 'eval' and len(s.labels) == 1:
        warnings[-1] += (', so the model will not be blessed and nothing '
                         'will be pushed')
  return warnings
