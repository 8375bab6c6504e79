"""An optimizer whose embedding updates cost what the batch touched.

The `bow` model's parameters are almost all embedding rows (about 9M), and a
32-example step looks up a few thousand of them. Keras's Adam, given the
`tf.IndexedSlices` gradient of a lookup, still decays the moments of every
row and rewrites every weight: a dense update of the whole table per step,
which halved the model's training rate on 2 CPU cores (issue 19).
"""

import tensorflow as tf


class LazyAdam(tf.keras.optimizers.Adam):
  """Adam for dense gradients; touched rows only for sparse ones.

  For a `tf.IndexedSlices` gradient (an embedding lookup's), only the rows
  the batch looked up change: their second moment is updated and they move
  by `lr * g / sqrt(v)` (with Adam's bias correction), as RMSprop would; the
  other rows and their moments stay as they are. Keras has already summed
  duplicate indices (`_deduplicate_sparse_grad`).

  There is no momentum for sparse rows, on purpose: under Keras's Adam a row
  seen once keeps moving for the next ~1/(1 - beta_1) steps on its decaying
  momentum, for a total displacement of about one full step; a lazy update
  with momentum would give it only (1 - beta_1) of that and lose AUC (0.855
  against 0.866 on the review snippets of bench/QUALITY.md), while the update
  without momentum moves it the full step at once (0.866).
  """

  def update_step(self, gradient, variable):
    if not isinstance(gradient, tf.IndexedSlices):
      return super().update_step(gradient, variable)
    dtype = variable.dtype
    step = tf.cast(self.iterations + 1, dtype)
    beta_2 = tf.cast(self.beta_2, dtype)
    alpha = (tf.cast(self.learning_rate, dtype) *
             tf.sqrt(1 - tf.pow(beta_2, step)))
    velocity = self._velocities[self._index_dict[self._var_key(variable)]]
    rows = gradient.indices
    values = tf.cast(gradient.values, dtype)
    velocity_rows = (tf.gather(velocity, rows) * beta_2 +
                     tf.square(values) * (1 - beta_2))
    velocity.scatter_update(tf.IndexedSlices(velocity_rows, rows))
    variable.scatter_sub(tf.IndexedSlices(
        alpha * values / (tf.sqrt(velocity_rows) + self.epsilon), rows))
    return None
