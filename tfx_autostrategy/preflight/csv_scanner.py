"""The CSV record scanner: records found the way CsvExampleGen finds them.

Part of the CSV preflight (`csv_check`, whose docstring has the policy). A
record is a run of physical lines ('\\n') whose count of '"' characters is
even, parsed with Python's csv module (default dialect), as TFX 1.16's
CsvExampleGen (tfx_bsl's csv decoder) does. `FileScanner.scan` checks each
record of a file and counts what the report needs into a `SplitStats`.
"""

import collections
import csv
import dataclasses
from typing import Dict, List, Optional

from tfx_autostrategy.preflight import csv_layout
from tfx_autostrategy.preflight import text_lengths

# Type levels of CsvExampleGen's column type inference (tfx_bsl csv_decoder):
# a column takes the highest level any of its values has.
UNKNOWN, INT, FLOAT, STRING = range(4)
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


class _Feeder:
  """Feeds one record at a time to a long-lived csv.reader (as tfx_bsl does)."""

  def __init__(self):
    self.record = ''

  def __iter__(self):
    return self

  def __next__(self) -> str:
    return self.record


@dataclasses.dataclass
class SplitStats:
  """What the records of one split held (counts, label values, id type)."""
  rows: int = 0
  empty_text: int = 0
  blank_lines: int = 0
  empty_ids: int = 0
  id_type: int = UNKNOWN
  invalid_utf8_rows: int = 0
  first_invalid_utf8: str = ''
  labels: collections.Counter = dataclasses.field(
      default_factory=collections.Counter)
  # Raw label value -> 'path:line' of its first row.
  label_first_seen: Dict[str, str] = dataclasses.field(default_factory=dict)


def value_type(value: str) -> int:
  """CsvExampleGen's type of one cell (tfx_bsl `_InferValueType`)."""
  if not value:
    return UNKNOWN
  try:
    return INT if _INT64_MIN <= int(value) <= _INT64_MAX else STRING
  except ValueError:
    pass
  try:
    float(value)
  except ValueError:
    return STRING
  return FLOAT


class FileScanner:
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
    self._lengths: Optional[text_lengths.LengthCounter] = None

  def _describe_fields(self) -> str:
    return f'{self._num_fields} fields ({", ".join(self._columns)})'

  def scan(self, path: str, handle, stats: SplitStats,
           lengths: Optional[text_lengths.LengthCounter] = None) -> None:
    """Reads records after the header from `handle`, updating `stats`.

    Each record's text goes to `lengths` too, if given (the training texts
    whose id counts pick `auto` lengths).
    """
    self._lengths = lengths
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
          raise csv_layout.CsvDataError(
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
      raise csv_layout.CsvDataError(
          f'{path}:{start_line}: unbalanced quote: a quoted field opens on '
          f'this line and is still open at the end of the file (line '
          f'{line_number}): {csv_layout.excerpt(pending[0])}')

  def _record(self, path: str, line_number: int, lines: List[str],
              stats: SplitStats, invalid_utf8: bool) -> None:
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
        raise csv_layout.CsvDataError(
            f'{where}: unbalanced quote: a \'"\' joins lines {line_number}-'
            f'{last_line} into one record that is not valid CSV ({reason}): '
            f'{csv_layout.excerpt(lines[0])}') from None
      raise csv_layout.CsvDataError(f'{where}: malformed CSV record ({error}): '
                                    f'{csv_layout.excerpt(record)}') from None
    if not fields:
      stats.blank_lines += 1
      return
    if len(fields) != self._num_fields:
      if len(lines) > 1:
        raise csv_layout.CsvDataError(
            f'{where}: expected {self._describe_fields()}, found '
            f'{len(fields)} in a record spanning lines {line_number}-'
            f'{last_line} (a quoted field holds newlines; look for a stray '
            f'\'"\'): {csv_layout.excerpt(lines[0])}')
      raise csv_layout.CsvDataError(
          f'{where}: expected {self._describe_fields()}, found '
          f'{len(fields)}: {csv_layout.excerpt(record)}')
    if len(lines) > 1:
      self._check_swallowed(path, line_number, lines)
    stats.rows += 1
    label = fields[self._label_index]
    if label not in stats.labels:
      stats.label_first_seen[label] = where
    stats.labels[label] += 1
    if not fields[self._text_index].strip():
      stats.empty_text += 1
    if self._lengths is not None:
      self._lengths.add(fields[self._text_index])
    if invalid_utf8:
      stats.invalid_utf8_rows += 1
    if self._id_index >= 0:
      identifier = fields[self._id_index]
      if not identifier:
        stats.empty_ids += 1
      elif stats.id_type != STRING:
        stats.id_type = max(stats.id_type, value_type(identifier))

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
      raise csv_layout.CsvDataError(
          f'{path}:{line_number}: unbalanced quote: this line is a complete '
          f'record except for a \'"\' that runs on to line {last_line}: '
          f'{csv_layout.excerpt(lines[0])}')
    for offset, line in enumerate(lines[1:-1], start=1):
      if self._looks_like_record(line):
        raise csv_layout.CsvDataError(
            f'{path}:{line_number}: unbalanced quote: a quoted field that '
            f'opens on this line swallows line {line_number + offset}, which '
            f'looks like a record of its own: {csv_layout.excerpt(line)}')

  def _looks_like_record(self, line: str) -> bool:
    if line.count(',') < self._num_fields - 1:
      return False
    try:
      fields = next(csv.reader([line]))
    except csv.Error:
      return False
    return (len(fields) == self._num_fields and
            fields[self._label_index] in self._allowed)
