"""The one-device strategies and the TPU train step, run for real on CPU.

Only device discovery and the TPU runtime are faked (`tfx_autostrategy/distribute/rehearsal.py`);
the strategy, the Trainer's callbacks, `fit`, XLA compilation and the backup
run for real, each in a fresh process (logical devices and the Keras flavour
are fixed when TensorFlow starts).
"""

import json
import subprocess
import sys
import textwrap

import pytest

from support import tiny_encoder

PRELUDE = textwrap.dedent("""
    import json, os, sys
    from tfx_autostrategy import tf_env
    tf_env.set_keras_flavour()
    import numpy as np
    import tensorflow as tf
    from tfx_autostrategy.components.trainer import callbacks
    from tfx_autostrategy import conventions
    from tfx_autostrategy.distribute import devices
    from tfx_autostrategy.distribute import distribution_plan
    from tfx_autostrategy.distribute import rehearsal
    from tfx_autostrategy.distribute import strategies
    from tfx_autostrategy.modeling import models
    from tfx_autostrategy import settings

    TEXT = settings.TextSettings(sequence_length=16, vocab_size=50,
                                 num_oov_buckets=2, char_ngram_vocab_size=97,
                                 char_ngram_length=24)

    def dataset(name, batch, rows):
      rng = np.random.default_rng(0)
      ids = rng.integers(1, TEXT.word_vocab_size,
                         size=(rows, TEXT.sequence_length))
      ids[:, 10:] = 0
      label = (ids[:, 0] < TEXT.word_vocab_size // 2).astype('int64')
      features = {settings.TEXT_IDS: ids}
      if name != 'hub':
        features[settings.CHAR_NGRAMS] = rng.integers(
            0, TEXT.char_vocab_size, size=(rows, TEXT.char_ngram_length))
        features[settings.CHAR_NGRAM_WEIGHTS] = rng.random(
            (rows, TEXT.char_ngram_length)).astype('float32')
      return tf.data.Dataset.from_tensor_slices((features, label)).batch(
          batch, drop_remainder=True).repeat()
""")

ONE_DEVICE = PRELUDE + textwrap.dedent("""
    case, workdir = sys.argv[1:3]
    if case == 'cpu-on-a-gpu-machine':
      # `--accelerator cpu` where TensorFlow lists a GPU: the real strategy
      # that `strategy_for` builds, from the real default factory.
      info = devices.detect(
          'cpu', environ={}, dev_dir='/nonexistent',
          list_devices=lambda: ['/device:CPU:0', '/device:GPU:0'])
      strategy = strategies.strategy_for(info)
      plan = distribution_plan.plan_for(
          info, strategy, settings.TrainerSettings(per_replica_batch_size=8))
      check_callbacks = lambda callbacks: None
    else:
      # One T4: its device list is faked; the class `strategy_for` asks for is
      # built over the CPU, and the callbacks are checked against the class
      # the GPU machine would build.
      shape = rehearsal.MachineShape('nvidia-t4', 'gpu', 1,
                                     compute_capability=(7, 5))
      strategy, plan, info, stand_ins = rehearsal.resolve(
          shape, settings.TrainerSettings(per_replica_batch_size=8))
      check_callbacks = stand_ins.check_callbacks
    trainer = settings.TrainerSettings(model='bow', per_replica_batch_size=8)
    distribution_plan.apply_precision(plan.precision)
    with strategy.scope():
      model = models.build(TEXT, trainer)
      models.compile_model(model, trainer, plan.steps_per_execution,
                           jit_compile=plan.jit_compile)
    callbacks = callbacks.training_callbacks(
        plan, os.path.join(workdir, 'backup'), workdir, epochs=2)
    check_callbacks(callbacks)
    history = model.fit(dataset('bow', plan.global_batch_size, 64),
                        epochs=2, steps_per_epoch=4, callbacks=callbacks,
                        verbose=0)
    print(json.dumps({
        'strategy': type(strategy).__name__,
        'plan_strategy': plan.strategy,
        'devices': list(strategy.extended.worker_devices),
        'precision': plan.precision,
        'jit_compile': bool(model.jit_compile),
        'iterations': int(model.optimizer.iterations.numpy()),
        'epochs_logged': [h['epoch'] for h in json.load(open(
            os.path.join(workdir, conventions.HISTORY_FILE)))],
        'loss_finite': bool(np.isfinite(history.history['loss']).all()),
    }))
""")


def run_script(script, *args):
  proc = subprocess.run([sys.executable, '-c', script, *args],
                        capture_output=True, text=True, timeout=900,
                        check=False)
  return proc


@pytest.mark.parametrize('case, strategy_devices, precision, jit', [
    ('cpu-on-a-gpu-machine', ['/job:localhost/replica:0/task:0/device:CPU:0'],
     'float32', False),
    ('one-gpu', ['/job:localhost/replica:0/task:0/device:CPU:0'],
     'mixed_float16', True),
])
def test_one_device_runs_fit_with_every_trainer_callback(
    case, strategy_devices, precision, jit, tmp_path):
  # Before the fix, both cases built OneDeviceStrategy and `fit` raised
  # "NotImplementedError: OneDeviceStrategy is not supported yet" from
  # BackupAndRestore.
  proc = run_script(ONE_DEVICE, case, str(tmp_path))
  assert proc.returncode == 0, proc.stderr[-4000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result['strategy'] == 'MirroredStrategy'
  assert result['plan_strategy'] == 'MirroredStrategy'
  assert result['devices'] == strategy_devices
  assert (result['precision'], result['jit_compile']) == (precision, jit)
  assert result['iterations'] == 8
  assert result['epochs_logged'] == [1, 2]
  assert result['loss_finite']
  # BackupAndRestore ran: it deletes its backup once `fit` has finished.
  assert not (tmp_path / 'backup' / 'chief').exists()


XLA_STEP = PRELUDE + textwrap.dedent("""
    names, hub_path = sys.argv[1].split(','), sys.argv[2]
    # A TPU plan: what the Trainer compiles on a v3-8, one core's share.
    info = devices.AcceleratorInfo(
        kind='tpu', devices=('/device:CPU:0',), num_workers=1, is_chief=True,
        task_type=None, task_id=None, reason='test', compute_capability=None)
    plan = distribution_plan.plan_for(
        info, tf.distribute.get_strategy(),
        settings.TrainerSettings(per_replica_batch_size=8))
    distribution_plan.apply_precision(plan.precision)
    results = {}
    for name in names:
      trainer = settings.TrainerSettings(model=name, hub_model_path=hub_path,
                                         per_replica_batch_size=8)
      built = []

      def build_and_compile(jit_compile):
        model = models.build(TEXT, trainer)
        models.compile_model(model, trainer, plan.steps_per_execution,
                             jit_compile=jit_compile)
        built.append(model)
        return model

      rehearsal.check_xla_train_step(
          build_and_compile, dataset(name, plan.per_replica_batch_size, 64),
          plan.steps_per_execution)
      model = built[-1]
      results[name] = {
          'jit_compile': bool(model.jit_compile),
          'steps_per_execution': int(model._steps_per_execution.numpy()),
          'iterations': int(model.optimizer.iterations.numpy()),
          'compute_dtypes': sorted({layer.compute_dtype
                                    for layer in model.layers
                                    if layer.trainable_weights}),
      }
    print(json.dumps({'precision': plan.precision, 'models': results}))
""")


@pytest.mark.slow
def test_every_model_train_step_compiles_with_xla_under_the_tpu_plan(tmp_path):
  encoder = tiny_encoder.save(str(tmp_path / 'encoder'))
  proc = run_script(XLA_STEP, 'bow,transformer,hub', encoder)
  assert proc.returncode == 0, proc.stderr[-4000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result['precision'] == 'mixed_bfloat16'
  for name in ('bow', 'transformer', 'hub'):
    assert result['models'][name] == {
        'jit_compile': True, 'steps_per_execution': 32, 'iterations': 32,
        # The policy's bfloat16 in the body, float32 in the output layer
        # (and the bow model's linear TF-IDF part).
        'compute_dtypes': ['bfloat16', 'float32']}, name


NO_XLA_KERNEL = PRELUDE + textwrap.dedent("""
    class HostSideLookup(tf.keras.layers.Layer):
      # tf.py_function runs Python on the host: there is no XLA kernel.
      def call(self, ids):
        out = tf.py_function(lambda x: x, [ids], tf.int64)
        out.set_shape(ids.shape)
        return out

    def build_and_compile(jit_compile):
      ids = tf.keras.Input((TEXT.sequence_length,), dtype=tf.int64,
                           name=settings.TEXT_IDS)
      x = HostSideLookup()(ids)
      x = tf.keras.layers.Embedding(TEXT.word_vocab_size, 4)(x)
      x = tf.keras.layers.GlobalAveragePooling1D()(x)
      model = tf.keras.Model(ids, tf.keras.layers.Dense(1)(x))
      model.compile('sgd', 'binary_crossentropy', jit_compile=jit_compile)
      return model

    data = dataset('hub', 8, 16)
    rehearsal.check_xla_train_step(build_and_compile, data, 1)
""")


def test_an_op_without_an_xla_kernel_fails_the_tpu_train_step():
  proc = run_script(NO_XLA_KERNEL)
  assert proc.returncode == 1
  assert 'EagerPyFunc' in proc.stderr, proc.stderr[-3000:]
  assert 'Detected unsupported operations when trying to compile graph' in (
      proc.stderr), proc.stderr[-3000:]
