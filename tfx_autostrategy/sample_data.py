"""Seeded synthetic toxic-comment data in Jigsaw CSV format.

The bundled sample (`tfx_autostrategy/sample/comments.csv`) and the data of
tests and benchmarks come from here; none of it is real user text. Rows have
the columns `id, comment_text, toxic, lang`:

* `id`: 16 hex digits, unique per (seed, row index) and independent of the
  number of rows, so `generate(1000)` is a prefix of `generate(2000)`.
* `comment_text`: built from per-language word lists (en, es, it, tr, ru, fr,
  pt, de) with URLs, numbers, emoji, mixed case, misspellings, obfuscated
  insults ("1d10t", "stuuupid"), commas, quotes and newlines (so CSV quoting
  is exercised) and a few empty or whitespace-only comments.
* `toxic`: 0/1. The task is learnable but not trivial: a toxic comment holds
  a plain insult only most of the time (otherwise an obfuscated one, or only
  hostile phrasing), neutral comments sometimes quote or negate an insult,
  and about 9 % of the labels are flipped, mostly on those ambiguous cases.
  A word TF-IDF + logistic regression trained on 2,000 rows reaches a ROC-AUC
  around 0.85 on held-out rows.

Output is deterministic: the same arguments give the same bytes.

Usage:
  python -m tfx_autostrategy.sample_data --rows 3000 --output DIR [--seed S]
      [--split] [--shards K]

writes DIR/comments.csv, or DIR/train/ and DIR/eval/ with `--split`.
"""

import argparse
import csv
import dataclasses
import importlib.resources
import itertools
import json
import os
import random
import sys
from typing import (Dict, Iterable, Iterator, List, Mapping, Optional,
                    Sequence, Tuple)

from tfx_autostrategy.components import csv_check
from tfx_autostrategy.components import settings

# The default column names of the pipeline, in Jigsaw order.
_DEFAULTS = settings.TextSettings()
COLUMNS = (_DEFAULTS.id_column, _DEFAULTS.text_column, _DEFAULTS.label_column,
           _DEFAULTS.slice_column)
FILE_NAME = 'comments.csv'
TRAIN_SPLIT, EVAL_SPLIT = csv_check.PRESPLIT_SPLITS

# Probabilities that shape the data; the AUC test in
# tests/test_sample_data.py pins the difficulty they produce.
_EMPTY_RATE = 0.015
_TOXIC_RATE = 0.22
# Label noise follows ambiguity, as annotator disagreement does: comments that
# only mention an insult, or are hostile without one, are flipped far more
# often than clear cases. Overall about 9 % of the labels are flipped.
_FLIP_RATE_CLEAR = 0.035
_FLIP_RATE_AMBIGUOUS = 0.45
# How a toxic comment shows its toxicity (the rest only by hostile phrasing).
_TOXIC_PLAIN = 0.85
_TOXIC_OBFUSCATED_ONLY = 0.09
# Neutral comments that mention an insult in a quoted or negated context.
_NEUTRAL_MENTION = 0.08
# Neutral comments that use an insult word about a thing, not a person.
_NEUTRAL_BARE_INSULT = 0.02
_NEUTRAL_HOSTILE = 0.03


@dataclasses.dataclass(frozen=True)
class _Vocabulary:
  """Word lists of one language.

  Attributes:
    neutral: everyday and wiki-talk words, function words included.
    insults: mild insults ("idiot", "stupid" and their translations).
    hostile: hostile phrases without an insult word ("nobody cares").
    you: second-person frame that precedes an insult ("you are").
    mentions: templates that quote or negate an insult; `{}` is the insult.
  """
  neutral: Tuple[str, ...]
  insults: Tuple[str, ...]
  hostile: Tuple[str, ...]
  you: Tuple[str, ...]
  mentions: Tuple[str, ...]


def _load_vocabularies() -> Dict[str, _Vocabulary]:
  """The word lists of every language, from `sample/vocabularies.json`."""
  text = importlib.resources.files('tfx_autostrategy').joinpath(
      'sample', 'vocabularies.json').read_text(encoding='utf-8')
  return {lang: _Vocabulary(**{name: tuple(words)
                               for name, words in lists.items()})
          for lang, lists in json.loads(text).items()}


# Language -> word lists, in the file's order (the generator draws from it).
_VOCABULARIES: Dict[str, _Vocabulary] = _load_vocabularies()

LANGUAGES = tuple(_VOCABULARIES)
# English dominates the real Jigsaw data; the others share the rest equally.
_LANGUAGE_WEIGHTS = {'en': 3.0}

_NEUTRAL_EMOJI = ('👍', '🙂', '😊', '🎉', '📚', '⚽', '🎵', '🌍')
_HOSTILE_EMOJI = ('🙄', '😡', '🤡', '🤬', '👎')
_URLS = ('https://example.org/wiki/{}', 'http://www.example.com/{}?id={}',
         'www.example.net/{}', 'https://example.com/a/{}#ref{}')
_END_NEUTRAL = ('.', '.', '.', '', '?', '!', '...', ' :)')
_END_TOXIC = ('.', '!', '!!', '!!!', '', '?!', '...')
_BLANKS = ('', '', ' ', '   ', '\n', '\t', ' \n ')
_LEET = {'a': '4', 'e': '3', 'i': '1', 'o': '0', 's': '5',
         'A': '4', 'E': '3', 'I': '1', 'O': '0', 'S': '$',
         'а': '@', 'о': '0', 'е': '3', 'з': '3', 'ı': '1', 'İ': '1'}
_VOWELS = frozenset('aeiouyáéíóúàèìòùâêîôûäöüıаеёиоуыэюя')

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


def _obfuscate(rng: random.Random, word: str) -> str:
  """Disguises an insult the way people dodge word filters."""
  style = rng.random()
  if style < 0.4:
    # Full substitution, so the same disguise ("1d10t") recurs across comments.
    leet = ''.join(_LEET.get(c, c) for c in word)
    if leet != word:
      return leet
  if style < 0.7:
    vowels = [i for i, c in enumerate(word) if c.lower() in _VOWELS]
    if vowels:
      i = rng.choice(vowels)
      return word[:i] + word[i] * rng.randint(3, 5) + word[i + 1:]
  if style < 0.85 and len(word) > 3:
    i = rng.randint(1, len(word) - 2)
    return word[:i] + '*' + word[i + 1:]
  return rng.choice(('.', ' ', '-')).join(word)


def _typo(rng: random.Random, word: str) -> str:
  """A misspelling: a repeated or a swapped letter."""
  if len(word) < 4:
    return word
  i = rng.randint(1, len(word) - 2)
  if rng.random() < 0.5:
    return word[:i] + word[i] + word[i:]
  return word[:i] + word[i + 1] + word[i] + word[i + 2:]


def _upper(text: str, lang: str) -> str:
  if lang == 'tr':
    # Turkish dotted/dotless i: str.upper() would turn 'i' into 'I'.
    text = text.replace('i', 'İ').replace('ı', 'I')
  return text.upper()


def _neutral_words(rng: random.Random, vocab: _Vocabulary) -> List[str]:
  if rng.random() < 0.1:
    length = rng.randint(20, 45)
  else:
    length = rng.randint(3, 16)
  words = rng.choices(vocab.neutral, k=length)
  if rng.random() < 0.1:
    i = rng.randrange(length)
    words[i] = _typo(rng, words[i])
  return words


def _insert(rng: random.Random, words: List[str], phrase: str) -> None:
  words.insert(rng.randint(0, len(words)), phrase)


def _toxic_text(rng: random.Random,
                vocab: _Vocabulary) -> Tuple[List[str], bool]:
  """Words of a toxic comment, and whether its toxicity is ambiguous."""
  words = _neutral_words(rng, vocab)
  if len(words) > 20:
    del words[rng.randint(8, 20):]
  mode = rng.random()
  plain = mode < _TOXIC_PLAIN
  if plain:
    for _ in range(rng.choice((1, 1, 2, 2, 3))):
      insult = rng.choice(vocab.insults)
      if rng.random() < 0.15:
        insult = _obfuscate(rng, insult)
      if rng.random() < 0.5:
        insult = rng.choice(vocab.you) + ' ' + insult
      _insert(rng, words, insult)
  elif mode < _TOXIC_PLAIN + _TOXIC_OBFUSCATED_ONLY:
    insult = _obfuscate(rng, rng.choice(vocab.insults))
    if rng.random() < 0.5:
      insult = rng.choice(vocab.you) + ' ' + insult
    _insert(rng, words, insult)
  if rng.random() < (0.15 if plain else 0.5):
    _insert(rng, words, rng.choice(vocab.hostile))
  return words, not plain


def _neutral_text(rng: random.Random,
                  vocab: _Vocabulary) -> Tuple[List[str], bool]:
  """Words of a neutral comment, and whether it is ambiguous."""
  words = _neutral_words(rng, vocab)
  ambiguous = False
  if rng.random() < _NEUTRAL_MENTION:
    _insert(rng, words, rng.choice(vocab.mentions).format(
        rng.choice(vocab.insults)))
    ambiguous = True
  if rng.random() < _NEUTRAL_BARE_INSULT:
    _insert(rng, words, rng.choice(vocab.insults))
    ambiguous = True
  if rng.random() < _NEUTRAL_HOSTILE:
    _insert(rng, words, rng.choice(vocab.hostile))
    ambiguous = True
  if rng.random() < 0.03:
    # A quoted word, so that quote characters are not a toxicity signal.
    i = rng.randrange(len(words))
    words[i] = '"' + words[i] + '"'
  return words, ambiguous


def _comment(rng: random.Random, lang: str, toxic: bool) -> Tuple[str, bool]:
  """One comment (words plus the decorations real comments have).

  Returns:
    The text, and whether its label is ambiguous.
  """
  vocab = _VOCABULARIES[lang]
  make_words = _toxic_text if toxic else _neutral_text
  words, ambiguous = make_words(rng, vocab)
  if rng.random() < 0.12:
    _insert(rng, words, str(rng.choice((
        rng.randint(1, 99), rng.randint(1900, 2024), rng.randint(1000, 99999),
        '%d,%03d' % (rng.randint(1, 99), rng.randint(0, 999)),
        '%.1f' % (rng.random() * 100)))))
  if rng.random() < 0.06:
    url = rng.choice(_URLS)
    _insert(rng, words, url.format(rng.choice(vocab.neutral).replace(' ', '_'),
                                   rng.randint(1, 9999)))
  if rng.random() < 0.12:
    emoji = _HOSTILE_EMOJI if toxic and rng.random() < 0.6 else _NEUTRAL_EMOJI
    words.append(rng.choice(emoji) * rng.randint(1, 3))
  if len(words) > 3 and rng.random() < 0.25:
    i = rng.randint(1, len(words) - 2)
    words[i] += ','
  if len(words) > 5 and rng.random() < 0.06:
    i = rng.randint(2, len(words) - 2)
    words[i] += rng.choice(('.\n', '\n\n', '\n- '))
  text = ' '.join(words)
  text += rng.choice(_END_TOXIC if toxic else _END_NEUTRAL)
  if rng.random() < (0.12 if toxic else 0.03):
    text = _upper(text, lang)
  elif rng.random() < 0.7:
    text = _upper(text[0], lang) + text[1:]
  if rng.random() < 0.02:
    text = ' ' + text + '  '
  return text, ambiguous


def generate(rows: int, seed: int = 0,
             langs: Sequence[str] = LANGUAGES) -> Iterator[Dict[str, object]]:
  """Synthetic comment rows, deterministic for a given seed.

  Args:
    rows: number of rows.
    seed: random seed; ids and text depend only on (seed, row index).
    langs: language codes to draw from, a subset of `LANGUAGES`.

  Returns:
    A lazy iterator of dicts with the keys of `COLUMNS`; `toxic` is an int.

  Raises:
    ValueError: if `rows` is negative or a language is unknown.
  """
  if rows < 0:
    raise ValueError(f'rows must be >= 0, got {rows}')
  unknown = sorted(set(langs) - set(LANGUAGES))
  if unknown or not langs:
    raise ValueError(f'unknown languages {unknown}; choose from {LANGUAGES}')
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
      text, ambiguous = _comment(rng, lang, toxic)
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
  parser.add_argument('--langs', default=','.join(LANGUAGES),
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
