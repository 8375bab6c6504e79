"""Seeded synthetic toxic-comment data in Jigsaw CSV format.

The bundled sample (`tfx_autostrategy/sample/comments.csv`) and the data of
tests and benchmarks come from here; none of it is real user text. Rows have
the columns `id, comment_text, toxic, lang`:

* `id`: 16 hex digits, unique per (seed, row index) and independent of the
  number of rows, so `generate(1000)` is a prefix of `generate(2000)`.
* `comment_text`: built from per-language word lists (en, es, it, tr, ru, fr,
  pt, de) with URLs, numbers, emoji, mixed case, misspellings, obfuscated
  insults ("1d10t", "stuuupid"), commas, quotes and newlines (so CSV quoting
  is exercised; `sample_text` writes it) and a few empty or whitespace-only
  comments.
* `toxic`: 0/1. The task is learnable but not trivial: a toxic comment holds
  a plain insult only most of the time (otherwise an obfuscated one, or only
  hostile phrasing), neutral comments sometimes quote or negate an insult,
  and about 9 % of the labels are flipped, mostly on those ambiguous cases.
  A word TF-IDF + logistic regression trained on 2,000 rows reaches a ROC-AUC
  around 0.85 on held-out rows.

Output is deterministic: the same arguments give the same bytes. This module
draws the rows (language, label, label noise, id) and writes the CSV layouts;
`sample_text` writes each comment's text.

Usage:
  python -m tfx_autostrategy.sample_data --rows 3000 --output DIR [--seed S]
      [--split] [--shards K]

writes DIR/comments.csv, or DIR/train/ and DIR/eval/ with `--split`.
"""

import argparse
import csv
import itertools
import os
import random
import sys
from typing import (Dict, Iterable, Iterator, Mapping, Optional, Sequence,
                    Tuple)

from tfx_autostrategy import conventions
from tfx_autostrategy import sample_text
from tfx_autostrategy import settings

# The default column names of the pipeline, in Jigsaw order.
_DEFAULTS = settings.TextSettings()
COLUMNS = (_DEFAULTS.id_column, _DEFAULTS.text_column, _DEFAULTS.label_column,
           _DEFAULTS.slice_column)
FILE_NAME = 'comments.csv'
TRAIN_SPLIT, EVAL_SPLIT = conventions.PRESPLIT_SPLITS

# Probabilities that shape the data; the AUC test in
# tests/test_sample_data.py pins the difficulty they produce.
_EMPTY_RATE = 0.015
_TOXIC_RATE = 0.22
# Label noise follows ambiguity, as annotator disagreement does: comments that
# only mention an insult, or are hostile without one, are flipped far more
# often than clear cases. Overall about 9 % of the labels are flipped.
_FLIP_RATE_CLEAR = 0.035
_FLIP_RATE_AMBIGUOUS = 0.45
# English dominates the real Jigsaw data; the others share the rest equally.
_LANGUAGE_WEIGHTS = {'en': 3.0}
# Empty and whitespace-only comments (always labelled 0).
_BLANKS = ('', '', ' ', '   ', '\n', '\t', ' \n ')

_MASK_64 = (1 << 64) - 1
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15


def _mix64(value: int) -> int:
  """SplitMix64 finaliser: a bijection on 64-bit integers."""
  value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9 & _MASK_64
  value = (value ^ (value >> 27)) * 0x94D049BB133111EB & _MASK_64
  return value ^ (value >> 31)


def row_id(seed: int, index: int) -> str:
  """The id of row `index` of the data set generated with `seed`.

  Unique within a seed for index < 2**40, because `_mix64` is a bijection.

  Args:
    seed: the generator seed.
    index: 0-based row number.

  Returns:
    16 lower-case hex digits.
  """
  # Adding the golden-ratio constant keeps the map bijective and keeps row 0
  # of seed 0 from becoming '0000000000000000'.
  return '%016x' % _mix64(((seed << 40) + index + _GOLDEN_GAMMA) & _MASK_64)


def is_eval_row(identifier: str, eval_fraction: float = 0.2) -> bool:
  """Whether the row with this id belongs to the eval split (`--split`)."""
  # Re-mixing decouples the split from the id's leading digits.
  return _mix64(int(identifier, 16)) % 10000 < eval_fraction * 10000


def generate(rows: int, seed: int = 0,
             langs: Sequence[str] = sample_text.LANGUAGES
             ) -> Iterator[Dict[str, object]]:
  """Synthetic comment rows, deterministic for a given seed.

  Args:
    rows: number of rows.
    seed: random seed; ids and text depend only on (seed, row index).
    langs: language codes to draw from, a subset of `sample_text.LANGUAGES`.

  Returns:
    A lazy iterator of dicts with the keys of `COLUMNS`; `toxic` is an int.

  Raises:
    ValueError: if `rows` is negative or a language is unknown.
  """
  if rows < 0:
    raise ValueError(f'rows must be >= 0, got {rows}')
  unknown = sorted(set(langs) - set(sample_text.LANGUAGES))
  if unknown or not langs:
    raise ValueError(f'unknown languages {unknown}; choose from '
                     f'{sample_text.LANGUAGES}')
  # Validation above runs at call time; rows are produced lazily below.
  return _rows(rows, seed, tuple(langs))


def _rows(rows: int, seed: int,
          langs: Tuple[str, ...]) -> Iterator[Dict[str, object]]:
  cum_weights = list(itertools.accumulate(
      _LANGUAGE_WEIGHTS.get(lang, 1.0) for lang in langs))
  rng = random.Random(seed)
  for index in range(rows):
    lang = rng.choices(langs, cum_weights=cum_weights)[0]
    if rng.random() < _EMPTY_RATE:
      text, label = rng.choice(_BLANKS), 0
    else:
      toxic = rng.random() < _TOXIC_RATE
      text, ambiguous = sample_text.comment(rng, lang, toxic)
      flip_rate = _FLIP_RATE_AMBIGUOUS if ambiguous else _FLIP_RATE_CLEAR
      label = int(toxic != (rng.random() < flip_rate))
    yield {'id': row_id(seed, index), 'comment_text': text, 'toxic': label,
           'lang': lang}


def _open_writer(path: str):
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  # newline='' lets csv.writer control line ends: '\n' between records, and
  # newlines inside quoted text kept as written.
  handle = open(path, 'w', encoding='utf-8', newline='')
  writer = csv.writer(handle, lineterminator='\n')
  writer.writerow(COLUMNS)
  return handle, writer


def _values(row: Mapping[str, object]) -> Tuple[object, ...]:
  return tuple(row[column] for column in COLUMNS)


def write_csv(path: str, rows: Iterable[Mapping[str, object]]) -> int:
  """Streams rows into one UTF-8 CSV file with a header line.

  Args:
    path: file to write; parent directories are created.
    rows: dicts with the keys of `COLUMNS` (e.g. from `generate`).

  Returns:
    The number of data rows written.
  """
  handle, writer = _open_writer(path)
  count = 0
  with handle:
    for row in rows:
      writer.writerow(_values(row))
      count += 1
  return count


def shard_name(shard: int, shards: int) -> str:
  """File name of one shard: `comments.csv` when there is a single shard."""
  if shards == 1:
    return FILE_NAME
  return f'comments-{shard:05d}-of-{shards:05d}.csv'


def write_dataset(output_dir: str, rows: Iterable[Mapping[str, object]],
                  split: bool = False, shards: int = 1,
                  eval_fraction: float = 0.2) -> Dict[str, int]:
  """Writes rows in one of the two layouts the pipeline reads.

  Args:
    output_dir: data root to create.
    rows: dicts with the keys of `COLUMNS`.
    split: write `train/` and `eval/` subdirectories (rows are assigned by
      `is_eval_row`) instead of top-level files.
    shards: files per split; row i goes to shard i % shards.
    eval_fraction: share of rows in `eval/` when `split` is set.

  Returns:
    Rows written per file path.

  Raises:
    ValueError: if `shards` < 1 or `eval_fraction` is outside (0, 1).
  """
  if shards < 1:
    raise ValueError(f'shards must be >= 1, got {shards}')
  if split and not 0 < eval_fraction < 1:
    raise ValueError(f'eval_fraction must be in (0, 1), got {eval_fraction}')
  directories = ([os.path.join(output_dir, TRAIN_SPLIT),
                  os.path.join(output_dir, EVAL_SPLIT)]
                 if split else [output_dir])
  paths = [[os.path.join(d, shard_name(s, shards)) for s in range(shards)]
           for d in directories]
  opened = [[_open_writer(p) for p in split_paths] for split_paths in paths]
  counts = [[0] * shards for _ in directories]
  try:
    for index, row in enumerate(rows):
      d = int(split and is_eval_row(str(row['id']), eval_fraction))
      s = index % shards
      opened[d][s][1].writerow(_values(row))
      counts[d][s] += 1
  finally:
    for split_files in opened:
      for handle, _ in split_files:
        handle.close()
  return {path: count
          for split_paths, split_counts in zip(paths, counts)
          for path, count in zip(split_paths, split_counts)}


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Command-line entry point; returns the exit code."""
  parser = argparse.ArgumentParser(
      prog='python -m tfx_autostrategy.sample_data',
      description='Write seeded synthetic toxic-comment CSVs.')
  parser.add_argument('--rows', type=int, required=True)
  parser.add_argument('--output', required=True, help='data root to write')
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--split', action='store_true',
                      help='write train/ and eval/ subdirectories')
  parser.add_argument('--eval-fraction', type=float, default=0.2)
  parser.add_argument('--shards', type=int, default=1,
                      help='CSV files per split')
  parser.add_argument('--langs', default=','.join(sample_text.LANGUAGES),
                      help='comma-separated language codes')
  args = parser.parse_args(argv)
  try:
    rows = generate(args.rows, seed=args.seed, langs=args.langs.split(','))
    counts = write_dataset(args.output, rows, split=args.split,
                           shards=args.shards,
                           eval_fraction=args.eval_fraction)
  except ValueError as error:
    parser.error(str(error))
  for path, count in counts.items():
    print(f'{path}: {count} rows')
  return 0


if __name__ == '__main__':
  sys.exit(main())
