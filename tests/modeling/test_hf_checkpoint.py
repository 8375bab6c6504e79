"""Hugging Face checkpoint -> SavedModel encoder, checked on a real checkpoint.

The reference forward pass (tests/support/bert_reference.py) is written from
the published BERT / RoBERTa / DistilBERT definitions in NumPy, reading the
safetensors file with its own few lines; it shares no code with
tfx_autostrategy/modeling/hf_checkpoint.py. The token ids come from Hugging
Face's own tokenizer (`tokenizers` reading the checkpoint's tokenizer.json).
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from support import bert_reference
from support import tiny_checkpoint

from tfx_autostrategy import settings as settings_lib
from tfx_autostrategy.modeling import hf_checkpoint
from tfx_autostrategy.modeling import hub_encoder
from tfx_autostrategy.modeling import models
from tfx_autostrategy.modeling import pretrained_dir

# sentence-transformers' Quickstart (README and sbert.net docs) for
# all-MiniLM-L6-v2: model.similarity(embeddings, embeddings) of these three
# sentences prints
#   tensor([[1.0000, 0.6660, 0.1046],
#           [0.6660, 1.0000, 0.1411],
#           [0.1046, 0.1411, 1.0000]])
# (mean-pooled, normalised embeddings; cosine similarity).
PUBLISHED_SENTENCES = ['The weather is lovely today.', "It's so sunny outside!",
                       'He drove to the stadium.']
PUBLISHED_SIMILARITIES = np.array([[1.0000, 0.6660, 0.1046],
                                   [0.6660, 1.0000, 0.1411],
                                   [0.1046, 0.1411, 1.0000]])


# --- the real checkpoint ----------------------------------------------------

@pytest.fixture(scope='module')
def minilm_encoder(minilm_dir, tmp_path_factory):
  return hf_checkpoint.export(
      minilm_dir, str(tmp_path_factory.mktemp('minilm_encoder')))


def test_minilm_hidden_states_equal_a_numpy_forward_pass(minilm_dir,
                                                         minilm_encoder):
  texts = PUBLISHED_SENTENCES + ['Crème brûlée in Zürich — 東京 and Москва!']
  ids, mask = bert_reference.token_ids(minilm_dir, texts)
  assert ids[0, 0] == 101 and mask[0].sum() < ids.shape[1]  # [CLS]; padded.
  sequence, pooled = bert_reference.run_encoder(minilm_encoder, ids, mask,
                                                np.zeros_like(ids))
  tensors = bert_reference.read_safetensors(
      os.path.join(minilm_dir, 'model.safetensors'))
  with open(os.path.join(minilm_dir, 'config.json')) as f:
    config = json.load(f)
  want_sequence, want_pooled = bert_reference.forward(
      tensors, config, ids, mask, np.zeros_like(ids))
  real = mask.astype(bool)
  largest = np.abs(sequence - want_sequence)[real].max()
  print(f'largest hidden-state difference: {largest:.2e}')
  assert sequence.shape == (4, ids.shape[1], 384)
  assert largest < 1e-4
  assert np.abs(pooled - want_pooled).max() < 1e-4
  # The network is not the identity: the layers moved the embeddings.
  assert np.abs(want_sequence).max() > 1.0


def test_minilm_reproduces_the_published_sentence_similarities(
    minilm_dir, minilm_encoder):
  ids, mask = bert_reference.token_ids(minilm_dir, PUBLISHED_SENTENCES)
  sequence, _ = bert_reference.run_encoder(minilm_encoder, ids, mask,
                                           np.zeros_like(ids))
  weights = mask[:, :, None].astype(np.float32)
  embeddings = (sequence * weights).sum(1) / weights.sum(1)
  embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
  similarities = embeddings @ embeddings.T
  print('similarities:', np.round(similarities, 4).tolist())
  np.testing.assert_allclose(similarities, PUBLISHED_SIMILARITIES, atol=1e-3)


def test_the_converted_encoder_loads_as_a_trainable_keras_layer(
    minilm_encoder):
  layer = hub_encoder.SavedModelEncoder(minilm_encoder)
  names = [w.name for w in layer.trainable_weights]
  # 6 layers x 16 tensors + 5 embedding tensors + the pooler's 2.
  assert len(names) == 6 * 16 + 5 + 2
  assert any('layer_norm' in n for n in names)
  ids = tf.constant([[101, 7592, 102, 0]], tf.int32)
  mask = tf.constant([[1, 1, 1, 0]], tf.int32)
  inputs = {'input_word_ids': ids, 'input_mask': mask,
            'input_type_ids': tf.zeros_like(ids)}
  inference = layer(inputs, training=False)['pooled_output'].numpy()
  again = layer(inputs, training=False)['pooled_output'].numpy()
  dropped = layer(inputs, training=True)['pooled_output'].numpy()
  np.testing.assert_array_equal(inference, again)
  assert np.abs(dropped - inference).max() > 1e-3  # Dropout in training.


def test_the_converted_encoder_keeps_the_declared_pooling(minilm_dir,
                                                         minilm_encoder):
  """The Trainer hands build_hub the converted encoder, not the checkpoint.

  So the export carries modules.json and the Pooling config, and the head
  the Trainer builds mean-pools as all-MiniLM-L6-v2 declares (before, it
  found no modules.json there and read `pooled_output`).
  """
  assert pretrained_dir.declared_pooling(minilm_dir) == 'mean'
  assert pretrained_dir.declared_pooling(minilm_encoder) == 'mean'
  text_settings = settings_lib.TextSettings(
      sequence_length=8, tokenizer='pretrained', pretrained_model=minilm_dir)
  model = models.build(text_settings, settings_lib.TrainerSettings(
      model='hub', hub_model_path=minilm_encoder))
  assert 'mean_pooling' in [layer.name for layer in model.layers]


def test_the_pooling_files_are_part_of_the_cache_key(tmp_path):
  directory = str(tmp_path / 'ckpt')
  tiny_checkpoint.write(directory, 'bert')
  plain = hf_checkpoint.checkpoint_key(directory, 'float32')
  os.makedirs(os.path.join(directory, '1_Pooling'))
  with open(os.path.join(directory, 'modules.json'), 'w') as f:
    json.dump([{'idx': 1, 'name': '1', 'path': '1_Pooling',
                'type': 'sentence_transformers.models.Pooling'}], f)
  keys = []
  for mode in ('pooling_mode_mean_tokens', 'pooling_mode_cls_token'):
    with open(os.path.join(directory, '1_Pooling', 'config.json'), 'w') as f:
      json.dump({mode: True}, f)
    keys.append(hf_checkpoint.checkpoint_key(directory, 'float32'))
  assert len({plain, *keys}) == 3


# --- tiny random checkpoints of the other families ----------------------------

@pytest.mark.parametrize('model_type', ['xlm-roberta', 'distilbert', 'bert'])
def test_tiny_random_checkpoints_equal_the_numpy_forward_pass(tmp_path,
                                                              model_type):
  config, tensors = tiny_checkpoint.write(str(tmp_path / 'ckpt'), model_type)
  encoder_dir = hf_checkpoint.export(str(tmp_path / 'ckpt'),
                                     str(tmp_path / 'encoder'))
  # Rows of different real lengths, padded with the family's pad id.
  pad = 1 if model_type == 'xlm-roberta' else 0
  ids = np.array([[0, 5, 6, 7, 8, 2], [0, 9, 2, pad, pad, pad]])
  mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
  type_ids = np.zeros_like(ids)
  sequence, pooled = bert_reference.run_encoder(encoder_dir, ids, mask,
                                                type_ids)
  want_sequence, want_pooled = bert_reference.forward(
      tensors, config, ids, mask, type_ids)
  real = mask.astype(bool)
  np.testing.assert_allclose(sequence[real], want_sequence[real], atol=1e-4)
  np.testing.assert_allclose(pooled, want_pooled, atol=1e-4)
  if model_type == 'distilbert':  # No pooler: the [CLS] state.
    np.testing.assert_array_equal(pooled, sequence[:, 0])


def test_xlm_roberta_positions_start_after_the_pad_id(tmp_path):
  """fairseq positions: the first real token takes position pad_id + 1 = 2."""
  config, tensors = tiny_checkpoint.write(str(tmp_path / 'ckpt'), 'xlm-roberta')
  encoder_dir = hf_checkpoint.export(str(tmp_path / 'ckpt'),
                                     str(tmp_path / 'encoder'))
  ids, mask = np.array([[0, 5, 2]]), np.array([[1, 1, 1]])
  sequence, _ = bert_reference.run_encoder(encoder_dir, ids, mask,
                                           np.zeros_like(ids))
  # Shifting the positions by one (BERT's 0, 1, 2) gives another output.
  bert_like = dict(config, model_type='bert')
  shifted, _ = bert_reference.forward(tensors, bert_like, ids, mask,
                                      np.zeros_like(ids))
  assert np.abs(sequence - shifted).max() > 1e-2


def test_mixed_bfloat16_keeps_layer_norm_and_softmax_in_float32(tmp_path):
  tiny_checkpoint.write(str(tmp_path / 'ckpt'), 'bert')
  encoder = hf_checkpoint.build_encoder(str(tmp_path / 'ckpt'),
                                        'mixed_bfloat16')
  inputs = {'input_word_ids': tf.constant([[2, 5, 3]]),
            'input_mask': tf.ones([1, 3], tf.int32),
            'input_type_ids': tf.zeros([1, 3], tf.int32)}
  graph = tf.function(lambda x: encoder(x)).get_concrete_function(
      inputs).graph
  ops = graph.get_operations()
  softmax_types = {op.get_attr('T') for op in ops if op.type == 'Softmax'}
  matmul_types = {op.get_attr('T') for op in ops
                  if op.type in ('MatMul', 'BatchMatMulV2')}
  assert softmax_types == {tf.float32}
  assert tf.bfloat16 in matmul_types
  assert all(w.dtype == tf.float32 for w in encoder.weights)
  out = encoder(inputs)
  assert out['sequence_output'].dtype == tf.float32
  float32 = hf_checkpoint.build_encoder(str(tmp_path / 'ckpt'))(inputs)
  np.testing.assert_allclose(out['pooled_output'], float32['pooled_output'],
                             atol=0.1)


def _error(tmp_path, **kwargs):
  tiny_checkpoint.write(str(tmp_path / 'ckpt'), 'bert', **kwargs)
  with pytest.raises(hf_checkpoint.CheckpointError) as error:
    hf_checkpoint.build_encoder(str(tmp_path / 'ckpt'))
  return str(error.value)


def test_a_missing_tensor_is_named(tmp_path):
  message = _error(tmp_path, drop=('encoder.layer.1.output.dense.bias',))
  assert 'lacks' in message and 'encoder.layer.1.output.dense.bias' in message


def test_an_unexpected_tensor_is_named(tmp_path):
  message = _error(tmp_path, extra=('bert.encoder.layer.7.adapter.weight',))
  assert 'unexpected' in message and 'encoder.layer.7.adapter.weight' in message


def test_a_shape_that_does_not_fit_the_config_is_named(tmp_path):
  config, _ = tiny_checkpoint.write(str(tmp_path / 'ckpt'), 'bert')
  config['intermediate_size'] = 48
  with open(tmp_path / 'ckpt' / 'config.json', 'w') as f:
    json.dump(config, f)
  with pytest.raises(hf_checkpoint.CheckpointError,
                     match=r"encoder\.layer\.0\.intermediate\.dense\.weight' "
                           r'has shape \[32, 16\]'):
    hf_checkpoint.build_encoder(str(tmp_path / 'ckpt'))


def test_an_unsupported_model_type_is_refused_with_the_supported_list(
    tmp_path):
  os.makedirs(tmp_path / 'gpt')
  with open(tmp_path / 'gpt' / 'config.json', 'w') as f:
    json.dump({'model_type': 'gpt2'}, f)
  (tmp_path / 'gpt' / 'model.safetensors').write_bytes(b'')
  with pytest.raises(hf_checkpoint.CheckpointError,
                     match=r"model_type 'gpt2' is not supported.*bert, "
                           r'distilbert, xlm-roberta'):
    hf_checkpoint.encoder_path(str(tmp_path / 'gpt'),
                               cache_dir=str(tmp_path / 'cache'))


def test_a_directory_that_is_neither_is_refused(tmp_path):
  with pytest.raises(hf_checkpoint.CheckpointError,
                     match='neither a SavedModel.*nor a Hugging Face'):
    hf_checkpoint.encoder_path(str(tmp_path), cache_dir=str(tmp_path / 'c'))


def test_encoder_path_converts_once_and_passes_saved_models_through(tmp_path):
  tiny_checkpoint.write(str(tmp_path / 'ckpt'), 'bert')
  cache = str(tmp_path / 'cache')
  first = hf_checkpoint.encoder_path(str(tmp_path / 'ckpt'), cache_dir=cache)
  assert first.startswith(cache) and first.endswith('-float32-v2')
  stamp = os.path.getmtime(os.path.join(first, 'saved_model.pb'))
  assert hf_checkpoint.encoder_path(str(tmp_path / 'ckpt'),
                                    cache_dir=cache) == first
  assert os.path.getmtime(os.path.join(first, 'saved_model.pb')) == stamp
  assert os.listdir(cache) == [os.path.basename(first)]  # No staging left.
  bf16 = hf_checkpoint.encoder_path(str(tmp_path / 'ckpt'), 'mixed_bfloat16',
                                    cache_dir=cache)
  assert bf16 != first
  assert hf_checkpoint.encoder_path(first, cache_dir=cache) == first
