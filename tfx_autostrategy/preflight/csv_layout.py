"""Where the CSVs are and what their header says, as CsvExampleGen sees it.

Part of the CSV preflight (`csv_check`, whose docstring has the policy):
finding the files of each split and reading a file's header line.

Layouts (see `conventions.input_patterns`): 'single' is `data_root/*.csv`,
which the pipeline splits by hash; 'presplit' is `data_root/train/*.csv` plus
`data_root/eval/*.csv`. Both at once is ambiguous and an error.
"""

import fnmatch
import os
from typing import Dict, List, Tuple

from tfx_autostrategy import conventions

SINGLE = 'single'
PRESPLIT = 'presplit'

_EXCERPT_CHARS = 80
_UTF8_BOM = b'\xef\xbb\xbf'


class CsvDataError(ValueError):
  """Input that would fail or mislead the pipeline; the message says where."""


def excerpt(text: str) -> str:
  """A line as an error message quotes it: repr, cut at 80 characters."""
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
          if fnmatch.fnmatchcase(name, conventions.FILE_PATTERN)]


def _other_case_csv(directory: str) -> List[str]:
  if not os.path.isdir(directory):
    return []
  return sorted(name for name in os.listdir(directory)
                if name.lower().endswith('.csv') and
                not fnmatch.fnmatchcase(name, conventions.FILE_PATTERN))


def find_files(data_root: str) -> Tuple[str, Dict[str, List[str]]]:
  """Detects the layout; returns it and the files of each split.

  Raises:
    CsvDataError: no CSV files, an ambiguous layout, a split without files,
      or a match that is not a file.
  """
  pattern = conventions.FILE_PATTERN
  if not os.path.isdir(data_root):
    raise CsvDataError(f'{data_root}: data directory does not exist')
  top = _csv_files(data_root)
  split_dirs = {split: os.path.join(data_root, split)
                for split in conventions.PRESPLIT_SPLITS}
  split_files = {split: _csv_files(d) for split, d in split_dirs.items()}
  if top and any(split_files.values()):
    nested = next(files[0] for files in split_files.values() if files)
    raise CsvDataError(
        f'{data_root}: ambiguous layout: top-level CSV files ({top[0]}) and '
        f'split subdirectories ({nested}); keep either {pattern} or '
        f'train/{pattern} + eval/{pattern}')
  if top:
    layout, files = SINGLE, {conventions.SINGLE_SPLIT: top}
  elif any(os.path.isdir(d) for d in split_dirs.values()):
    layout, files = PRESPLIT, split_files
    for split, paths in split_files.items():
      if not paths:
        raise CsvDataError(
            f'{split_dirs[split]}: split {split!r} has no CSV files '
            f'(expected {os.path.join(split_dirs[split], pattern)})')
  else:
    hint = ''
    other = _other_case_csv(data_root)
    if other:
      hint = (f'; {other[0]} does not match: the pattern {pattern!r} is '
              'case-sensitive')
    raise CsvDataError(
        f'{data_root}: no CSV files found (expected '
        f'{os.path.join(data_root, pattern)}, or train/{pattern} '
        f'and eval/{pattern} below it){hint}')
  for paths in files.values():
    for path in paths:
      if not os.path.isfile(path):
        raise CsvDataError(f'{path}: matches {pattern!r} but is not a '
                           'file; CsvExampleGen would try to read it')
  return layout, files


def read_header(path: str, handle, text_column: str,
                label_column: str) -> List[str]:
  """Parses the header line exactly as CsvExampleGen does.

  Args:
    path: the file, for messages.
    handle: the file opened in binary mode, at its start; left after the
      header line.
    text_column: the column that must hold the text.
    label_column: the column that must hold the label.

  Returns:
    The column names, in file order.

  Raises:
    CsvDataError: naming the file and line 1.
  """
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
        f'{path}:1: header {excerpt(line)} is quoted; CsvExampleGen splits '
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
