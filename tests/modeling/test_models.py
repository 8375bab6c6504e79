"""Every model builds and compiles in strategy.scope(), trains under a real
4-replica MirroredStrategy (logical CPUs), and keeps float32 outputs."""

import json
import subprocess
import sys
import textwrap

import pytest

from support import tiny_encoder

SCRIPT = textwrap.dedent("""
    import json, os, sys
    from tfx_autostrategy import tf_env
    tf_env.set_keras_flavour()
    from tfx_autostrategy.distribute import cpu_replicas
    from tfx_autostrategy.distribute import distribution_plan
    cpu_replicas.configure_cpu_replicas(4)
    import numpy as np
    import tensorflow as tf
    from tfx_autostrategy.modeling import models
    from tfx_autostrategy import settings

    name, hub_path, precision, export_dir, learning_rate = sys.argv[1:6]
    text = settings.TextSettings(sequence_length=16, vocab_size=50,
                                 num_oov_buckets=2, char_ngram_vocab_size=97,
                                 char_ngram_length=24)
    trainer = settings.TrainerSettings(model=name, hub_model_path=hub_path,
                                       per_replica_batch_size=8,
                                       accelerator='cpu',
                                       precision=precision,
                                       learning_rate=float(learning_rate))
    strategy, plan, _ = distribution_plan.resolve(trainer)
    rng = np.random.default_rng(0)
    n = plan.global_batch_size * 6
    ids = rng.integers(1, text.word_vocab_size, size=(n, text.sequence_length))
    ids[:, 10:] = 0  # padding
    ids[::7] = 0  # empty comments: all padding
    # Learnable by mean pooling: do most of the tokens have a low id?
    low = ((ids > 0) & (ids < text.word_vocab_size // 2)).sum(axis=1)
    label = (low * 2 > (ids > 0).sum(axis=1)).astype('int64')
    features = {settings.TEXT_IDS: ids}
    if name != 'hub':
      grams = rng.integers(0, text.char_vocab_size,
                           size=(n, text.char_ngram_length))
      grams[::7] = 0
      features[settings.CHAR_NGRAMS] = grams
      # TF-IDF-like weights, 0 at padding (the transformer ignores them).
      features[settings.CHAR_NGRAM_WEIGHTS] = np.where(
          grams > 0, rng.random(grams.shape), 0.0).astype('float32')
    dataset = tf.data.Dataset.from_tensor_slices((features, label)).batch(
        plan.global_batch_size, drop_remainder=True).repeat()
    distribution_plan.apply_precision(plan.precision)
    with strategy.scope():
      model = models.build(text, trainer)
      models.compile_model(model, trainer, plan.steps_per_execution)
    history = model.fit(dataset, steps_per_epoch=6, epochs=3, verbose=0)
    sample = {k: v[:5] for k, v in features.items() if k in model.input_names}
    out = model.predict(sample, verbose=0)
    assert np.isfinite(out).all(), out
    # Export as the Trainer does and serve the SavedModel without Keras code.
    model.save(export_dir, save_format='tf')
    served = tf.saved_model.load(export_dir).signatures['serving_default'](
        **{k: tf.constant(v) for k, v in sample.items()})
    served = next(iter(served.values())).numpy()
    print(json.dumps({
        'replicas': strategy.num_replicas_in_sync,
        'strategy': type(strategy).__name__,
        'global_batch': plan.global_batch_size,
        'loss': history.history['loss'],
        'out_shape': list(out.shape), 'out_dtype': str(out.dtype),
        'variables_on_replicas': len(model.trainable_variables[0].values)
            if hasattr(model.trainable_variables[0], 'values') else 1,
        'compute_dtypes': sorted({layer.compute_dtype for layer in model.layers
                                  if layer.trainable_weights}),
        'trainable_variables': len(model.trainable_variables),
        'served_max_difference': float(np.abs(served - out).max()),
    }))
""")



def _train(tmp_path, name, hub_path='', precision='', learning_rate=0.0):
  proc = subprocess.run([sys.executable, '-c', SCRIPT, name, hub_path,
                         precision, str(tmp_path / 'export'),
                         str(learning_rate)],
                        capture_output=True, text=True,
                        timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize('name', ['bow', 'transformer'])
def test_model_trains_under_four_replica_mirrored_strategy(name, tmp_path):
  result = _train(tmp_path, name)
  assert result['strategy'] == 'MirroredStrategy'
  assert result['replicas'] == 4
  assert result['global_batch'] == 32
  assert result['variables_on_replicas'] == 4
  assert result['loss'][-1] < result['loss'][0]
  assert result['out_shape'] == [5, 1]
  assert result['out_dtype'] == 'float32'
  assert result['served_max_difference'] < 1e-5


@pytest.mark.slow
def test_hub_encoder_from_a_local_saved_model(tmp_path):
  encoder_dir = tiny_encoder.save(str(tmp_path / 'encoder'))
  # The random stand-in has nothing to forget: a from-scratch rate.
  result = _train(tmp_path, 'hub', encoder_dir, learning_rate=2e-3)
  assert result['replicas'] == 4
  # The encoder's embedding is fine-tuned with the output layer (kernel, bias).
  assert result['trainable_variables'] == 3
  assert result['served_max_difference'] < 1e-5
  assert result['loss'][-1] < result['loss'][0]
  assert result['out_dtype'] == 'float32'


@pytest.mark.slow
def test_mixed_precision_keeps_the_output_float32(tmp_path):
  result = _train(tmp_path, 'bow', precision='mixed_bfloat16')
  # Embeddings and hidden layers in bfloat16; the linear TF-IDF part and
  # the logits in float32.
  assert result['compute_dtypes'] == ['bfloat16', 'float32']
  assert result['out_dtype'] == 'float32'


@pytest.fixture(scope='module')
def tf_modules():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.modeling import models  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy import settings  # pylint: disable=g-import-not-at-top
  return tf, models, settings


@pytest.mark.parametrize('name', ['bow', 'transformer'])
def test_empty_text_gives_a_finite_prediction(tf_modules, name):
  tf, models, settings = tf_modules
  text = settings.TextSettings(sequence_length=8, vocab_size=20,
                               num_oov_buckets=1, char_ngram_vocab_size=31,
                               char_ngram_length=12)
  model = models.build(text, settings.TrainerSettings(model=name))
  features = {settings.TEXT_IDS: tf.constant([[0] * 8, [3, 4] + [0] * 6],
                                             tf.int64),
              settings.CHAR_NGRAMS: tf.constant([[0] * 12, [5] * 12], tf.int64),
              settings.CHAR_NGRAM_WEIGHTS: tf.constant([[0.0] * 12, [0.3] * 12])}
  out = model(features).numpy()
  assert out.shape == (2, 1)
  assert all(0.0 < v < 1.0 for v in out.ravel()), out
  # All-padding rows pool to zeros, not 0/0.
  pooled = models.MaskedMean()(tf.ones([2, 3, 4]),
                               mask=tf.constant([[False] * 3, [True] * 3]))
  assert pooled.numpy().tolist() == [[0.0] * 4, [1.0] * 4]


def test_non_finite_loss_stops_training_with_an_error(tf_modules):
  tf, _, _ = tf_modules
  from tfx_autostrategy.components.trainer import callbacks  # pylint: disable=g-import-not-at-top
  model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,))])
  model.compile('sgd', 'mse')
  features = tf.constant([[1.0, 2.0], [float('nan'), 1.0]] * 4)
  with pytest.raises(callbacks.TrainingDivergedError,
                     match=r'training loss became nan in epoch 1 at step 1'):
    model.fit(features, tf.zeros([8]), batch_size=8, epochs=2, verbose=0,
              callbacks=[callbacks.FailOnNonFiniteLoss()])


def test_lazy_adam_moves_only_the_rows_a_batch_looked_up(tf_modules):
  tf, _, _ = tf_modules
  from tfx_autostrategy.modeling import embedding_training  # pylint: disable=g-import-not-at-top
  start = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]
  lazy_table, adam_table = tf.Variable(start), tf.Variable(start)
  lazy = embedding_training.LazyAdam(0.1)
  adam = tf.keras.optimizers.Adam(0.1)
  # Step 1 from zero moments: row 1 twice (summed), row 3 once; Keras's
  # Adam on the same dense gradient moves the same rows by the same amounts.
  grad = tf.IndexedSlices(tf.constant([[1.0, -1.0], [0.5, 0.5], [2.0, 0.0]]),
                          tf.constant([1, 1, 3]), tf.constant([4, 2]))
  lazy.apply_gradients([(grad, lazy_table)])
  adam.apply_gradients([(tf.convert_to_tensor(grad), adam_table)])
  after_one = lazy_table.numpy()
  assert after_one == pytest.approx(adam_table.numpy(), abs=1e-6)
  assert after_one[0].tolist() == [1.0, 2.0]
  # Adam's first step moves each coordinate by lr against the gradient's sign.
  assert after_one[1] == pytest.approx([2.9, 4.1], abs=1e-5)
  # Step 2 touches only row 0: rows 1 and 3 keep their values (Adam's
  # momentum would move them again), row 0 moves against its gradient.
  lazy.apply_gradients([(tf.IndexedSlices(
      tf.constant([[1.0, 1.0]]), tf.constant([0]), tf.constant([4, 2])),
                         lazy_table)])
  after_two = lazy_table.numpy()
  # The full step at once (no momentum for sparse rows): a lazy update with
  # beta_1 = 0.9 momentum would move it about half as far (0.074).
  assert ([1.0, 2.0] - after_two[0]) == pytest.approx([0.141, 0.141], abs=1e-3)
  assert after_two[1:].tolist() == after_one[1:].tolist()


def test_weighted_linear_sums_its_coefficients_by_the_weights(tf_modules):
  tf, models, _ = tf_modules
  layer = models.WeightedLinear(5, scale=10.0)
  ids = tf.constant([[1, 3, 0], [2, 0, 0]], tf.int64)
  weights = tf.constant([[0.6, 0.8, 0.0], [1.0, 0.0, 0.0]])
  assert layer([ids, weights]).numpy().tolist() == [[0.0], [0.0]]  # zeros
  layer.coefficients.assign([0.5, 1.0, -2.0, 0.25, 7.0])
  with tf.GradientTape() as tape:
    out = layer([ids, weights])
  # 10 * (0.6 * 1.0 + 0.8 * 0.25) = 8; 10 * (1.0 * -2.0) = -20; padding
  # (id 0) has weight 0, and id 4 is not looked up.
  assert out.numpy().ravel().round(5).tolist() == [8.0, -20.0]
  gradient = tape.gradient(out, layer.coefficients)
  # A sparse gradient: LazyAdam updates only the rows a batch used.
  assert isinstance(gradient, tf.IndexedSlices)
  dense = tf.convert_to_tensor(gradient).numpy().round(5).tolist()
  assert dense == [0.0, 6.0, 10.0, 8.0, 0.0]
