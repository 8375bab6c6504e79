"""Source-independent conversion: labels, dedup, subsampling, split, stats.

Every source yields `Record`s: `(source_id, text, label_name)`. A data set's
`labels` maps each label name to `1` (the positive, "unwanted" class), `0`,
or `None` (rows dropped, e.g. neutral tweets); any other name is an error that
names the row.

- Line breaks inside a text become spaces: CsvExampleGen reads CSVs line by
  line and would split such a record. Other control characters are removed.
- Duplicates (retweets, re-posted links, re-sent mails) would put the same
  text in both splits and inflate AUC, so rows are keyed on their text
  lower-cased, with URLs and whitespace runs removed: the first row of each key
  is kept, and keys whose rows disagree on the label are dropped entirely.
- If the positive class is above `max_positive_rate`, positives are kept when
  `sha256(seed:sample:key)` falls in the first `keep` share of the hash range,
  `keep` chosen so the expected rate is `max_positive_rate`. Like the split, it
  depends on the text only, never on row order.
- The split: `eval` gets a key when `sha256(seed:key)` falls in the first
  `eval_fraction` of the hash range, so a text and its duplicates always land
  in the same split.
"""

import csv
import hashlib
import os
import re
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

COLUMNS = ('id', 'comment_text', 'toxic', 'lang')
DEFAULT_SEED = 20240601
DEFAULT_EVAL_FRACTION = 0.2

Row = Dict[str, str]
Record = Tuple[str, str, str]

_URL_RE = re.compile(r'(?:https?://|www\.)\S*', re.IGNORECASE)
_SPACE_RE = re.compile(r'\s+')
_LINE_BREAK_RE = re.compile(r'[\r\n\x0b\x0c\x85\u2028\u2029]+')
# NUL and the other control characters (a few spam mails carry them) cannot be
# written to a CSV field and mean nothing as text.
_CONTROL_RE = re.compile(r'[\x00-\x08\x0e-\x1f\x7f]')


def dedup_key(text: str) -> str:
  """The key under which two texts count as the same.

  Retweets and re-posted links differ only in case, whitespace and shortened
  URLs (each post gets its own t.co link, often cut off), so those are removed.

  Args:
    text: the text.

  Returns:
    The lower-cased text without URLs, whitespace runs collapsed.
  """
  text = _URL_RE.sub(' ', text.lower())
  return _SPACE_RE.sub(' ', text).strip()


def _hash_below(salted_key: str, fraction: float) -> bool:
  digest = hashlib.sha256(salted_key.encode('utf-8')).digest()
  return int.from_bytes(digest[:8], 'big') < fraction * 2**64


def in_eval(key: str, seed: int, eval_fraction: float) -> bool:
  """Whether the seeded hash of `key` puts it in the eval split."""
  return _hash_below(f'{seed}:{key}', eval_fraction)


def convert(records: Iterable[Record], labels: Mapping[str, Optional[int]],
            lang: str, id_prefix: str, seed: int = DEFAULT_SEED,
            eval_fraction: float = DEFAULT_EVAL_FRACTION,
            max_positive_rate: Optional[float] = None
           ) -> Tuple[List[Row], List[Row], Dict[str, int]]:
  """Turns one source's records into Jigsaw rows, deduplicated and split.

  Args:
    records: `(source_id, text, label_name)` in source order.
    labels: label name -> 1, 0, or None (dropped).
    lang: the language code written to every row.
    id_prefix: prefix of the `id` column (`<prefix>-<source_id>`).
    seed: salt of the split and subsampling hashes.
    eval_fraction: share of the hash range that goes to eval.
    max_positive_rate: subsample positives down to this expected rate, if
      they are above it; None keeps them all.

  Returns:
    `(train_rows, eval_rows, counts)`: rows with the `COLUMNS` keys in source
    order, and how many records were dropped for which reason.

  Raises:
    ValueError: if a record's label is not in `labels`, naming the record.
  """
  kept: Dict[str, Row] = {}
  conflicting = set()
  counts = {'source_rows': 0, 'dropped_label': 0, 'empty_text': 0,
            'duplicates': 0, 'conflicting_label_texts': 0,
            'subsampled_positives': 0}
  for source_id, text, label_name in records:
    counts['source_rows'] += 1
    if label_name not in labels:
      raise ValueError(f'{id_prefix} record {source_id}: unknown label '
                       f'{label_name!r} (known: {sorted(labels)})')
    label = labels[label_name]
    if label is None:
      counts['dropped_label'] += 1
      continue
    # CsvExampleGen reads CSVs line by line, so a line break inside a quoted
    # field would split the record.
    text = _LINE_BREAK_RE.sub(' ', _CONTROL_RE.sub('', text)).strip()
    key = dedup_key(text)
    if not key:
      counts['empty_text'] += 1
      continue
    row = {'id': f'{id_prefix}-{source_id}', 'comment_text': text,
           'toxic': str(label), 'lang': lang}
    if key in kept:
      counts['duplicates'] += 1
      if kept[key]['toxic'] != row['toxic']:
        conflicting.add(key)
      continue
    kept[key] = row
  counts['conflicting_label_texts'] = len(conflicting)
  unique = {key: row for key, row in kept.items() if key not in conflicting}
  keep = _positive_keep_share(unique.values(), max_positive_rate)
  train_rows, eval_rows = [], []
  for key, row in unique.items():
    if row['toxic'] == '1' and not _hash_below(f'{seed}:sample:{key}', keep):
      counts['subsampled_positives'] += 1
      continue
    (eval_rows if in_eval(key, seed, eval_fraction) else train_rows).append(row)
  return train_rows, eval_rows, counts


def _positive_keep_share(rows: Iterable[Row],
                         max_positive_rate: Optional[float]) -> float:
  """The share of positives to keep so their expected rate is the maximum."""
  labels = [row['toxic'] for row in rows]
  positives, negatives = labels.count('1'), labels.count('0')
  if max_positive_rate is None or positives == 0:
    return 1.0
  if positives / (positives + negatives) <= max_positive_rate:
    return 1.0
  # p' / (p' + n) = r  <=>  p' = r n / (1 - r).
  return max_positive_rate * negatives / ((1 - max_positive_rate) * positives)


def _percentile(values: Sequence[int], q: float) -> int:
  """The nearest-rank percentile (no interpolation: a real text's length)."""
  ordered = sorted(values)
  rank = max(1, -(-len(ordered) * q // 100))
  return int(ordered[int(rank) - 1])


def summary(rows: Sequence[Row]) -> Dict[str, float]:
  """Rows, positives, positive rate and text lengths of one split.

  Words are whitespace-separated tokens (for Chinese, which is written without
  spaces, the character counts are the meaningful ones).
  """
  positives = sum(row['toxic'] == '1' for row in rows)
  words = [len(row['comment_text'].split()) for row in rows] or [0]
  chars = [len(row['comment_text']) for row in rows] or [0]
  return {'rows': len(rows), 'positives': positives,
          'positive_rate': round(positives / max(len(rows), 1), 4),
          'words_mean': round(sum(words) / len(words), 1),
          'words_p95': _percentile(words, 95),
          'chars_mean': round(sum(chars) / len(chars), 1),
          'chars_p95': _percentile(chars, 95)}


def write_csv(path: str, rows: Sequence[Row]) -> None:
  """Writes Jigsaw-format rows with a header and `\\n` line endings."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w', encoding='utf-8', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator='\n')
    writer.writeheader()
    writer.writerows(rows)
