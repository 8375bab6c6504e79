"""tf.Transform preprocessing: raw multilingual text to fixed-length int64 ids.

TPUs need static shapes, so all text processing happens here and ends in dense
`[batch, length]` tensors; the same graph is inside the serving signature, so
training and serving tokenise identically.

This directory is the Transform `module_file` package: TFX hashes it into the
Transform cache key, so editing this file re-runs Transform while editing the
Trainer does not. Only TensorFlow and tf.Transform ops are used on the default
path, so the exported model serves without this package (the SentencePiece
and pretrained-tokenizer paths need `import tensorflow_text` in the serving
process).
"""

from typing import Any, Dict, Optional, Tuple

import tensorflow as tf
import tensorflow_transform as tft

from tfx_autostrategy.components.transform import pretrained_tokens
from tfx_autostrategy.modeling import pretrained_dir
from tfx_autostrategy import settings as settings_lib

WORD_VOCABULARY = 'words'
CHAR_NGRAM_VOCABULARY = 'char_ngrams'
# Hash buckets of the n-grams' document frequencies (IDF).
IDF_BUCKETS = 2 ** 20
URL_TOKEN = 'xxurl'
NUMBER_TOKEN = 'xxnum'
# Word boundary markers for character n-grams, as in fastText.
_WORD_START = '<'
_WORD_END = '>'

_URL_RE = r'(?:https?://|www\.)\S+'
# Symbols (emoji and the like) become tokens of their own.
_SYMBOL_RE = r'(\p{So})'
# A run of punctuation (anything that is not a letter, a mark such as a
# combining accent or Devanagari vowel sign, a number, a symbol or space) is a
# token of its own: "!!", ":(", "?" and "@" carry much of the signal in short
# social-media text.
_PUNCTUATION_RE = r'([^\p{L}\p{M}\p{N}\p{So}\s]+)'
_WHITESPACE_RE = r'\s+'
_NUMBER_RE = r'\p{N}+'


def normalize(text: tf.Tensor) -> tf.Tensor:
  """Unicode-aware normalisation of a string tensor.

  Case folding uses the UTF-8 aware lower-casing of `tf.strings.lower`, which
  handles Cyrillic, Greek and accented Latin capitals, not just ASCII.

  Args:
    text: string tensor of any shape.

  Returns:
    A string tensor of the same shape: lower-cased, URLs replaced by a marker,
    symbols and punctuation runs set apart by single spaces.
  """
  text = _lower_and_mark_urls(text)
  text = tf.strings.regex_replace(text, _SYMBOL_RE, r' \1 ')
  text = tf.strings.regex_replace(text, _PUNCTUATION_RE, r' \1 ')
  text = tf.strings.regex_replace(text, _WHITESPACE_RE, ' ')
  return tf.strings.strip(text)


def _lower_and_mark_urls(text: tf.Tensor) -> tf.Tensor:
  text = tf.strings.lower(text, encoding='utf-8')
  return tf.strings.regex_replace(text, _URL_RE, ' ' + URL_TOKEN + ' ')


def coarse_words(text: tf.Tensor) -> tf.RaggedTensor:
  """Lower-cased, URL-marked `[batch]` text split on whitespace only.

  Character n-grams come from these, so "@user", "#fail" and ":)" keep their
  punctuation inside the n-grams (as scikit-learn's `char_wb` analyzer does).
  """
  return tf.strings.split(
      tf.strings.strip(tf.strings.regex_replace(
          _lower_and_mark_urls(text), _WHITESPACE_RE, ' ')))


def tokenize(text: tf.Tensor) -> tf.RaggedTensor:
  """Splits normalised `[batch]` text into `[batch, (tokens)]` words.

  Numbers become one marker token: their digits rarely generalise.
  """
  tokens = tf.strings.split(normalize(text))
  is_number = tf.strings.regex_full_match(tokens.flat_values, _NUMBER_RE)
  return tokens.with_flat_values(
      tf.where(is_number, NUMBER_TOKEN, tokens.flat_values))


def char_ngrams(tokens: tf.RaggedTensor, ngram_min: int,
                ngram_max: int) -> tf.RaggedTensor:
  """Character n-grams of every word, with word boundary markers.

  Args:
    tokens: `[batch, (words)]` string tokens.
    ngram_min: shortest n-gram length.
    ngram_max: longest n-gram length.

  Returns:
    `[batch, (ngrams)]` strings, n-grams of each word kept together.
  """
  marked = tf.strings.join([_WORD_START, tokens.flat_values, _WORD_END])
  chars = tf.strings.unicode_split(marked, 'UTF-8')
  grams = tf.strings.ngrams(
      chars, ngram_width=tuple(range(ngram_min, ngram_max + 1)), separator='')
  return tokens.with_flat_values(grams).merge_dims(1, 2)


def fixed_length(ids: tf.RaggedTensor, length: int) -> tf.Tensor:
  """Pads with 0 or truncates `[batch, (n)]` ids to a dense `[batch, length]`."""
  dense = ids.to_tensor(default_value=0, shape=[None, length])
  return tf.cast(dense, tf.int64)


def distinct_per_row(values: tf.RaggedTensor
                    ) -> Tuple[tf.RaggedTensor, tf.RaggedTensor]:
  """Each row's distinct strings in first-seen order, and how often each occurs.

  Args:
    values: `[batch, (n)]` strings.

  Returns:
    `([batch, (distinct)] strings, [batch, (distinct)] int64 counts)`.
  """
  rows = values.value_rowids()
  # The row number and a space cannot be confused with an n-gram's text.
  keys = tf.strings.join([tf.strings.as_string(rows), values.flat_values],
                         separator=' ')
  _, index, counts = tf.unique_with_counts(keys, out_idx=tf.int64)
  # tf.unique numbers keys in order of first occurrence, so the first
  # positions come out increasing: rows stay together and in text order.
  first = tf.math.unsorted_segment_min(
      tf.range(tf.size(keys, out_type=tf.int64)), index, tf.size(counts))
  distinct_rows = tf.gather(rows, first)
  nrows = values.nrows()
  return (tf.RaggedTensor.from_value_rowids(
              tf.gather(values.flat_values, first), distinct_rows, nrows=nrows),
          tf.RaggedTensor.from_value_rowids(counts, distinct_rows,
                                            nrows=nrows))


def inverse_document_frequency(buckets: tf.RaggedTensor) -> tf.Tensor:
  """Smoothed IDF of every hash bucket, from the training split (an analyzer).

  `ln((1 + documents) / (1 + documents with the n-gram)) + 1`, as in
  scikit-learn, from `[batch, (distinct n-grams)]` hash buckets of the
  n-gram text (`IDF_BUCKETS` of them). Document frequencies are counted per
  bucket, not per vocabulary id: an analyzer over the vocabulary's ids would
  need a second analysis phase (a second pass over the data; it crashed under
  the Beam 2.74 this project once locked, and runs on TFX's tested Beam 2.59,
  see tests/components/test_two_phase_transform.py). With 2^20 buckets a
  collision only adds a rare n-gram's count to a frequent one's.
  """
  in_batch = tf.math.bincount(tf.cast(buckets.flat_values, tf.int32),
                              minlength=IDF_BUCKETS, maxlength=IDF_BUCKETS,
                              dtype=tf.float32)
  document_frequency = tft.sum(in_batch[tf.newaxis, :],
                               reduce_instance_dims=False)
  documents = tf.cast(tft.size(buckets.row_lengths()), tf.float32)
  return tf.math.log((1.0 + documents) / (1.0 + document_frequency)) + 1.0


def tfidf_weights(buckets: tf.RaggedTensor, counts: tf.RaggedTensor,
                  idf: tf.Tensor) -> tf.RaggedTensor:
  """L2-normalised sublinear TF-IDF weight of each distinct n-gram of a row.

  `buckets` are the n-grams' hash buckets (the index into `idf`); the term
  frequency is `1 + ln(count)`. The linear part of the `bow` model sums its
  per-id coefficients with these weights, which makes it a logistic
  regression over TF-IDF features.
  """
  raw = ((1.0 + tf.math.log(tf.cast(counts.flat_values, tf.float32))) *
         tf.gather(idf, buckets.flat_values))
  norm = tf.sqrt(tf.reduce_sum(tf.square(buckets.with_flat_values(raw)),
                               axis=1))
  return buckets.with_flat_values(
      raw / tf.maximum(tf.gather(norm, buckets.value_rowids()), 1e-12))


def ngram_ids_and_weights(text: tf.Tensor,
                          text_settings: settings_lib.TextSettings
                         ) -> Tuple[tf.Tensor, tf.Tensor]:
  """Character n-gram ids from a vocabulary, each once, with TF-IDF weights.

  N-grams found in fewer than `char_ngram_min_frequency` training texts, or
  outside the top `char_ngram_vocab_size`, are dropped (a vocabulary instead
  of hash buckets: no two n-grams share an id, and the rare ones, most of
  them in Chinese text, do not take up the fixed length). A row keeps each
  n-gram once, in first-seen order, so `char_ngram_length` covers more of a
  long text; how often it occurred goes into its weight.

  Returns:
    `([batch, char_ngram_length] int64 ids, 0 is padding,
      [batch, char_ngram_length] float32 weights, 0 at padding)`.
  """
  grams = char_ngrams(coarse_words(text), text_settings.char_ngram_min,
                      text_settings.char_ngram_max)
  distinct, counts = distinct_per_row(grams)
  # Counted over distinct n-grams, the vocabulary's frequencies are document
  # frequencies.
  vocabulary = tft.vocabulary(
      distinct, top_k=text_settings.char_ngram_vocab_size,
      frequency_threshold=text_settings.char_ngram_min_frequency,
      vocab_filename=CHAR_NGRAM_VOCABULARY)
  buckets = distinct.with_flat_values(
      tf.strings.to_hash_bucket_fast(distinct.flat_values, IDF_BUCKETS))
  idf = inverse_document_frequency(buckets)
  ids = tft.apply_vocabulary(distinct, vocabulary, default_value=-1)
  known = ids >= 0
  length = text_settings.char_ngram_length
  ids = tf.ragged.boolean_mask(ids, known)[:, :length]
  weights = tfidf_weights(
      tf.ragged.boolean_mask(buckets, known)[:, :length],
      tf.ragged.boolean_mask(counts, known)[:, :length], idf)
  dense_weights = weights.to_tensor(default_value=0.0, shape=[None, length])
  return fixed_length(ids + 1, length), dense_weights


def dense_strings(feature: Any) -> tf.Tensor:
  """Turns a `[batch, (0 or 1)]` raw string feature into `[batch]` strings.

  A missing value (an empty CSV field) becomes the empty string.
  """
  if isinstance(feature, tf.SparseTensor):
    feature = tf.sparse.to_dense(
        tf.sparse.reset_shape(feature, [feature.dense_shape[0], 1]),
        default_value='')
  return tf.reshape(feature, [-1])


def dense_label(feature: Any) -> tf.Tensor:
  """Turns a `[batch, 1]` int label feature into `[batch]` int64."""
  if isinstance(feature, tf.SparseTensor):
    feature = tf.sparse.to_dense(
        tf.sparse.reset_shape(feature, [feature.dense_shape[0], 1]),
        default_value=-1)
  return tf.cast(tf.reshape(feature, [-1]), tf.int64)


def _sentencepiece_ids(text: tf.Tensor,
                       text_settings: settings_lib.TextSettings) -> tf.Tensor:
  """Ids from a SentencePiece model file (the kind XLM-R ships), in-graph."""
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
  with tf.io.gfile.GFile(text_settings.sentencepiece_model, 'rb') as f:
    model = f.read()
  tokenizer = tf_text.SentencepieceTokenizer(model=model, out_type=tf.int32)
  pieces = tokenizer.tokenize(tf.strings.lower(text, encoding='utf-8'))
  # Shift by one so that 0 stays the padding id.
  return fixed_length(pieces + 1, text_settings.sequence_length)


# TFX Transform will call this function.
def preprocessing_fn(inputs: Dict[str, Any],
                     custom_config: Optional[Dict[str, Any]] = None
                    ) -> Dict[str, tf.Tensor]:
  """Maps raw features to fixed-shape model inputs.

  Args:
    inputs: raw features parsed with the curated schema. Reads the text and
      label columns named in the text settings.
    custom_config: `{'text': <TextSettings as settings.to_dict>}` from the
      pipeline (JSON from `to_json` is read too); without it the
      `TextSettings` defaults apply.

  Returns:
    `settings.TEXT_IDS` `[batch, sequence_length]` int64 (0 is padding;
    with tokenizer='pretrained' the checkpoint's ids, special tokens and pad
    id, and `settings.TEXT_MASK` and `settings.TEXT_TYPE_IDS` too: see
    `pretrained_tokens`),
    `settings.CHAR_NGRAMS` `[batch, char_ngram_length]` int64 (distinct ids)
    and `settings.CHAR_NGRAM_WEIGHTS` (their TF-IDF weights, float32) when
    n-grams are enabled, and `settings.LABEL` `[batch]` int64 when the label
    is present.
  """
  text_settings = settings_lib.from_json(
      settings_lib.TextSettings, (custom_config or {}).get('text', '{}'))
  text = dense_strings(inputs[text_settings.text_column])
  outputs = {}
  if text_settings.tokenizer == 'pretrained':
    outputs.update(pretrained_tokens.encode(
        text, pretrained_dir.describe(text_settings.pretrained_model),
        text_settings.sequence_length))
  elif text_settings.tokenizer == 'sentencepiece':
    outputs[settings_lib.TEXT_IDS] = _sentencepiece_ids(text, text_settings)
  else:
    tokens = tokenize(text)
    word_ids = tft.compute_and_apply_vocabulary(
        tokens,
        top_k=text_settings.vocab_size,
        frequency_threshold=text_settings.vocab_min_frequency,
        num_oov_buckets=text_settings.num_oov_buckets,
        vocab_filename=WORD_VOCABULARY)
    outputs[settings_lib.TEXT_IDS] = fixed_length(
        word_ids + 1, text_settings.sequence_length)
  if text_settings.char_ngram_min:
    ids, weights = ngram_ids_and_weights(text, text_settings)
    outputs[settings_lib.CHAR_NGRAMS] = ids
    outputs[settings_lib.CHAR_NGRAM_WEIGHTS] = weights
  # Serving requests carry no label; the Transform layer prunes this output.
  if text_settings.label_column in inputs:
    outputs[settings_lib.LABEL] = dense_label(
        inputs[text_settings.label_column])
  return outputs
