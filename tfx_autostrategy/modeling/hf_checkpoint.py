"""Hugging Face checkpoints as TF Hub-convention SavedModel encoders.

Hugging Face `transformers` dropped TensorFlow in v5, so a TensorFlow user
holds a checkpoint directory (`config.json` + `model.safetensors` + tokenizer
files). This module reads it without PyTorch, builds the same network as a
tf_keras layer, loads the weights by name (shape-checked; a missing or an
unexpected tensor is an error naming it) and exports a SavedModel with the TF
Hub BERT-family interface: a dict of `input_word_ids`, `input_mask` and
`input_type_ids` (`[batch, length]` int32) in, `sequence_output`
(`[batch, length, width]`) and `pooled_output` (`[batch, width]`) out, both
float32. Every accelerator path then loads the encoder the same way,
through `hub_encoder.SavedModelEncoder`.

`pooled_output` is the checkpoint's trained pooler (`tanh(dense(h[:, 0]))`)
where it has one (BERT, XLM-R), else the first special token's hidden state
(`[CLS]`; DistilBERT has no pooler).

The safetensors format is parsed here (an 8-byte little-endian header
length, a JSON header of name -> dtype, shape and byte range, then the raw
buffer): it is simple, read-only use needs no extra runtime dependency, and
bfloat16 tensors (which NumPy lacks) are widened here exactly.

The trainer converts once per (checkpoint, precision) on the host, before
the distribution strategy's scope, into a cache directory keyed by the
checkpoint's SHA-256 (`encoder_path`).
"""

import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import struct
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

SUPPORTED_MODEL_TYPES = ('bert', 'distilbert', 'xlm-roberta')
CONFIG_FILE = 'config.json'
WEIGHTS_FILE = 'model.safetensors'
# Bump when the exported graph or directory changes: it is part of the cache
# key. 2: the export carries the checkpoint's declared pooling (modules.json).
CONVERTER_VERSION = 2
# sentence-transformers' module list: it names the Pooling module whose
# config.json says which summary of the token states the checkpoint was
# trained to make meaningful (`pretrained_dir.declared_pooling`).
MODULES_FILE = 'modules.json'
# Where converted encoders are cached unless the caller says otherwise.
CACHE_ENV = 'AUTOSTRATEGY_ENCODER_CACHE'
INPUT_NAMES = ('input_word_ids', 'input_mask', 'input_type_ids')

_ACTIVATIONS = {
    'gelu': lambda x: tf.nn.gelu(x, approximate=False),
    'gelu_new': lambda x: tf.nn.gelu(x, approximate=True),
    'gelu_pytorch_tanh': lambda x: tf.nn.gelu(x, approximate=True),
    'relu': tf.nn.relu,
}
# Tensors a checkpoint may carry beside the encoder: pretraining and task
# heads, and integer buffers. They are skipped (and logged), not loaded.
_HEAD_PREFIXES = ('cls.', 'lm_head.', 'vocab_transform.', 'vocab_layer_norm.',
                  'vocab_projector.', 'classifier.', 'pre_classifier.',
                  'qa_outputs.', 'dropout.')
_BUFFER_SUFFIXES = ('position_ids', 'token_type_ids')
_MODEL_PREFIXES = {'bert': 'bert.', 'distilbert': 'distilbert.',
                   'xlm-roberta': 'roberta.'}
_SAFETENSORS_DTYPES = {'F64': np.float64, 'F32': np.float32, 'F16': np.float16,
                       'I64': np.int64, 'I32': np.int32, 'I16': np.int16,
                       'I8': np.int8, 'U8': np.uint8, 'BOOL': np.bool_}


class CheckpointError(ValueError):
  """A checkpoint directory this converter cannot turn into an encoder."""


def is_checkpoint_dir(path: str) -> bool:
  """Whether `path` holds a Hugging Face checkpoint (config + safetensors)."""
  return (tf.io.gfile.exists(os.path.join(path, CONFIG_FILE)) and
          tf.io.gfile.exists(os.path.join(path, WEIGHTS_FILE)))


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
  """All tensors of a `.safetensors` file as NumPy arrays (bf16 -> float32).

  Raises:
    CheckpointError: the file is not a safetensors file or holds a dtype this
      reader does not know.
  """
  with tf.io.gfile.GFile(path, 'rb') as f:
    data = f.read()
  if len(data) < 8:
    raise CheckpointError(f'{path}: not a safetensors file (too short)')
  (header_size,) = struct.unpack('<Q', data[:8])
  if header_size > len(data) - 8:
    raise CheckpointError(f'{path}: not a safetensors file (header size '
                          f'{header_size} beyond the file)')
  try:
    header = json.loads(data[8:8 + header_size])
  except ValueError as error:
    raise CheckpointError(f'{path}: unreadable safetensors header: {error}'
                         ) from error
  buffer = memoryview(data)[8 + header_size:]
  tensors = {}
  for name, info in header.items():
    if name == '__metadata__':
      continue
    start, end = info['data_offsets']
    raw = buffer[start:end]
    shape = tuple(info['shape'])
    if info['dtype'] == 'BF16':
      # bfloat16 is the top half of a float32.
      halves = np.frombuffer(raw, dtype='<u2').astype(np.uint32) << 16
      array = halves.view(np.float32)
    elif info['dtype'] in _SAFETENSORS_DTYPES:
      array = np.frombuffer(
          raw, dtype=np.dtype(_SAFETENSORS_DTYPES[info['dtype']]).newbyteorder(
              '<'))
    else:
      raise CheckpointError(f'{path}: tensor {name!r} has dtype '
                            f'{info["dtype"]}, which this reader does not know')
    tensors[name] = array.reshape(shape)
  return tensors


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
  """The network's shape, read from a checkpoint's config.json.

  Attributes:
    model_type: one of SUPPORTED_MODEL_TYPES.
    vocab_size: rows of the word embedding.
    hidden_size: width of every hidden state.
    num_layers: encoder layers.
    num_heads: attention heads per layer.
    intermediate_size: width of the feed-forward layer.
    max_positions: rows of the position embedding.
    type_vocab_size: rows of the token type embedding (0: none, DistilBERT).
    layer_norm_eps: epsilon of every LayerNorm.
    activation: the feed-forward activation (a key of _ACTIVATIONS).
    position_offset: XLM-R's (fairseq's) positions count from pad id + 1
      over the real tokens; -1 for the plain 0..length-1 of BERT.
    hidden_dropout: dropout on embeddings and sublayer outputs in training.
    attention_dropout: dropout on attention probabilities in training.
  """
  model_type: str
  vocab_size: int
  hidden_size: int
  num_layers: int
  num_heads: int
  intermediate_size: int
  max_positions: int
  type_vocab_size: int
  layer_norm_eps: float
  activation: str
  position_offset: int = -1
  hidden_dropout: float = 0.1
  attention_dropout: float = 0.1


def read_config(directory: str) -> EncoderConfig:
  """Parses `directory/config.json`.

  Raises:
    CheckpointError: no config.json, an unsupported model type or activation,
      or a setting this network does not implement.
  """
  path = os.path.join(directory, CONFIG_FILE)
  if not tf.io.gfile.exists(path):
    raise CheckpointError(f'{directory!r} has no {CONFIG_FILE}: not a Hugging '
                          'Face checkpoint directory')
  with tf.io.gfile.GFile(path) as f:
    config = json.load(f)
  model_type = config.get('model_type', '')
  if model_type not in SUPPORTED_MODEL_TYPES:
    raise CheckpointError(
        f'{path}: model_type {model_type!r} is not supported: this converter '
        f'builds the encoders of {", ".join(SUPPORTED_MODEL_TYPES)}')
  if model_type == 'distilbert':
    activation = config.get('activation', 'gelu')
    if config.get('sinusoidal_pos_embds'):
      logging.info('hf_checkpoint: sinusoidal positions are read from the '
                   'checkpoint\'s position embedding')
    values = dict(
        vocab_size=config['vocab_size'], hidden_size=config['dim'],
        num_layers=config['n_layers'], num_heads=config['n_heads'],
        intermediate_size=config['hidden_dim'],
        max_positions=config['max_position_embeddings'], type_vocab_size=0,
        layer_norm_eps=1e-12, activation=activation,
        hidden_dropout=config.get('dropout', 0.1),
        attention_dropout=config.get('attention_dropout', 0.1))
  else:
    activation = config.get('hidden_act', 'gelu')
    embedding_type = config.get('position_embedding_type', 'absolute')
    if embedding_type != 'absolute':
      raise CheckpointError(
          f'{path}: position_embedding_type {embedding_type!r} is not '
          'supported (only absolute position embeddings)')
    values = dict(
        vocab_size=config['vocab_size'], hidden_size=config['hidden_size'],
        num_layers=config['num_hidden_layers'],
        num_heads=config['num_attention_heads'],
        intermediate_size=config['intermediate_size'],
        max_positions=config['max_position_embeddings'],
        type_vocab_size=config.get('type_vocab_size', 2),
        layer_norm_eps=config.get('layer_norm_eps', 1e-12),
        activation=activation,
        position_offset=(config.get('pad_token_id', 1) + 1
                         if model_type == 'xlm-roberta' else -1),
        hidden_dropout=config.get('hidden_dropout_prob', 0.1),
        attention_dropout=config.get('attention_probs_dropout_prob', 0.1))
  if activation not in _ACTIVATIONS:
    raise CheckpointError(
        f'{path}: activation {activation!r} is not supported (supported: '
        f'{", ".join(sorted(_ACTIVATIONS))})')
  if values['hidden_size'] % values['num_heads']:
    raise CheckpointError(f'{path}: hidden size {values["hidden_size"]} is not '
                          f'a multiple of {values["num_heads"]} heads')
  return EncoderConfig(model_type=model_type, **values)


def _layer_names(model_type: str, i: int) -> Dict[str, str]:
  """Canonical weight name -> checkpoint tensor name, for layer `i`."""
  if model_type == 'distilbert':
    p = f'transformer.layer.{i}.'
    return {
        'query/kernel': p + 'attention.q_lin.weight',
        'query/bias': p + 'attention.q_lin.bias',
        'key/kernel': p + 'attention.k_lin.weight',
        'key/bias': p + 'attention.k_lin.bias',
        'value/kernel': p + 'attention.v_lin.weight',
        'value/bias': p + 'attention.v_lin.bias',
        'attention_output/kernel': p + 'attention.out_lin.weight',
        'attention_output/bias': p + 'attention.out_lin.bias',
        'attention_layer_norm/gamma': p + 'sa_layer_norm.weight',
        'attention_layer_norm/beta': p + 'sa_layer_norm.bias',
        'intermediate/kernel': p + 'ffn.lin1.weight',
        'intermediate/bias': p + 'ffn.lin1.bias',
        'output/kernel': p + 'ffn.lin2.weight',
        'output/bias': p + 'ffn.lin2.bias',
        'output_layer_norm/gamma': p + 'output_layer_norm.weight',
        'output_layer_norm/beta': p + 'output_layer_norm.bias',
    }
  p = f'encoder.layer.{i}.'
  return {
      'query/kernel': p + 'attention.self.query.weight',
      'query/bias': p + 'attention.self.query.bias',
      'key/kernel': p + 'attention.self.key.weight',
      'key/bias': p + 'attention.self.key.bias',
      'value/kernel': p + 'attention.self.value.weight',
      'value/bias': p + 'attention.self.value.bias',
      'attention_output/kernel': p + 'attention.output.dense.weight',
      'attention_output/bias': p + 'attention.output.dense.bias',
      'attention_layer_norm/gamma': p + 'attention.output.LayerNorm.weight',
      'attention_layer_norm/beta': p + 'attention.output.LayerNorm.bias',
      'intermediate/kernel': p + 'intermediate.dense.weight',
      'intermediate/bias': p + 'intermediate.dense.bias',
      'output/kernel': p + 'output.dense.weight',
      'output/bias': p + 'output.dense.bias',
      'output_layer_norm/gamma': p + 'output.LayerNorm.weight',
      'output_layer_norm/beta': p + 'output.LayerNorm.bias',
  }


def checkpoint_names(config: EncoderConfig, has_pooler: bool
                    ) -> Dict[str, str]:
  """Canonical weight name -> checkpoint tensor name (prefix stripped)."""
  names = {
      'embeddings/word': 'embeddings.word_embeddings.weight',
      'embeddings/position': 'embeddings.position_embeddings.weight',
      'embeddings/layer_norm/gamma': 'embeddings.LayerNorm.weight',
      'embeddings/layer_norm/beta': 'embeddings.LayerNorm.bias',
  }
  if config.type_vocab_size:
    names['embeddings/type'] = 'embeddings.token_type_embeddings.weight'
  for i in range(config.num_layers):
    for name, tensor in _layer_names(config.model_type, i).items():
      names[f'layer_{i}/{name}'] = tensor
  if has_pooler:
    names['pooler/kernel'] = 'pooler.dense.weight'
    names['pooler/bias'] = 'pooler.dense.bias'
  return names


def _strip_prefix(config: EncoderConfig, tensors: Dict[str, np.ndarray]
                 ) -> Tuple[Dict[str, np.ndarray], List[str]]:
  """(encoder tensors without the model prefix, skipped tensor names)."""
  prefix = _MODEL_PREFIXES[config.model_type]
  prefixed = any(name.startswith(prefix) for name in tensors)
  kept, skipped = {}, []
  for name, value in tensors.items():
    if prefixed:
      if not name.startswith(prefix):
        if name.startswith(_HEAD_PREFIXES):
          skipped.append(name)
          continue
        kept[name] = value  # Reported as unexpected below.
        continue
      name = name[len(prefix):]
    if name.startswith(_HEAD_PREFIXES) or name.endswith(_BUFFER_SUFFIXES):
      skipped.append(name)
      continue
    # Checkpoints written by old BERT code name LayerNorm weights gamma/beta.
    name = name.replace('LayerNorm.gamma', 'LayerNorm.weight').replace(
        'LayerNorm.beta', 'LayerNorm.bias')
    kept[name] = value
  return kept, skipped


def _expected_shapes(config: EncoderConfig) -> Dict[str, Tuple[int, ...]]:
  """Canonical weight name -> its Keras shape (kernels are [in, out])."""
  h, inner = config.hidden_size, config.intermediate_size
  shapes = {
      'embeddings/word': (config.vocab_size, h),
      'embeddings/position': (config.max_positions, h),
      'embeddings/type': (config.type_vocab_size, h),
      'embeddings/layer_norm/gamma': (h,),
      'embeddings/layer_norm/beta': (h,),
      'pooler/kernel': (h, h),
      'pooler/bias': (h,),
  }
  for i in range(config.num_layers):
    for name in ('query', 'key', 'value', 'attention_output'):
      shapes[f'layer_{i}/{name}/kernel'] = (h, h)
      shapes[f'layer_{i}/{name}/bias'] = (h,)
    for name in ('attention_layer_norm', 'output_layer_norm'):
      shapes[f'layer_{i}/{name}/gamma'] = (h,)
      shapes[f'layer_{i}/{name}/beta'] = (h,)
    shapes[f'layer_{i}/intermediate/kernel'] = (h, inner)
    shapes[f'layer_{i}/intermediate/bias'] = (inner,)
    shapes[f'layer_{i}/output/kernel'] = (inner, h)
    shapes[f'layer_{i}/output/bias'] = (h,)
  return shapes


def encoder_weights(config: EncoderConfig, tensors: Dict[str, np.ndarray],
                    source: str = 'checkpoint') -> Dict[str, np.ndarray]:
  """Canonical weight name -> float32 array in Keras layout.

  PyTorch's linear weights are `[out, in]`; Keras kernels are `[in, out]`.

  Raises:
    CheckpointError: a tensor the network needs is missing, one the
      checkpoint holds is unknown, or a shape does not match the config.
  """
  kept, skipped = _strip_prefix(config, tensors)
  if skipped:
    logging.info('hf_checkpoint: %s: skipping %d head/buffer tensors (%s)',
                 source, len(skipped), ', '.join(sorted(skipped)[:5]))
  has_pooler = 'pooler.dense.weight' in kept
  names = checkpoint_names(config, has_pooler)
  missing = sorted(t for t in names.values() if t not in kept)
  if missing:
    raise CheckpointError(
        f'{source}: {config.model_type} checkpoint lacks tensor(s) '
        f'{", ".join(missing[:5])}' + (' ...' if len(missing) > 5 else ''))
  unexpected = sorted(set(kept) - set(names.values()))
  if unexpected:
    raise CheckpointError(
        f'{source}: unexpected tensor(s) for a {config.model_type} encoder: '
        f'{", ".join(unexpected[:5])}' + (' ...' if len(unexpected) > 5 else ''))
  shapes = _expected_shapes(config)
  weights = {}
  for name, tensor_name in names.items():
    value = np.asarray(kept[tensor_name], dtype=np.float32)
    if name.endswith('/kernel'):
      value = value.T
    if value.shape != shapes[name]:
      raise CheckpointError(
          f'{source}: tensor {tensor_name!r} has shape '
          f'{list(kept[tensor_name].shape)}; config.json implies '
          f'{list(shapes[name])} (transposed for a kernel)')
    weights[name] = value
  return weights


class PretrainedEncoder(tf.keras.layers.Layer):
  """A post-LayerNorm Transformer encoder (BERT, DistilBERT, XLM-R).

  One Keras weight per checkpoint tensor, named by its canonical name, so
  loading is by name. Under a mixed precision policy the matrix products run
  in the compute dtype while LayerNorm and softmax compute in float32 (their
  weights are never autocast).
  """

  def __init__(self, config: EncoderConfig, has_pooler: bool, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.has_pooler = has_pooler
    shapes = _expected_shapes(config)
    self.weight_by_name = {}
    for name in checkpoint_names(config, has_pooler):
      float32 = 'layer_norm' in name
      self.weight_by_name[name] = self.add_weight(
          name=name, shape=shapes[name], initializer='zeros',
          dtype='float32' if float32 else None,
          experimental_autocast=not float32)

  def _w(self, name: str) -> tf.Tensor:
    return self.weight_by_name[name]

  def _dense(self, x, prefix):
    return tf.matmul(x, self._w(prefix + '/kernel')) + self._w(prefix + '/bias')

  def _layer_norm(self, x, prefix):
    x = tf.cast(x, tf.float32)
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    normed = (x - mean) * tf.math.rsqrt(variance + self.config.layer_norm_eps)
    out = normed * self._w(prefix + '/gamma') + self._w(prefix + '/beta')
    return tf.cast(out, self.compute_dtype)

  def _dropout(self, x, rate, training):
    if training and rate:
      return tf.nn.dropout(x, rate=rate)
    return x

  # Python control flow on Python values only: no AutoGraph needed.
  @tf.autograph.experimental.do_not_convert
  def call(self, inputs, training=False):
    config = self.config
    ids = tf.cast(inputs['input_word_ids'], tf.int32)
    mask = tf.cast(inputs['input_mask'], tf.int32)
    length = tf.shape(ids)[1]
    if config.position_offset >= 0:
      # fairseq: real tokens count from padding_idx + 1, padding sits at
      # padding_idx.
      positions = (tf.cumsum(mask, axis=1) * mask + config.position_offset - 1)
    else:
      positions = tf.range(length)[tf.newaxis, :]
    x = (tf.gather(self._w('embeddings/word'), ids) +
         tf.gather(self._w('embeddings/position'), positions))
    if config.type_vocab_size:
      x += tf.gather(self._w('embeddings/type'),
                     tf.cast(inputs['input_type_ids'], tf.int32))
    x = self._layer_norm(x, 'embeddings/layer_norm')
    x = self._dropout(x, config.hidden_dropout, training)
    heads = config.num_heads
    head_size = config.hidden_size // heads
    # [batch, 1, 1, length]: 0 where attended, a large negative elsewhere.
    blocked = (1.0 - tf.cast(mask, tf.float32))[:, tf.newaxis, tf.newaxis, :]
    blocked *= -1e9
    activation = _ACTIVATIONS[config.activation]

    def split(t):
      t = tf.reshape(t, [-1, length, heads, head_size])
      return tf.transpose(t, [0, 2, 1, 3])

    for i in range(config.num_layers):
      p = f'layer_{i}'
      query = split(self._dense(x, p + '/query'))
      key = split(self._dense(x, p + '/key'))
      value = split(self._dense(x, p + '/value'))
      scores = tf.matmul(query, key, transpose_b=True)
      scores = tf.cast(scores, tf.float32) / math.sqrt(head_size) + blocked
      probabilities = tf.cast(tf.nn.softmax(scores, axis=-1), x.dtype)
      probabilities = self._dropout(probabilities, config.attention_dropout,
                                    training)
      context = tf.transpose(tf.matmul(probabilities, value), [0, 2, 1, 3])
      context = tf.reshape(context, [-1, length, config.hidden_size])
      attended = self._dropout(self._dense(context, p + '/attention_output'),
                               config.hidden_dropout, training)
      x = self._layer_norm(x + attended, p + '/attention_layer_norm')
      inner = activation(self._dense(x, p + '/intermediate'))
      out = self._dropout(self._dense(inner, p + '/output'),
                          config.hidden_dropout, training)
      x = self._layer_norm(x + out, p + '/output_layer_norm')
    first = x[:, 0]
    pooled = (tf.tanh(self._dense(first, 'pooler')) if self.has_pooler
              else first)
    return {'sequence_output': tf.cast(x, tf.float32),
            'pooled_output': tf.cast(pooled, tf.float32)}


def build_encoder(directory: str, precision: str = 'float32'
                 ) -> PretrainedEncoder:
  """The checkpoint's network as a Keras layer with its weights loaded.

  Args:
    directory: a Hugging Face checkpoint directory.
    precision: the Keras dtype policy to compute in (a plan's precision, one
      of `settings.PRECISIONS`).

  Raises:
    CheckpointError: see `read_config` and `encoder_weights`.
  """
  config = read_config(directory)
  weights_path = os.path.join(directory, WEIGHTS_FILE)
  if not tf.io.gfile.exists(weights_path):
    raise CheckpointError(
        f'{directory!r} has no {WEIGHTS_FILE} (PyTorch .bin checkpoints need '
        'PyTorch to read: save the model with safetensors)')
  weights = encoder_weights(config, read_safetensors(weights_path),
                            source=weights_path)
  encoder = PretrainedEncoder(
      config, has_pooler='pooler/kernel' in weights,
      dtype=tf.keras.mixed_precision.Policy(precision), name='encoder')
  for name, variable in encoder.weight_by_name.items():
    variable.assign(weights[name])
  return encoder


def _input_spec() -> Dict[str, tf.TensorSpec]:
  return {name: tf.TensorSpec([None, None], tf.int32, name=name)
          for name in INPUT_NAMES}


def export(directory: str, output_dir: str, precision: str = 'float32') -> str:
  """Converts the checkpoint in `directory` to a SavedModel in `output_dir`.

  The SavedModel's `__call__(inputs, training=False)` follows the TF Hub
  BERT-family convention (module docstring); `training=True` applies the
  checkpoint's dropout rates. It lists its `variables` and
  `trainable_variables` like a TF Hub reusable SavedModel.

  Returns:
    output_dir.
  """
  encoder = build_encoder(directory, precision)
  root = tf.__internal__.tracking.AutoTrackable()

  @tf.function
  def call(inputs, training=False):
    return encoder(inputs, training=training)

  for training in (False, True):
    call.get_concrete_function(_input_spec(), training=training)
  root.__call__ = call
  root.variables = list(encoder.weights)
  root.trainable_variables = list(encoder.trainable_weights)
  tf.saved_model.save(root, output_dir)
  for name in _pooling_files(directory):
    tf.io.gfile.makedirs(os.path.dirname(os.path.join(output_dir, name)))
    tf.io.gfile.copy(os.path.join(directory, name),
                     os.path.join(output_dir, name), overwrite=True)
  return output_dir


def _pooling_files(directory: str) -> List[str]:
  """The files declaring the checkpoint's pooling, relative to `directory`.

  `modules.json` and its Pooling module's `config.json`
  (all-MiniLM-L6-v2: `1_Pooling/config.json`), where the checkpoint has
  them. The export copies them beside saved_model.pb: the Trainer hands the
  converted encoder, not the checkpoint, to `models.build_hub`, whose head
  reads the declared pooling from the directory it gets.
  """
  if not tf.io.gfile.exists(os.path.join(directory, MODULES_FILE)):
    return []
  with tf.io.gfile.GFile(os.path.join(directory, MODULES_FILE)) as f:
    try:
      modules = json.load(f)
    except ValueError:
      return [MODULES_FILE]  # declared_pooling names the broken file
  files = [MODULES_FILE]
  for module in modules if isinstance(modules, list) else []:
    if (isinstance(module, dict) and
        str(module.get('type', '')).endswith('.Pooling')):
      config = os.path.join(module.get('path') or '', CONFIG_FILE)
      if (module.get('path') and
          tf.io.gfile.exists(os.path.join(directory, config))):
        files.append(config)
  return files


def checkpoint_key(directory: str, precision: str) -> str:
  """The cache key of a conversion: checkpoint bytes, precision, version.

  The bytes are config.json's, model.safetensors' and those of the files
  declaring its pooling, which the export copies.
  """
  digest = hashlib.sha256()
  for name in (CONFIG_FILE, WEIGHTS_FILE, *_pooling_files(directory)):
    with tf.io.gfile.GFile(os.path.join(directory, name), 'rb') as f:
      while True:
        block = f.read(1 << 24)
        if not block:
          break
        digest.update(block)
  return f'{digest.hexdigest()[:24]}-{precision}-v{CONVERTER_VERSION}'


def encoder_path(path: str, precision: str = 'float32',
                 cache_dir: Optional[str] = None) -> str:
  """The SavedModel encoder for `path`, converting a checkpoint once.

  A SavedModel directory (TF Hub / Kaggle) is returned as is. A Hugging Face
  checkpoint is converted into `cache_dir` (default: $AUTOSTRATEGY_ENCODER_CACHE
  or the temp directory's `autostrategy-encoders`) under its `checkpoint_key`,
  unless that conversion is already there.

  Args:
    path: the model directory the user gave (`--hub-model-path`).
    precision: the training precision policy ('' = float32).
    cache_dir: where converted encoders live.

  Raises:
    CheckpointError: `path` is neither a SavedModel nor a checkpoint this
      module converts.
  """
  if tf.io.gfile.exists(os.path.join(path, 'saved_model.pb')):
    return path
  if not is_checkpoint_dir(path):
    raise CheckpointError(
        f'{path!r} is neither a SavedModel (saved_model.pb) nor a Hugging Face '
        f'checkpoint ({CONFIG_FILE} + {WEIGHTS_FILE}); supported model types: '
        f'{", ".join(SUPPORTED_MODEL_TYPES)}')
  precision = precision or 'float32'
  read_config(path)  # Refuses an unsupported model before hashing 1 GB.
  cache_dir = cache_dir or os.environ.get(CACHE_ENV) or os.path.join(
      tempfile.gettempdir(), 'autostrategy-encoders')
  target = os.path.join(cache_dir, checkpoint_key(path, precision))
  if tf.io.gfile.exists(os.path.join(target, 'saved_model.pb')):
    logging.info('hf_checkpoint: using the converted encoder %s', target)
    return target
  tf.io.gfile.makedirs(cache_dir)
  staging = tempfile.mkdtemp(prefix='converting-', dir=cache_dir)
  try:
    export(path, staging, precision)
    try:
      os.rename(staging, target)
    except OSError:
      # Another process finished the same conversion first.
      if not tf.io.gfile.exists(os.path.join(target, 'saved_model.pb')):
        raise
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  logging.info('hf_checkpoint: converted %s to %s', path, target)
  return target

