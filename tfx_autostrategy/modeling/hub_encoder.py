"""A pretrained TF2 SavedModel encoder (a TF Hub download) as a Keras layer.

Used by `models.build_hub`. The encoder follows the TF Hub BERT-family
convention: a dict of `input_word_ids`, `input_mask` and `input_type_ids` in,
a dict with `pooled_output` out.
"""

from typing import List, Tuple

import tensorflow as tf

from tfx_autostrategy import settings as settings_lib


class BertInputs(tf.keras.layers.Layer):
  """Padded ids as encoder inputs, the mask from `ids != 0` (ids only)."""

  def call(self, ids):
    ids = tf.cast(ids, tf.int32)
    return {
        'input_word_ids': ids,
        'input_mask': tf.cast(tf.not_equal(ids, 0), tf.int32),
        'input_type_ids': tf.zeros_like(ids),
    }


class PretrainedInputs(tf.keras.layers.Layer):
  """The Transform's ids, mask and type ids as the encoder's int32 inputs.

  With the checkpoint's own tokenizer (`tokenizer=pretrained`) the mask
  comes from the real length: XLM-R pads with 1, which is also a real id.
  """

  def call(self, inputs):
    return {
        'input_word_ids': tf.cast(inputs[settings_lib.TEXT_IDS], tf.int32),
        'input_mask': tf.cast(inputs[settings_lib.TEXT_MASK], tf.int32),
        'input_type_ids': tf.cast(inputs[settings_lib.TEXT_TYPE_IDS],
                                  tf.int32),
    }


class TokenPooling(tf.keras.layers.Layer):
  """A summary of the token states over the real tokens (`mask` 1), float32.

  What a sentence-transformers checkpoint declares (`PretrainedDir.pooling`):
  'cls' the first token's state, 'mean' the mean over the real tokens,
  'max' their element-wise maximum, 'mean_sqrt_len' their sum divided by the
  square root of their count. Special tokens count as real, as in
  sentence-transformers (its attention mask includes them).
  """

  MODES = ('cls', 'mean', 'max', 'mean_sqrt_len')

  def __init__(self, mode: str, **kwargs):
    super().__init__(dtype='float32', **kwargs)
    if mode not in self.MODES:
      raise ValueError(f'pooling {mode!r} is not one of {self.MODES}')
    self.mode = mode

  def call(self, sequence_output, mask):
    states = tf.cast(sequence_output, tf.float32)
    if self.mode == 'cls':
      return states[:, 0]
    mask = tf.cast(mask, tf.float32)[:, :, tf.newaxis]
    if self.mode == 'max':
      return tf.reduce_max(states + (mask - 1.0) * 1e9, axis=1)
    total = tf.reduce_sum(states * mask, axis=1)
    count = tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
    return total / (count if self.mode == 'mean' else tf.sqrt(count))

  def get_config(self):
    return {**super().get_config(), 'mode': self.mode}


def _saved_variables(obj) -> Tuple[List[tf.Variable], List[tf.Variable]]:
  """(all, trainable) variables of a loaded SavedModel object.

  TF Hub's reusable SavedModels list them in `variables` and
  `trainable_variables`; other SavedModels are walked attribute by attribute
  and all their variables count as trainable.
  """
  if hasattr(obj, 'variables') and hasattr(obj, 'trainable_variables'):
    return list(obj.variables), list(obj.trainable_variables)
  found, seen = [], set()

  def walk(node):
    if id(node) in seen:
      return
    seen.add(id(node))
    if isinstance(node, tf.Variable):
      found.append(node)
    elif isinstance(node, (list, tuple)):
      for item in node:
        walk(item)
    elif isinstance(node, dict):
      for item in node.values():
        walk(item)
    elif isinstance(node, tf.__internal__.tracking.Trackable):
      for name, value in vars(node).items():
        if not name.startswith('_'):
          walk(value)

  walk(obj)
  return found, found


class SavedModelEncoder(tf.keras.layers.Layer):
  """A trainable Keras layer around a TF2 SavedModel encoder (local path).

  Does what `hub.KerasLayer` does for this case. tensorflow-hub itself cannot
  be imported here: tfx 1.16 pins it below 0.16, and 0.15 imports
  `tf.compat.v1.estimator`, which TensorFlow 2.16 no longer has.
  """

  def __init__(self, path: str, trainable: bool = True, **kwargs):
    super().__init__(trainable=trainable, **kwargs)
    self.path = path
    if not tf.io.gfile.exists(path):
      raise ValueError(f'hub model path {path!r} does not exist')
    self._encoder = tf.saved_model.load(path)
    if not callable(self._encoder):
      raise ValueError(f'SavedModel at {path!r} is not callable: export the '
                       'encoder with a __call__ signature (TF Hub TF2 format)')
    spec = getattr(self._encoder.__call__, 'function_spec', None)
    # Encoders exported by hf_checkpoint (and TF Hub's) take `training`, which
    # turns on their dropout; the lenient test stand-in does not.
    self._takes_training = bool(spec) and 'training' in (
        spec.fullargspec.args + spec.fullargspec.kwonlyargs)
    variables, trainable_variables = _saved_variables(self._encoder)
    trainable_ids = {id(v) for v in trainable_variables}
    for variable in variables:
      # Register the loaded variable as this layer's weight: the getter hands
      # back the existing variable instead of creating a new one.
      self.add_weight(
          name=variable.name.split(':')[0], shape=variable.shape,
          dtype=variable.dtype,
          trainable=trainable and id(variable) in trainable_ids,
          experimental_autocast=False,
          getter=lambda *_, existing=variable, **__: existing)

  def call(self, inputs, training=None):
    if not self._takes_training:
      return self._encoder(inputs)
    return tf.__internal__.smart_cond.smart_cond(
        training if training is not None else False,
        lambda: self._encoder(inputs, training=True),
        lambda: self._encoder(inputs, training=False))

  def get_config(self):
    config = super().get_config()
    config.update(path=self.path)
    return config
