"""A pretrained checkpoint's own tokenizer, in-graph, as the Transform runs it.

A pretrained encoder only works on the ids its own tokenizer makes: the same
vocabulary, casing and accent rules, special tokens around the text and pad
id. `encode` makes them in TensorFlow ops (tensorflow_text), so the Transform
graph, which the serving signature contains, takes raw text in training and
in serving alike (the serving process must `import tensorflow_text`). The
vocabulary or SentencePiece model is embedded in the graph as a constant: the
exported model does not need the checkpoint directory.

The Transform outputs, all `[batch, sequence_length]` int64 (the names are
`settings.TEXT_IDS`, `settings.TEXT_MASK`, `settings.TEXT_TYPE_IDS`):

* `text_ids`: `[CLS] pieces [SEP]` (`<s> pieces </s>` for XLM-R), the pieces
  truncated to `sequence_length - 2` so the closing token stays, then the
  family's pad id (0 for BERT, 1 for XLM-R);
* `text_mask`: 1 for the real tokens (special tokens included), 0 for
  padding, from the real length (a pad id may also be a real token's id);
* `text_type_ids`: 0 everywhere (one segment).

WordPiece follows Hugging Face's BertNormalizer and BertPreTokenizer: control
characters dropped, whitespace made spaces, accents stripped (NFD, then
non-spacing marks dropped) and then lower-cased where the checkpoint does
that, words split on whitespace, punctuation and CJK ideographs, a word of
more than 100 characters is `[UNK]`. Known difference: Hugging Face also
recognises special-token text typed into the input (`[SEP]`); here it is
ordinary text (a user cannot inject control tokens).
"""

from typing import Dict

import tensorflow as tf

from tfx_autostrategy.modeling import pretrained_dir as pretrained_lib
from tfx_autostrategy import settings as settings_lib

# Hugging Face's is_control: Unicode category C, except tab, newline, return
# (those are whitespace); U+FFFD (a replacement character) goes too.
_CONTROL_RE = r'[\p{Cc}\p{Cf}\p{Co}\p{Cs}\x{FFFD}]'
_WHITESPACE_RE = r'[\t\n\r\p{Z}]'
# BertPreTokenizer's split points, kept as tokens of their own: ASCII
# punctuation and symbols, Unicode punctuation, and (handle_chinese_chars)
# each CJK ideograph.
_KEEP_SPLIT_RE = '|'.join([
    r'[!-/]', r'[:-@]', r'[\[-`]', r'[{-~]', r'\p{P}',
    r'[\x{4E00}-\x{9FFF}]', r'[\x{3400}-\x{4DBF}]', r'[\x{20000}-\x{2A6DF}]',
    r'[\x{2A700}-\x{2B73F}]', r'[\x{2B740}-\x{2B81F}]',
    r'[\x{2B820}-\x{2CEAF}]', r'[\x{F900}-\x{FAFF}]',
    r'[\x{2F800}-\x{2FA1F}]'])
# ... and spaces (all whitespace is a space after normalisation), dropped.
_SPLIT_RE = ' +|' + _KEEP_SPLIT_RE


def encode(text: tf.Tensor, described: pretrained_lib.PretrainedDir,
           length: int) -> Dict[str, tf.Tensor]:
  """`[batch]` raw strings to the checkpoint's fixed-length model inputs.

  Args:
    text: `[batch]` string tensor.
    described: the checkpoint's conventions (`pretrained_dir.describe`).
    length: tokens per example, special tokens included.

  Returns:
    `{TEXT_IDS, TEXT_MASK, TEXT_TYPE_IDS}`, each `[batch, length]` int64.

  Raises:
    ValueError: `length` leaves no room for a piece, or exceeds the
      checkpoint's position embeddings.
  """
  if length < 3:
    raise ValueError(f'sequence_length {length} is too short for a '
                     'pretrained encoder: it needs 2 special tokens and at '
                     'least one piece')
  if described.max_length and length > described.max_length:
    raise ValueError(
        f'sequence_length {length} exceeds the {described.max_length} '
        f'positions of the {described.model_type} checkpoint at '
        f'{described.path}')
  if described.tokenizer == pretrained_lib.SENTENCEPIECE:
    pieces = xlmr_pieces(text, described)
  else:
    pieces = wordpiece_pieces(text, described)
  return frame(pieces, described, length)


def frame(pieces: tf.RaggedTensor, described: pretrained_lib.PretrainedDir,
          length: int) -> Dict[str, tf.Tensor]:
  """Adds the special tokens to `[batch, (pieces)]` ids, pads, masks."""
  pieces = tf.cast(pieces, tf.int64)[:, :length - 2]
  rows = pieces.nrows()
  cls = tf.fill([rows, 1], tf.constant(described.cls_id, tf.int64))
  sep = tf.fill([rows, 1], tf.constant(described.sep_id, tf.int64))
  ids = tf.concat([cls, pieces, sep], axis=1)
  dense = ids.to_tensor(default_value=tf.constant(described.pad_id, tf.int64),
                        shape=[None, length])
  mask = tf.sequence_mask(ids.row_lengths(), length, dtype=tf.int64)
  return {settings_lib.TEXT_IDS: dense,
          settings_lib.TEXT_MASK: mask,
          settings_lib.TEXT_TYPE_IDS: tf.zeros_like(dense)}


def normalize_for_wordpiece(text: tf.Tensor, lower_case: bool,
                            strip_accents: bool) -> tf.Tensor:
  """Hugging Face's BertNormalizer (CJK spacing is left to the splitter)."""
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
  text = tf.strings.regex_replace(text, r'[\t\n\r]', ' ')
  text = tf.strings.regex_replace(text, _CONTROL_RE, '')
  text = tf.strings.regex_replace(text, _WHITESPACE_RE, ' ')
  if strip_accents:
    text = tf_text.normalize_utf8(text, 'NFD')
    text = tf.strings.regex_replace(text, r'\p{Mn}', '')
  if lower_case:
    text = tf.strings.lower(text, encoding='utf-8')
  return text


def wordpiece_pieces(text: tf.Tensor, described: pretrained_lib.PretrainedDir
                    ) -> tf.RaggedTensor:
  """`[batch, (pieces)]` WordPiece ids, without special tokens."""
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
  vocabulary = pretrained_lib.vocabulary(described.vocab_path)
  table = tf.lookup.StaticVocabularyTable(
      tf.lookup.KeyValueTensorInitializer(
          tf.constant(vocabulary),
          tf.range(len(vocabulary), dtype=tf.int64)),
      num_oov_buckets=1)
  text = normalize_for_wordpiece(text, described.lower_case,
                                 described.strip_accents)
  words = tf_text.regex_split(text, _SPLIT_RE, _KEEP_SPLIT_RE)
  too_long = tf.strings.length(words.flat_values, unit='UTF8_CHAR') > (
      pretrained_lib.WORDPIECE_MAX_CHARS_PER_WORD)
  words = words.with_flat_values(
      tf.where(too_long, described.unk_token, words.flat_values))
  # The length limit is in characters above; the op's own is in bytes.
  wordpiece = tf_text.WordpieceTokenizer(
      table, suffix_indicator='##',
      max_bytes_per_word=4 * pretrained_lib.WORDPIECE_MAX_CHARS_PER_WORD,
      token_out_type=tf.int64, unknown_token=described.unk_token)
  return wordpiece.tokenize(words).merge_dims(1, 2)


def xlmr_pieces(text: tf.Tensor, described: pretrained_lib.PretrainedDir
               ) -> tf.RaggedTensor:
  """`[batch, (pieces)]` XLM-R ids: SentencePiece ids in fairseq numbering.

  The SentencePiece model normalises the text itself (NFKC), keeps case,
  and numbers `<unk>`=0, `<s>`=1, `</s>`=2, ordinary pieces from 3; fairseq
  puts `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3 first, so an ordinary piece
  is its SentencePiece id + 1 and SentencePiece's `<unk>` becomes 3.
  """
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
  with tf.io.gfile.GFile(described.vocab_path, 'rb') as handle:
    model = handle.read()
  pieces = tf_text.SentencepieceTokenizer(
      model=model, out_type=tf.int32).tokenize(text)
  return pieces.with_flat_values(
      fairseq_ids(tf.cast(pieces.flat_values, tf.int64)))


def fairseq_ids(spm_ids: tf.Tensor) -> tf.Tensor:
  """SentencePiece ids of XLM-R's model to the checkpoint's (fairseq) ids."""
  return tf.where(spm_ids == 0,
                  tf.constant(pretrained_lib.XLMR_UNK, spm_ids.dtype),
                  spm_ids + 1)
