"""The CSV preflight's verdicts: labels, class balance, batch size, warnings.

Part of the CSV preflight (`csv_check`, whose docstring has the policy):
from the per-split counts of `csv_scanner`, the errors that concern the data
as a whole and the `CsvReport` of valid input.
"""

import dataclasses
import os
from typing import Dict, List, Sequence

from tfx_autostrategy import conventions
from tfx_autostrategy.preflight import csv_layout
from tfx_autostrategy.preflight import csv_scanner

@dataclasses.dataclass
class CsvReport:
  """What `check_csv_dir` found in valid input.

  Attributes:
    data_root: the directory checked.
    layout: `csv_layout.SINGLE` or `csv_layout.PRESPLIT`.
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


def label_error(bad: Dict[str, List], label_column: str,
                allowed_labels: Sequence[int]) -> csv_layout.CsvDataError:
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
  return csv_layout.CsvDataError(
      f'{first_location}: label column {label_column!r} has values outside '
      f'{{{allowed}}}: ' + '; '.join(parts))


def check_training_classes(data_root: str, layout: str,
                           files: Dict[str, List[str]],
                           stats: Dict[str, csv_scanner.SplitStats],
                           label_column: str,
                           allowed: Dict[str, int]) -> None:
  """Rejects training data whose rows all have one label.

  Such a model learns a constant and its eval AUC is undefined, which TFMA
  would report as 0 after minutes of training. The 'single' layout is split
  by hash later, so all its rows are the training data (if they have one
  label, so do both splits); in the 'presplit' layout it is train/. An eval
  split with one label is only a warning (see `warnings_of`).

  Raises:
    CsvDataError: naming the directory, column, label and row count.
  """
  split = (conventions.SINGLE_SPLIT if layout == csv_layout.SINGLE else
           conventions.TRAIN_SPLIT)
  labels = stats[split].labels
  if len(labels) != 1:
    return
  (value, rows), = labels.items()
  where = (data_root if layout == csv_layout.SINGLE else
           os.path.dirname(files[split][0]))
  names = sorted(allowed.values())
  needed = (f'both labels {names[0]} and {names[1]}' if len(names) == 2 else
            'at least two of the labels ' + ', '.join(map(str, names)))
  raise csv_layout.CsvDataError(
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
  if report.layout == csv_layout.PRESPLIT:
    for split, rows in report.rows.items():
      if rows < floor:
        directory = os.path.dirname(report.files[split][0])
        raise csv_layout.CsvDataError(
            f'{directory}: split {split!r} has {rows} rows, fewer than '
            f'{batch}; {advice}')
    return []
  total = report.total_rows
  if total < floor:
    raise csv_layout.CsvDataError(
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


def warnings_of(stats: Dict[str, csv_scanner.SplitStats],
                columns: List[str], id_column: str,
                allowed: Dict[str, int]) -> List[str]:
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
      names = {csv_scanner.INT: 'integers', csv_scanner.FLOAT: 'floats',
               csv_scanner.STRING: 'strings', csv_scanner.UNKNOWN: 'empty'}
      warnings.append(f'{id_column!r} values are ' + ', '.join(
          f'{names[t]} in split {split!r}' for split, t in types.items()) +
                      '; CsvExampleGen types each split on its own')
    elif csv_scanner.FLOAT in types.values():
      warnings.append(f'{id_column!r} values look like floats; CsvExampleGen '
                      'will type the column as FLOAT')
  for split, s in stats.items():
    missing = sorted(set(allowed.values()) -
                     {allowed[value] for value in s.labels})
    if missing:
      # With one label the training split is an error (see
      # `check_training_classes`); this is an eval split, or a third
      # allowed label that no row uses.
      warnings.append(f'split {split!r} has no rows with label '
                      f'{", ".join(map(str, missing))}; AUC is undefined there')
      if split == 'eval' and len(s.labels) == 1:
        warnings[-1] += (', so the model will not be blessed and nothing '
                         'will be pushed')
  return warnings
