"""`auto` lengths: id counts, the percentile, rounding and caps."""

import collections
import tempfile

import pytest

from tfx_autostrategy.preflight import text_lengths
from tfx_autostrategy import settings as settings_lib

# Texts whose tokens differ in kind: punctuation runs, symbols, URLs, numbers,
# non-Latin scripts, combining marks, a no-break space (punctuation to RE2),
# vertical tab and other ASCII whitespace, long words, empty text.
TEXTS = [
    'You are an IDIOT, idiot!!!',
    'see https://example.com/x?y=1 at 10:30 😀😀 ok',
    'Привет МИР идиот... :(',
    'İstanbul ÇOK güzel',
    'नमस्ते दुनिया! यह एक परीक्षण है।',
    '日本語のテキスト、句読点。',
    'a\u00a0b\tc\nd\ve\ff\r g',
    'supercalifragilisticexpialidocious @user #fail :)',
    'x',
    '   ',
    '',
]


def test_word_and_ngram_counts_of_known_texts():
  # Literal counts: 'you are an idiot , idiot !!!' is 7 words; '<x>' gives
  # 2 bigrams + 1 trigram; '<ab>' 3 + 2 + 1; an n-gram counts once per text
  # ('<ab>' twice: 5 distinct 2-3-grams; '<aaaa>' has '<a', 'aa', 'a>').
  assert text_lengths.word_count(TEXTS[0]) == 7
  assert text_lengths.word_count('') == 0
  assert text_lengths.word_count('😀😀') == 2
  assert text_lengths.ngram_count('x', 2, 5) == 3
  assert text_lengths.ngram_count('ab', 2, 5) == 6
  assert text_lengths.ngram_count('ab ab', 2, 3) == 5
  assert text_lengths.ngram_count('aaaa', 2, 2) == 3
  assert text_lengths.ngram_count(' \t ', 2, 5) == 0


@pytest.mark.parametrize('histogram,cap,expected', [
    # 20 texts: the 95th percentile (nearest rank 19) is 67 -> 72; one text
    # of 100 ids is cut.
    ({10: 10, 50: 8, 67: 1, 100: 1}, 256, (72, 67, 0, 1, 20)),
    # A multiple of 8 stays; nothing above it.
    ({64: 20}, 256, (64, 64, 0, 0, 20)),
    # Short texts still get the minimum of 8.
    ({0: 5, 3: 15}, 256, (8, 3, 0, 0, 20)),
    # Past the cap: capped, and the texts above it counted.
    ({100: 2, 300: 18}, 256, (256, 300, 256, 18, 20)),
    ({2000: 1}, 1024, (1024, 2000, 1024, 1, 1)),
])
def test_pick_rounds_up_to_multiples_of_8_within_bounds(histogram, cap,
                                                        expected):
  choice = text_lengths.pick(collections.Counter(histogram), cap)
  assert (choice.length, choice.percentile, choice.cap, choice.truncated,
          choice.texts) == expected


def test_percentile_is_nearest_rank():
  # 100 texts with 1..100 ids: rank 95 is 95; 101 texts: rank 96.
  assert text_lengths.percentile({n: 1 for n in range(1, 101)}) == 95
  assert text_lengths.percentile({n: 1 for n in range(1, 102)}) == 96
  assert text_lengths.percentile({}) == 0


def test_describe_says_what_auto_picked_and_what_was_given():
  choices = {
      text_lengths.SEQUENCE_LENGTH: text_lengths.Choice(72, 67, 0, 98, 2400),
      text_lengths.CHAR_NGRAM_LENGTH: text_lengths.Choice(1024, 1500, 1024,
                                                          600, 2400)}
  assert text_lengths.describe(choices, {}, training_only=True) == (
      'lengths: --sequence-length auto -> 72 words (95th percentile 67; '
      'truncates 4.1 % of 2,400 training texts), --char-ngram-length auto -> '
      '1024 n-grams (95th percentile 1500, capped at 1024; truncates 25.0 %)')
  one = {text_lengths.CHAR_NGRAM_LENGTH:
         choices[text_lengths.CHAR_NGRAM_LENGTH]}
  assert text_lengths.describe(
      one, {text_lengths.SEQUENCE_LENGTH: 32}, training_only=False) == (
          'lengths: --sequence-length 32 (given), --char-ngram-length auto -> '
          '1024 n-grams (95th percentile 1500, capped at 1024; truncates '
          '25.0 % of 2,400 texts)')
  assert text_lengths.describe({}, {text_lengths.SEQUENCE_LENGTH: 32,
                                    text_lengths.CHAR_NGRAM_LENGTH: 64},
                               training_only=True) is None


def test_counter_fills_only_the_fields_asked_for():
  counter = text_lengths.LengthCounter([text_lengths.CHAR_NGRAM_LENGTH], 2, 5)
  for text in ('x', 'x', ''):
    counter.add(text)
  assert counter.histograms == {
      text_lengths.CHAR_NGRAM_LENGTH: collections.Counter({3: 2, 0: 1})}
  with pytest.raises(ValueError, match=r"unknown length fields \['words'\]"):
    text_lengths.LengthCounter(['words'], 2, 5)


def test_counts_equal_the_ids_the_real_transform_makes():
  """The counts are the non-padding ids of the real preprocessing_fn."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_transform.beam as tft_beam  # pylint: disable=g-import-not-at-top
  from tensorflow_transform.tf_metadata import dataset_metadata  # pylint: disable=g-import-not-at-top
  from tensorflow_transform.tf_metadata import schema_utils  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components.transform import preprocessing  # pylint: disable=g-import-not-at-top
  # Long enough for every text, one OOV bucket and no n-gram too rare, so
  # that every word and distinct n-gram has a non-zero id.
  text = settings_lib.TextSettings(
      sequence_length=text_lengths.WORD_CAP, vocab_min_frequency=1,
      num_oov_buckets=1, char_ngram_length=text_lengths.NGRAM_CAP,
      char_ngram_min_frequency=1)
  config = {'text': settings_lib.to_json(text)}
  metadata = dataset_metadata.DatasetMetadata(
      schema_utils.schema_from_feature_spec({
          'comment_text': tf.io.VarLenFeature(tf.string),
          'toxic': tf.io.FixedLenFeature([], tf.int64)}))
  rows = [{'comment_text': [t] if t else [], 'toxic': 0} for t in TEXTS]
  with tempfile.TemporaryDirectory() as temp_dir:
    with tft_beam.Context(temp_dir=temp_dir, force_tf_compat_v1=False):
      (transformed, _), _ = (
          (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
              lambda inputs: preprocessing.preprocessing_fn(inputs, config)))
  words = [int(np.count_nonzero(row[settings_lib.TEXT_IDS]))
           for row in transformed]
  grams = [int(np.count_nonzero(row[settings_lib.CHAR_NGRAMS]))
           for row in transformed]
  assert words == [text_lengths.word_count(t) for t in TEXTS]
  assert grams == [text_lengths.ngram_count(t, text.char_ngram_min,
                                            text.char_ngram_max)
                   for t in TEXTS]
  assert text_lengths.URL_TOKEN == preprocessing.URL_TOKEN
  # The texts are not all trivially short.
  assert max(words) >= 7 and max(grams) >= 100
