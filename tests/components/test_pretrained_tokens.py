"""A checkpoint's own tokenizer in the Transform graph, against the reference.

The reference for WordPiece is Hugging Face's `tokenizers` (Rust) reading
all-MiniLM-L6-v2's own tokenizer.json; for XLM-R's SentencePiece numbering it
is the `sentencepiece` package's ids mapped by hand to fairseq's.
"""

import os
import shutil
import tempfile

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata
from tensorflow_transform.tf_metadata import schema_utils
import tokenizers

from tfx_autostrategy.components.transform import preprocessing
from tfx_autostrategy.components.transform import pretrained_tokens
from tfx_autostrategy.modeling import pretrained_dir
from tfx_autostrategy import settings as settings_lib

from support import tokenizer_texts
from support import xlmr_checkpoint

LENGTH = 24
TEXTS = tokenizer_texts.TEXTS


def _reference(tokenizer_json, length):
  reference = tokenizers.Tokenizer.from_file(tokenizer_json)
  reference.enable_truncation(length)
  reference.enable_padding(length=length, pad_id=0)
  return reference


def _assert_matches_reference(out, texts, reference):
  for row, text in enumerate(texts):
    expected = reference.encode(text)
    assert out[settings_lib.TEXT_IDS][row].tolist() == expected.ids, text
    assert out[settings_lib.TEXT_MASK][row].tolist() == (
        expected.attention_mask), text
    assert out[settings_lib.TEXT_TYPE_IDS][row].tolist() == (
        expected.type_ids), text


def _encode(texts, described, length):
  out = pretrained_tokens.encode(tf.constant(texts), described, length)
  return {name: value.numpy() for name, value in out.items()}


@pytest.fixture(scope='module')
def minilm(minilm_dir):
  return pretrained_dir.describe(minilm_dir)


def test_wordpiece_ids_equal_the_checkpoints_own_tokenizer(minilm):
  out = _encode(TEXTS, minilm, LENGTH)
  for value in out.values():
    assert value.dtype == np.int64 and value.shape == (len(TEXTS), LENGTH)
  _assert_matches_reference(out, TEXTS, _reference(minilm.vocab_path, LENGTH))


def test_wordpiece_ids_by_hand(minilm):
  out = _encode(['Hello, WORLD!', '', 'the ' * 40, 'x' * 101], minilm, 8)
  # bert-base-uncased ids: hello 7592, ',' 1010, world 2088, '!' 999.
  assert out[settings_lib.TEXT_IDS].tolist() == [
      [101, 7592, 1010, 2088, 999, 102, 0, 0],
      [101, 102, 0, 0, 0, 0, 0, 0],
      [101, 1996, 1996, 1996, 1996, 1996, 1996, 102],
      [101, 100, 102, 0, 0, 0, 0, 0]]
  assert out[settings_lib.TEXT_MASK].tolist() == [
      [1] * 6 + [0] * 2, [1] * 2 + [0] * 6, [1] * 8, [1] * 3 + [0] * 5]
  assert not out[settings_lib.TEXT_TYPE_IDS].any()


def test_cased_wordpiece_keeps_case_and_accents(tmp_path, minilm):
  """A cased checkpoint (TF Hub layout): no lower-casing, no stripping."""
  vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', 'Café', 'café', 'cafe', 'Cafe',
           'The', 'the', '##s', 'É', 'é', 'e']
  (tmp_path / 'assets').mkdir()
  (tmp_path / 'saved_model.pb').write_bytes(b'')
  (tmp_path / 'assets' / 'vocab.txt').write_text('\n'.join(vocab) + '\n',
                                                 encoding='utf-8')
  cased = pretrained_dir.describe(str(tmp_path))
  assert not cased.lower_case
  out = _encode(['Café cafe The thes É'], cased, 10)
  assert out[settings_lib.TEXT_IDS].tolist() == [
      [2, 4, 6, 8, 9, 10, 11, 3, 0, 0]]


def test_length_is_checked_against_the_checkpoint(minilm):
  with pytest.raises(ValueError, match='exceeds the 512 positions'):
    pretrained_tokens.encode(tf.constant(['a']), minilm, 520)
  with pytest.raises(ValueError, match='too short'):
    pretrained_tokens.encode(tf.constant(['a']), minilm, 2)


def _transform(rows, text_settings, temp_dir):
  """Runs preprocessing_fn through tf.Transform's Beam implementation."""
  raw_spec = {'comment_text': tf.io.VarLenFeature(tf.string),
              'toxic': tf.io.FixedLenFeature([], tf.int64)}
  metadata = dataset_metadata.DatasetMetadata(
      schema_utils.schema_from_feature_spec(raw_spec))
  config = {'text': settings_lib.to_json(text_settings)}
  with tft_beam.Context(temp_dir=temp_dir, force_tf_compat_v1=False):
    (transformed, _), transform_fn = (
        (rows, metadata)
        | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing.preprocessing_fn(inputs, config)))
    out_dir = os.path.join(temp_dir, 'transform_fn')
    _ = transform_fn | tft_beam.WriteTransformFn(out_dir)
  return transformed, out_dir


def test_transform_and_its_saved_graph_tokenize_like_the_checkpoint(minilm):
  with tempfile.TemporaryDirectory() as temp_dir:
    # A copy of the tokenizer files, deleted before the saved graph is used:
    # the exported graph must carry the vocabulary itself.
    model = os.path.join(temp_dir, 'model')
    os.mkdir(model)
    for name in ('config.json', 'tokenizer.json', 'tokenizer_config.json',
                 'special_tokens_map.json'):
      shutil.copy(os.path.join(minilm.path, name), model)
    text_settings = settings_lib.TextSettings(
        tokenizer='pretrained', pretrained_model=model, char_ngram_min=0,
        sequence_length=LENGTH)
    rows = [{'comment_text': [text], 'toxic': i % 2}
            for i, text in enumerate(TEXTS[:5])]
    rows.append({'comment_text': [], 'toxic': 0})  # a missing value
    transformed, out_dir = _transform(rows, text_settings, temp_dir)
    shutil.rmtree(model)
    assert sorted(transformed[0]) == sorted([
        settings_lib.TEXT_IDS, settings_lib.TEXT_MASK,
        settings_lib.TEXT_TYPE_IDS, settings_lib.LABEL])
    texts = TEXTS[:5] + ['']
    out = {name: np.stack([row[name] for row in transformed])
           for name in transformed[0]}
    reference = _reference(minilm.vocab_path, LENGTH)
    _assert_matches_reference(out, texts, reference)
    # The saved Transform graph, as serving runs it, on unseen raw text.
    layer = tft.TFTransformOutput(out_dir).transform_features_layer()
    unseen = TEXTS[5:]
    served = layer({'comment_text': tf.sparse.from_dense(
        tf.constant([[t] for t in unseen]))})
    _assert_matches_reference(
        {name: value.numpy() for name, value in served.items()}, unseen,
        reference)


@pytest.fixture(scope='module')
def xlmr(tmp_path_factory):
  return pretrained_dir.describe(
      xlmr_checkpoint.write(tmp_path_factory.mktemp('xlmr')))


def test_xlmr_ids_follow_fairseq_numbering(xlmr):
  processor = spm.SentencePieceProcessor(model_file=xlmr.vocab_path)
  assert [processor.id_to_piece(i) for i in range(3)] == ['<unk>', '<s>',
                                                          '</s>']
  texts = ['Hello world', 'hello HELLO', 'Привет мир 龍', '', 'the sea ' * 20]
  length = 12
  out = _encode(texts, xlmr, length)
  for row, text in enumerate(texts):
    spm_ids = processor.encode(text)
    # fairseq: <s>=0, <pad>=1, </s>=2, <unk>=3, a piece is its spm id + 1.
    pieces = [3 if i == 0 else i + 1 for i in spm_ids][:length - 2]
    expected = [0] + pieces + [2]
    expected += [1] * (length - len(expected))
    assert out[settings_lib.TEXT_IDS][row].tolist() == expected, text
    real = len(pieces) + 2
    assert out[settings_lib.TEXT_MASK][row].tolist() == (
        [1] * real + [0] * (length - real)), text
  ids = out[settings_lib.TEXT_IDS]
  # Case is kept: "Hello" and "hello" are different pieces.
  assert ids[0][1] != ids[1][1]
  # An unseen character is <unk> (3), never SentencePiece's 0 + 1.
  assert 3 in ids[2].tolist()
  # The empty text is <s></s>, then <pad>; the mask counts <s> (id 0).
  assert ids[3].tolist()[:4] == [0, 2, 1, 1]
  assert out[settings_lib.TEXT_MASK][3].tolist()[:3] == [1, 1, 0]
  # Truncation keeps </s>.
  assert ids[4][-1] == 2 and out[settings_lib.TEXT_MASK][4].all()
  assert not out[settings_lib.TEXT_TYPE_IDS].any()


def test_fairseq_id_mapping_by_hand():
  spm_ids = tf.constant([0, 3, 4, 250001], tf.int64)
  assert pretrained_tokens.fairseq_ids(spm_ids).numpy().tolist() == [
      3, 4, 5, 250002]


def test_settings_refuse_a_sentencepiece_model_with_a_checkpoint():
  with pytest.raises(ValueError, match='conflicts with pretrained_model'):
    settings_lib.TextSettings(tokenizer='pretrained', pretrained_model='/m',
                              sentencepiece_model='/sp.model')
  with pytest.raises(ValueError, match='go together'):
    settings_lib.TextSettings(tokenizer='pretrained')
