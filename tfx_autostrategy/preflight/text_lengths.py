"""Fixed lengths from the data: `--sequence-length auto`, `--char-ngram-length auto`.

The Transform pads or truncates every text to a fixed number of word ids and
of character n-gram ids (TPUs need static shapes). With `auto`, the CSV
preflight counts, for every training text, how many ids the Transform would
produce before padding (`LengthCounter`), and `pick` takes the 95th
percentile, rounded up to a multiple of 8 (the TPU tiles by 8) and bounded
by `MINIMUM` and a cap (`WORD_CAP`, `NGRAM_CAP`).

The counting mirrors `components/transform/preprocessing.py` without
TensorFlow (the preflight runs before it is imported), and
tests/preflight/test_text_lengths.py checks it against the real
`preprocessing_fn`: if the Transform's tokens change, change `word_count` and
`ngram_count` here, nowhere else.

With a pretrained checkpoint's tokenizer (`--model hub`), the sequence
length counts that tokenizer's tokens, its two special tokens included
(`tfx_autostrategy/preflight/token_counts.py`), and the cap is the checkpoint's positions
(`PretrainedLength`). TensorFlow's regular expressions are RE2,
whose `\\s` is ASCII whitespace `[\\t\\n\\f\\r ]` (so a no-break space is
punctuation there), and `tf.strings.split` splits on ASCII whitespace
including `\\v`; the patterns below spell those classes out. `\\p{...}`
classes come from the `regex` package (a requirement of apache-beam, which
TFX needs), whose Unicode tables may be a version apart from RE2's: a code
point assigned between the two versions may count differently.
"""

import collections
import dataclasses
import functools
import math
from typing import Callable, Dict, Iterable, List, Mapping, Optional

import regex

from tfx_autostrategy import conventions

AUTO = 'auto'
PERCENTILE = 95
MINIMUM = conventions.TPU_MULTIPLE
# Word ids beyond 256 are rare in comment-style data and cost attention /
# embedding work on every example. N-gram ids are distinct per text: 4096
# cover about 500 words of English e-mail, where the model's AUC rose with
# the length up to there (1024: 0.9987, 2048: 0.9991, 4096: 0.9994; the
# TF-IDF baseline, which sees every word, 0.9994; bench/QUALITY.md).
WORD_CAP = 256
NGRAM_CAP = 4096
# A pretrained encoder's cap where its checkpoint does not say (a TF Hub
# SavedModel): the 512 positions of the BERT family.
PRETRAINED_CAP = 512

# preprocessing.URL_TOKEN (that module imports TensorFlow); its length
# counts in the n-grams.
URL_TOKEN = 'xxurl'

SEQUENCE_LENGTH = 'sequence_length'
CHAR_NGRAM_LENGTH = 'char_ngram_length'
# Field of TextSettings -> (flag, unit, cap).
FIELDS = {SEQUENCE_LENGTH: ('--sequence-length', 'words', WORD_CAP),
          CHAR_NGRAM_LENGTH: ('--char-ngram-length', 'n-grams', NGRAM_CAP)}

_URL = regex.compile(r'(?:https?://|www\.)[^\t\n\f\r ]+')
# One alternative per token kind of `preprocessing.tokenize`: a run of
# letters, marks and numbers; one symbol; a run of punctuation (anything
# else but whitespace; \v is split on by tf.strings.split).
_WORD_TOKEN = regex.compile(
    r'[\p{L}\p{M}\p{N}]+|\p{So}|[^\p{L}\p{M}\p{N}\p{So}\t\n\v\f\r ]+')
# `preprocessing.coarse_words`: runs of anything but ASCII whitespace.
_COARSE_WORD = regex.compile(r'[^\t\n\v\f\r ]+')


def _marked(text: str) -> str:
  return _URL.sub(' ' + URL_TOKEN + ' ', text.lower())


def word_count(text: str) -> int:
  """Word ids `preprocessing_fn` makes of `text` before padding."""
  return _word_count(_marked(text))


def _word_count(marked: str) -> int:
  return len(_WORD_TOKEN.findall(marked))


def ngram_count(text: str, ngram_min: int, ngram_max: int) -> int:
  """Distinct character n-grams of `text`: its n-gram ids before padding.

  Each whitespace-separated word gets a start and an end marker and gives
  its n-grams of every length in the range; the Transform keeps each
  distinct n-gram once per text. It also drops n-grams rare in the training
  split (`char_ngram_min_frequency`), which the preflight cannot know, so
  this is an upper bound of the ids: a picked length errs long.
  """
  return _ngram_count(_marked(text), ngram_min, ngram_max)


def _ngram_count(marked: str, ngram_min: int, ngram_max: int) -> int:
  words = set(_COARSE_WORD.findall(marked))
  if not words:
    return 0
  # The union runs in C over cached per-word sets: words repeat across
  # texts, so most are cache hits (this runs on every training text).
  return len(frozenset().union(
      *[_word_ngrams(word, ngram_min, ngram_max) for word in words]))


@functools.lru_cache(maxsize=1 << 16)
def _word_ngrams(word: str, ngram_min: int, ngram_max: int) -> frozenset:
  """The n-grams of one word with its start and end markers."""
  word = '<' + word + '>'
  return frozenset(word[i:i + width]
                   for width in range(ngram_min, ngram_max + 1)
                   for i in range(len(word) - width + 1))


@dataclasses.dataclass(frozen=True)
class PretrainedLength:
  """How to count the sequence length for a pretrained checkpoint.

  Attributes:
    count: text -> its tokens, special tokens included
      (`token_counts.counter`).
    cap: the most tokens the checkpoint takes (its positions).
  """
  count: Callable[[str], int]
  cap: int


class LengthCounter:
  """Histograms of the id counts of the texts added (the training texts)."""

  def __init__(self, fields: Iterable[str], ngram_min: int, ngram_max: int,
               pretrained: Optional[PretrainedLength] = None):
    """Counts the ids of `fields` (keys of `FIELDS`) for each text added.

    Args:
      fields: keys of `FIELDS`.
      ngram_min: shortest character n-gram.
      ngram_max: longest character n-gram.
      pretrained: count the sequence length in this tokenizer's tokens.
    """
    self.fields = tuple(fields)
    unknown = set(self.fields) - set(FIELDS)
    if unknown:
      raise ValueError(f'unknown length fields {sorted(unknown)}')
    self._ngram_range = (ngram_min, ngram_max)
    self._pretrained = pretrained
    self.histograms: Dict[str, collections.Counter] = {
        field: collections.Counter() for field in self.fields}
    self.caps = {field: FIELDS[field][2] for field in self.fields}
    self.units = {field: FIELDS[field][1] for field in FIELDS}
    if pretrained:
      self.caps[SEQUENCE_LENGTH] = pretrained.cap
      self.units[SEQUENCE_LENGTH] = 'tokens'

  def add(self, text: str) -> None:
    marked = _marked(text)
    if SEQUENCE_LENGTH in self.histograms:
      self.histograms[SEQUENCE_LENGTH][
          self._pretrained.count(text) if self._pretrained
          else _word_count(marked)] += 1
    if CHAR_NGRAM_LENGTH in self.histograms:
      self.histograms[CHAR_NGRAM_LENGTH][
          _ngram_count(marked, *self._ngram_range)] += 1


@dataclasses.dataclass(frozen=True)
class Choice:
  """A length picked from a histogram of id counts.

  Attributes:
    length: the picked length.
    percentile: the `PERCENTILE`th percentile of the counts (nearest rank).
    cap: the cap that applied, or 0 if the length is below it.
    truncated: texts with more ids than `length`.
    texts: texts counted.
  """
  length: int
  percentile: int
  cap: int
  truncated: int
  texts: int

  @property
  def truncated_share(self) -> float:
    return self.truncated / self.texts if self.texts else 0.0


def percentile(histogram: Mapping[int, int], share: float = PERCENTILE) -> int:
  """Nearest-rank percentile: the smallest count covering `share` % of texts."""
  texts = sum(histogram.values())
  if not texts:
    return 0
  rank = math.ceil(share / 100 * texts)
  seen = 0
  for count in sorted(histogram):
    seen += histogram[count]
    if seen >= rank:
      return count
  raise AssertionError('unreachable: the ranks sum to the texts')


def pick(histogram: Mapping[int, int], cap: int) -> Choice:
  """The length covering the 95th percentile, a multiple of 8 in [8, cap]."""
  texts = sum(histogram.values())
  value = percentile(histogram)
  multiple = conventions.TPU_MULTIPLE
  rounded = max(MINIMUM, -(-value // multiple) * multiple)
  length = min(rounded, cap)
  return Choice(
      length=length, percentile=value, cap=cap if rounded > cap else 0,
      truncated=sum(n for count, n in histogram.items() if count > length),
      texts=texts)


def pick_all(counter: LengthCounter) -> Dict[str, Choice]:
  """A `Choice` for each field `counter` counted."""
  return {field: pick(counter.histograms[field], counter.caps[field])
          for field in counter.fields}


def describe(choices: Mapping[str, Choice], given: Mapping[str, int],
             training_only: bool,
             notes: Optional[Mapping[str, str]] = None,
             units: Optional[Mapping[str, str]] = None) -> Optional[str]:
  """The one line saying what `auto` picked; None if every length was given.

  Args:
    choices: field -> what auto picked.
    given: field -> explicit length (shown as given).
    training_only: the texts are a training split (else all rows, which the
      pipeline splits later).
    notes: field -> why a length in `given` was not counted, said instead
      of 'given'.
    units: field -> what was counted, where not `FIELDS`' unit
      (`LengthCounter.units`).
  """
  if not choices and not notes:
    return None
  parts: List[str] = []
  said_texts = False
  for field, (flag, unit, _) in FIELDS.items():
    unit = (units or {}).get(field, unit)
    if field in given:
      note = (notes or {}).get(field, 'given')
      parts.append(f'{flag} {given[field]} ({note})')
      continue
    choice = choices[field]
    capped = f', capped at {choice.cap}' if choice.cap else ''
    of = ''
    if not said_texts:
      kind = 'training texts' if training_only else 'texts'
      of = f' of {choice.texts:,} {kind}'
      said_texts = True
    parts.append(
        f'{flag} auto -> {choice.length} {unit} ({PERCENTILE}th percentile '
        f'{choice.percentile}{capped}; truncates '
        f'{100 * choice.truncated_share:.1f} %{of})')
  return 'lengths: ' + ', '.join(parts)


def to_summary(choices: Mapping[str, Choice],
               given: Mapping[str, int]) -> Dict[str, Dict]:
  """Field -> how its length was set, as summary.json records it."""
  summary = {field: {'length': length, 'auto': False}
             for field, length in given.items()}
  for field, choice in choices.items():
    summary[field] = {'length': choice.length, 'auto': True,
                      'percentile': choice.percentile,
                      'capped_at': choice.cap, 'texts': choice.texts,
                      'truncated_share': round(choice.truncated_share, 4)}
  return summary
