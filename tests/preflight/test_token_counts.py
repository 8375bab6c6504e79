"""Preflight token counts against the Transform's tokens and the reference."""

import tensorflow as tf
import tokenizers

from tfx_autostrategy.components.transform import pretrained_tokens
from tfx_autostrategy.modeling import pretrained_dir
from tfx_autostrategy.preflight import text_lengths
from tfx_autostrategy.preflight import token_counts
from tfx_autostrategy import settings as settings_lib

from support import tokenizer_texts
from support import xlmr_checkpoint

TEXTS = tokenizer_texts.TEXTS + [
    'İstanbul ǅ Ǆ ΐ ﾊﾝｶｸ ＡＢＣ', 'a' * 100, 'é' * 100 + 'x', 'x' * 101,
    'unaffable counterintuitively', '  leading and trailing  ']


def _transform_lengths(texts, described):
  """Real tokens per text as the Transform makes them (no truncation)."""
  out = pretrained_tokens.encode(tf.constant(texts), described, 512)
  return out[settings_lib.TEXT_MASK].numpy().sum(axis=1).tolist()


def test_wordpiece_counts_equal_the_transform_and_the_reference(minilm_dir):
  described = pretrained_dir.describe(minilm_dir)
  count = token_counts.counter(described)
  counts = [count(text) for text in TEXTS]
  reference = tokenizers.Tokenizer.from_file(described.vocab_path)
  reference.no_truncation()
  reference.no_padding()
  assert counts == [len(reference.encode(text).ids) for text in TEXTS]
  # The over-long text counts past 512 (before truncation).
  assert counts[TEXTS.index(tokenizer_texts.TEXTS[-1])] == 182
  short = [text for text, n in zip(TEXTS, counts) if n <= 512]
  assert [n for n in counts if n <= 512] == _transform_lengths(short,
                                                               described)
  # By hand: [CLS] hello , world ! [SEP]; an empty text is [CLS] [SEP].
  assert (count('Hello, WORLD!'), count(''), count('x' * 101)) == (6, 2, 3)


def test_sentencepiece_counts_equal_the_transform(tmp_path):
  described = pretrained_dir.describe(xlmr_checkpoint.write(tmp_path))
  count = token_counts.counter(described)
  texts = ['Hello world', 'Привет мир 龍', '', 'the sea ' * 20]
  assert [count(text) for text in texts] == _transform_lengths(texts,
                                                               described)
  assert count('') == 2


def test_length_counter_counts_tokens_and_caps_at_the_positions():
  counter = text_lengths.LengthCounter(
      [text_lengths.SEQUENCE_LENGTH], 2, 5,
      text_lengths.PretrainedLength(count=len, cap=24))
  for text in ['x' * 10] * 18 + ['x' * 17, 'x' * 40]:
    counter.add(text)
  choice = text_lengths.pick_all(counter)[text_lengths.SEQUENCE_LENGTH]
  # 95th percentile of 20 texts (the 19th): 17 -> 24, the cap.
  assert (choice.length, choice.percentile, choice.cap, choice.truncated) == (
      24, 17, 0, 1)
  assert text_lengths.describe(
      {text_lengths.SEQUENCE_LENGTH: choice},
      {text_lengths.CHAR_NGRAM_LENGTH: 512}, True, units=counter.units) == (
          'lengths: --sequence-length auto -> 24 tokens (95th percentile 17; '
          'truncates 5.0 % of 20 training texts), --char-ngram-length 512 '
          '(given)')
  counter.add('x' * 40)
  counter.add('x' * 40)
  choice = text_lengths.pick_all(counter)[text_lengths.SEQUENCE_LENGTH]
  assert (choice.length, choice.percentile, choice.cap) == (24, 40, 24)
