"""A tiny text encoder SavedModel with the TF-Hub BERT-style interface.

Stands in for a TF-Hub encoder in tests (no downloads): it takes
`input_word_ids`, `input_mask` and `input_type_ids` and returns
`pooled_output` and `sequence_output`.
"""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, sys
    from tfx_autostrategy import tf_env
    tf_env.set_keras_flavour()
    import tensorflow as tf

    class Encoder(tf.Module):
      def __init__(self):
        self.embedding = tf.Variable(tf.random.normal([64, 8], seed=0))
      @tf.function(input_signature=[{
          'input_word_ids': tf.TensorSpec([None, None], tf.int32),
          'input_mask': tf.TensorSpec([None, None], tf.int32),
          'input_type_ids': tf.TensorSpec([None, None], tf.int32)}])
      def __call__(self, inputs):
        ids = tf.math.floormod(inputs['input_word_ids'], 64)
        vectors = tf.gather(self.embedding, ids)
        mask = tf.cast(inputs['input_mask'], tf.float32)[..., None]
        pooled = tf.reduce_sum(vectors * mask, 1) / tf.maximum(
            tf.reduce_sum(mask, 1), 1.0)
        return {'pooled_output': pooled, 'sequence_output': vectors}

    tf.saved_model.save(Encoder(), sys.argv[1])
""")


def save(path: str) -> str:
  """Writes the encoder SavedModel to `path` (in a fresh process); returns it."""
  subprocess.run([sys.executable, '-c', SCRIPT, path], check=True, timeout=300)
  return path
