"""preprocessing_fn through tf.Transform's real Beam implementation."""

import json
import tempfile

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata
from tensorflow_transform.tf_metadata import schema_utils

from tfx_autostrategy.components.transform import preprocessing
from tfx_autostrategy import settings as settings_lib

RAW_SPEC = {
    'comment_text': tf.io.VarLenFeature(tf.string),
    'toxic': tf.io.FixedLenFeature([], tf.int64),
}


def _transform(rows, **text_overrides):
  """Analyzes and transforms `rows` with tf.Transform on Beam DirectRunner."""
  text_settings = settings_lib.TextSettings(**{
      'vocab_min_frequency': 1, 'sequence_length': 6, 'num_oov_buckets': 1,
      'char_ngram_length': 12, **text_overrides})
  custom_config = {'text': settings_lib.to_json(text_settings)}
  metadata = dataset_metadata.DatasetMetadata(
      schema_utils.schema_from_feature_spec(RAW_SPEC))
  with tempfile.TemporaryDirectory() as temp_dir:
    with tft_beam.Context(temp_dir=temp_dir, force_tf_compat_v1=False):
      (transformed, _), transform_fn = (
          (rows, metadata)
          | tft_beam.AnalyzeAndTransformDataset(
              lambda inputs: preprocessing.preprocessing_fn(inputs,
                                                            custom_config)))
      out_dir = tempfile.mkdtemp(dir=temp_dir)
      _ = transform_fn | tft_beam.WriteTransformFn(out_dir)
      vocab = tft.TFTransformOutput(out_dir).vocabulary_by_name(
          preprocessing.WORD_VOCABULARY)
  return transformed, [w.decode() for w in vocab], text_settings


@pytest.fixture(scope='module')
def transformed():
  rows = [
      {'comment_text': ['You are an IDIOT, idiot!'], 'toxic': 1},
      {'comment_text': ['Nice day, nice people'], 'toxic': 0},
      {'comment_text': ['Привет МИР идиот'], 'toxic': 1},
      {'comment_text': ['İstanbul ÇOK güzel'], 'toxic': 0},
      {'comment_text': ['   '], 'toxic': 0},
      {'comment_text': [], 'toxic': 0},
      {'comment_text': ['one two three four five six seven eight nine'],
       'toxic': 0},
      {'comment_text': ['see https://example.com/x?y=1 at 10:30 😀'],
       'toxic': 0},
  ]
  return _transform(rows)


def test_known_tokens_get_their_vocabulary_ids(transformed):
  rows, vocab, _ = transformed
  ids = rows[0][settings_lib.TEXT_IDS]
  # "IDIOT" and "idiot" share one id after case folding; punctuation is a
  # token; ids are vocabulary index + 1 (0 is padding).
  expected = [vocab.index(w) + 1
              for w in ['you', 'are', 'an', 'idiot', ',', 'idiot']]
  assert ids.tolist() == expected
  assert ids.dtype == np.int64
  short = rows[3][settings_lib.TEXT_IDS].tolist()
  # Turkish dotted capital I folds to "i" + U+0307 (Unicode full case
  # mapping), one token; Turkish text is padded, not split apart.
  assert short == [vocab.index(w) + 1
                   for w in ['i\u0307stanbul', 'çok', 'güzel']] + [0, 0, 0]


def test_non_ascii_text_is_case_folded_and_tokenised(transformed):
  _, vocab, _ = transformed
  assert 'привет' in vocab and 'мир' in vocab and 'идиот' in vocab
  assert 'çok' in vocab and 'güzel' in vocab
  assert 'nice' in vocab and 'Nice' not in vocab


def test_urls_numbers_and_emoji_are_normalised(transformed):
  rows, vocab, _ = transformed
  assert preprocessing.URL_TOKEN in vocab
  assert preprocessing.NUMBER_TOKEN in vocab
  assert '😀' in vocab
  assert not any('example' in w for w in vocab)
  tokens = [vocab[i - 1] for i in rows[7][settings_lib.TEXT_IDS] if i]
  # "10:30" is number, punctuation, number; the emoji falls off the end.
  assert tokens == ['see', preprocessing.URL_TOKEN, 'at',
                    preprocessing.NUMBER_TOKEN, ':', preprocessing.NUMBER_TOKEN]


def test_empty_and_whitespace_text_is_all_padding(transformed):
  rows, _, settings = transformed
  for row in rows[4:6]:
    assert row[settings_lib.TEXT_IDS].tolist() == [0] * settings.sequence_length
    assert row[settings_lib.CHAR_NGRAMS].tolist() == [0] * settings.char_ngram_length
    assert row[settings_lib.CHAR_NGRAM_WEIGHTS].tolist() == [0.0] * settings.char_ngram_length


def test_long_text_is_truncated_to_fixed_length(transformed):
  rows, vocab, settings = transformed
  for row in rows:
    assert row[settings_lib.TEXT_IDS].shape == (settings.sequence_length,)
    assert row[settings_lib.CHAR_NGRAMS].shape == (settings.char_ngram_length,)
  tokens = [vocab[i - 1] for i in rows[6][settings_lib.TEXT_IDS]]
  assert tokens == ['one', 'two', 'three', 'four', 'five', 'six']


def test_labels_pass_through(transformed):
  rows, _, _ = transformed
  assert [r[settings_lib.LABEL] for r in rows] == [1, 0, 1, 0, 0, 0, 0, 0]


def test_char_ngrams_come_from_a_vocabulary_without_rare_ones(transformed):
  rows, _, settings = transformed
  grams = np.stack([r[settings_lib.CHAR_NGRAMS] for r in rows])
  assert grams.min() >= 0 and grams.max() <= settings.char_ngram_vocab_size
  # The first comment's n-grams that other texts share ('<a', 'e>', ...)
  # are kept, each once, then padding.
  ids = rows[0][settings_lib.CHAR_NGRAMS].tolist()
  known = [i for i in ids if i]
  assert len(known) >= 4 and len(set(known)) == len(known)
  assert ids == known + [0] * (12 - len(known))
  # 'Привет МИР идиот' is the only Cyrillic text: each of its n-grams is in
  # one training text, below char_ngram_min_frequency 2, so all are dropped
  # (though 'т>' ends two of its words: frequencies count texts).
  assert rows[2][settings_lib.CHAR_NGRAMS].tolist() == [0] * 12
  assert rows[2][settings_lib.CHAR_NGRAM_WEIGHTS].tolist() == [0.0] * 12


def test_ngram_ids_are_distinct_with_tfidf_weights():
  rows = [{'comment_text': ['ab'], 'toxic': 0},
          {'comment_text': ['ab ab'], 'toxic': 0},
          {'comment_text': ['ab cd'], 'toxic': 1}]
  transformed, _, _ = _transform(
      rows, char_ngram_min=2, char_ngram_max=2, char_ngram_length=8,
      char_ngram_min_frequency=1)
  ids = [r[settings_lib.CHAR_NGRAMS].tolist() for r in transformed]
  weights = [r[settings_lib.CHAR_NGRAM_WEIGHTS] for r in transformed]
  # '<a', 'ab', 'b>' once each, in text order, though 'ab ab' has each twice.
  assert ids[1] == ids[0] and ids[1][3:] == [0] * 5
  assert len(set(ids[0][:3])) == 3 and 0 not in ids[0][:3]
  # 'ab cd': the three 'ab' n-grams, then '<c', 'cd', 'd>', new ids.
  assert ids[2][:3] == ids[0][:3] and not set(ids[2][3:6]) & set(ids[0])
  # By hand: 3 documents; the 'ab' n-grams are in all 3, idf
  # ln(4/4) + 1 = 1; the 'cd' ones in 1, idf ln(4/2) + 1 = 1.6931; a row is
  # L2-normalised: 1 / sqrt(3 + 3 * 1.6931^2) = 0.29361, 0.49712.
  np.testing.assert_allclose(
      weights[2], [0.29361] * 3 + [0.49712] * 3 + [0, 0], atol=1e-5)
  # Equal weights within a row whatever the count (2 in 'ab ab').
  np.testing.assert_allclose(weights[1], [3 ** -0.5] * 3 + [0] * 5,
                             atol=1e-6)
  assert weights[2].dtype == np.float32


def test_out_of_vocabulary_words_go_to_oov_bucket():
  rows = [{'comment_text': ['common common rare'], 'toxic': 0},
          {'comment_text': ['common'], 'toxic': 1}]
  transformed, vocab, settings = _transform(rows, vocab_min_frequency=2)
  assert vocab == ['common']
  ids = transformed[0][settings_lib.TEXT_IDS]
  # 'rare' is below the frequency threshold: the single OOV bucket, id 1 + 1.
  assert ids[:3].tolist() == [1, 1, 2]
  assert settings.word_vocab_size == settings.vocab_size + 2


def test_normalize_sets_punctuation_apart_and_folds_case():
  out = preprocessing.normalize(tf.constant(['ÉCOLE,  très—BIEN!!', 'www.x.org ok']))
  assert [s.decode() for s in out.numpy()] == [
      'école , très — bien !!', preprocessing.URL_TOKEN + ' ok']


def test_char_ngram_words_keep_their_punctuation():
  words = preprocessing.coarse_words(
      tf.constant(['@United  #FAIL :) http://t.co/x', '']))
  assert [[w.decode() for w in row] for row in words.to_list()] == [
      ['@united', '#fail', ':)', preprocessing.URL_TOKEN], []]
  grams = preprocessing.char_ngrams(words[:1, :1], 2, 3)
  assert [g.decode() for g in grams[0].numpy()] == [
      '<@', '@u', 'un', 'ni', 'it', 'te', 'ed', 'd>',
      '<@u', '@un', 'uni', 'nit', 'ite', 'ted', 'ed>']


def test_text_settings_round_trip_through_json():
  settings = settings_lib.TextSettings(sequence_length=9, vocab_size=7)
  assert settings_lib.from_json(
      settings_lib.TextSettings, settings_lib.to_json(settings)) == settings
  with pytest.raises(ValueError, match="unknown TextSettings keys: \\['sequence_lenght'\\]"):
    settings_lib.from_json(settings_lib.TextSettings,
                           json.dumps({'sequence_lenght': 3}))
