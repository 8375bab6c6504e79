"""Token counts of a pretrained checkpoint's tokenizer, without TensorFlow.

`--sequence-length auto` with `--model hub` picks the length from how many
tokens the checkpoint's own tokenizer makes of the training texts, special
tokens included. The CSV preflight counts them before TensorFlow is
imported, so this mirrors `components/transform/pretrained_tokens.py` in
plain Python: the same normalisation and splitting (with the `regex`
package's Unicode classes where the Transform has RE2's) and WordPiece's
greedy longest-match; XLM-R's pieces come from the `sentencepiece` package
with the same model file. tests/preflight/test_token_counts.py checks the
counts against the Transform's own masks: if the Transform's tokenizer
changes, change this too.
"""

import functools
import unicodedata
from typing import Callable

import regex

from tfx_autostrategy.modeling import pretrained_dir as pretrained_lib

# The patterns of pretrained_tokens.py.
_CONTROL = regex.compile(r'[\p{Cc}\p{Cf}\p{Co}\p{Cs}\uFFFD]')
_WHITESPACE = regex.compile(r'[\t\n\r\p{Z}]')
_NON_SPACING_MARK = regex.compile(r'\p{Mn}')
_SPLIT = regex.compile(
    '( +|' + '|'.join([
        r'[!-/]', r'[:-@]', r'[\[-`]', r'[{-~]', r'\p{P}',
        r'[\U00004E00-\U00009FFF]', r'[\U00003400-\U00004DBF]',
        r'[\U00020000-\U0002A6DF]', r'[\U0002A700-\U0002B73F]',
        r'[\U0002B740-\U0002B81F]', r'[\U0002B820-\U0002CEAF]',
        r'[\U0000F900-\U0000FAFF]', r'[\U0002F800-\U0002FA1F]']) + ')')
# [CLS] ... [SEP], <s> ... </s>.
SPECIAL_TOKENS = 2


def counter(described: pretrained_lib.PretrainedDir) -> Callable[[str], int]:
  """A function giving the tokens of a text, special tokens included.

  The count is before truncation, so it can exceed any length.
  """
  if described.tokenizer == pretrained_lib.SENTENCEPIECE:
    return _sentencepiece_counter(described.vocab_path)
  return _WordpieceCounter(described)


def _sentencepiece_counter(model_path: str) -> Callable[[str], int]:
  import sentencepiece  # pylint: disable=g-import-not-at-top
  if '://' in model_path:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    with tf.io.gfile.GFile(model_path, 'rb') as handle:
      processor = sentencepiece.SentencePieceProcessor(
          model_proto=handle.read())
  else:
    processor = sentencepiece.SentencePieceProcessor(model_file=model_path)
  return lambda text: len(processor.encode(text)) + SPECIAL_TOKENS


class _WordpieceCounter:
  """WordPiece token counts with the checkpoint's vocabulary and casing."""

  def __init__(self, described: pretrained_lib.PretrainedDir):
    self._vocabulary = frozenset(
        pretrained_lib.vocabulary(described.vocab_path))
    self._lower_case = described.lower_case
    self._strip_accents = described.strip_accents
    # Words repeat across texts: most lookups are cache hits.
    self._pieces = functools.lru_cache(maxsize=1 << 16)(self._word_pieces)

  def normalize(self, text: str) -> str:
    text = _WHITESPACE.sub(' ', _CONTROL.sub('', regex.sub(r'[\t\n\r]', ' ',
                                                           text)))
    if self._strip_accents:
      text = _NON_SPACING_MARK.sub('', unicodedata.normalize('NFD', text))
    if self._lower_case:
      text = text.lower()
    return text

  def words(self, text: str):
    return [word for word in _SPLIT.split(self.normalize(text))
            if word and not word.startswith(' ')]

  def _word_pieces(self, word: str) -> int:
    """Pieces of one word: greedy longest match first, else one [UNK]."""
    if len(word) > pretrained_lib.WORDPIECE_MAX_CHARS_PER_WORD:
      return 1
    pieces, start = 0, 0
    while start < len(word):
      end = len(word)
      while end > start:
        piece = word[start:end] if not start else '##' + word[start:end]
        if piece in self._vocabulary:
          break
        end -= 1
      if end == start:
        return 1
      pieces += 1
      start = end
    return pieces

  def __call__(self, text: str) -> int:
    return sum(self._pieces(word) for word in self.words(text)) + (
        SPECIAL_TOKENS)
