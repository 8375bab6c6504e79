"""tf.Transform preprocessing: raw multilingual text to fixed-length int64 ids.

TPUs need static shapes, so all text processing happens here and ends in dense
`[batch, length]` tensors; the same graph is inside the serving signature, so
training and serving tokenise identically.

This directory is the Transform `module_file` package: TFX hashes it into the
Transform cache key, so editing this file re-runs Transform while editing the
Trainer does not. Only TensorFlow and tf.Transform ops are used on the default
path, so the exported model serves without this package (the SentencePiece
path needs `import tensorflow_text` in the serving process).
"""

from typing import Any, Dict, Optional

import tensorflow as tf
import tensorflow_transform as tft

from tfx_autostrategy.components import settings as settings_lib

WORD_VOCABULARY = 'words'
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
    `settings.TEXT_IDS` `[batch, sequence_length]` int64 (0 is padding),
    `settings.CHAR_NGRAMS` `[batch, char_ngram_length]` int64 when n-grams are
    enabled, and `settings.LABEL` `[batch]` int64 when the label is present.
  """
  text_settings = settings_lib.from_json(
      settings_lib.TextSettings, (custom_config or {}).get('text', '{}'))
  text = dense_strings(inputs[text_settings.text_column])
  outputs = {}
  if text_settings.tokenizer == 'sentencepiece':
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
    grams = char_ngrams(coarse_words(text), text_settings.char_ngram_min,
                        text_settings.char_ngram_max)
    gram_ids = tf.strings.to_hash_bucket_fast(
        grams.flat_values, text_settings.char_ngram_buckets)
    outputs[settings_lib.CHAR_NGRAMS] = fixed_length(
        grams.with_flat_values(gram_ids + 1), text_settings.char_ngram_length)
  # Serving requests carry no label; the Transform layer prunes this output.
  if text_settings.label_column in inputs:
    outputs[settings_lib.LABEL] = dense_label(
        inputs[text_settings.label_column])
  return outputs
