"""The Trainer's export: the serving signatures and where they are saved.

The SavedModel's `serving_default` takes serialized `tf.Example`s carrying
only the raw text, applies the Transform graph and returns float32
`probabilities`; `transform_features` returns the transformed features. Every
multi-worker process must save the model (saving runs collective ops), but
only the chief's copy is kept (`export_dir_for`, `cleanup`).
"""

import os
import shutil
import tempfile
from typing import Any, Dict

import tensorflow as tf

from tfx_autostrategy import conventions
from tfx_autostrategy.distribute import devices

TRANSFORM_SIGNATURE = 'transform_features'

# Temporary export directories handed to non-chief workers; `cleanup` only
# deletes these.
_TEMP_EXPORT_DIRS = set()


def export_dir_for(info: devices.AcceleratorInfo, serving_dir: str) -> str:
  """Returns where this process saves the serving model.

  Every multi-worker process must save (saving runs collective ops), but only
  the chief's copy is kept: other processes get a fresh temporary directory
  to pass to `cleanup` afterwards.

  Args:
    info: result of `detect`.
    serving_dir: the directory the chief exports to.
  """
  if info.is_chief:
    return serving_dir
  path = tempfile.mkdtemp(
      prefix=f'autostrategy-export-{info.task_type}-{info.task_id}-')
  _TEMP_EXPORT_DIRS.add(path)
  return path


def cleanup(export_dir: str) -> None:
  """Deletes a non-chief's temporary export directory from `export_dir_for`.

  Args:
    export_dir: a directory returned by `export_dir_for` on a non-chief.

  Raises:
    ValueError: `export_dir` was not created by `export_dir_for` in this
      process (so a chief's serving directory is never deleted).
  """
  if export_dir not in _TEMP_EXPORT_DIRS:
    raise ValueError(
        f'{export_dir} is not a temporary export directory from '
        'export_dir_for; refusing to delete it')
  if os.path.exists(export_dir):
    shutil.rmtree(export_dir)
  _TEMP_EXPORT_DIRS.discard(export_dir)


def _serving_signatures(model: tf.keras.Model, tf_transform_output,
                        text_column: str) -> Dict[str, Any]:
  """`serving_default` (raw text examples) and `transform_features`."""
  model.tft_layer = tf_transform_output.transform_features_layer()
  raw_spec = tf_transform_output.raw_feature_spec()
  serving_spec = {text_column: raw_spec[text_column]}
  model_inputs = list(model.input_names)

  @tf.function(input_signature=[
      tf.TensorSpec(shape=[None], dtype=tf.string, name='examples')])
  def serve(serialized):
    parsed = tf.io.parse_example(serialized, serving_spec)
    transformed = model.tft_layer(parsed)
    probabilities = model({k: transformed[k] for k in model_inputs})
    return {conventions.PROBABILITIES:
                tf.reshape(tf.cast(probabilities, tf.float32), [-1])}

  @tf.function(input_signature=[
      tf.TensorSpec(shape=[None], dtype=tf.string, name='examples')])
  def transform_features(serialized):
    parsed = tf.io.parse_example(serialized, raw_spec)
    return model.tft_layer(parsed)

  return {conventions.SERVING_SIGNATURE: serve,
          TRANSFORM_SIGNATURE: transform_features}


def export_serving_model(model: tf.keras.Model, tf_transform_output,
                         text_column: str, export_dir: str) -> None:
  """Saves a SavedModel that takes serialized raw `tf.Example`s."""
  signatures = _serving_signatures(model, tf_transform_output, text_column)
  model.save(export_dir, save_format='tf', signatures=signatures)
