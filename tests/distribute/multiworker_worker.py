"""One training process for the accelerator tests, run as a subprocess.

Does what the Trainer's run_fn does, on a tiny linear model: configures
logical CPUs from AUTOSTRATEGY_CPU_REPLICAS, resolves the strategy (a real
MultiWorkerMirroredStrategy when TF_CONFIG names two workers, a real
MirroredStrategy over N logical CPUs otherwise), trains a few steps on
fixed-shape batches, exports through `export_dir_for`/`cleanup`, and prints
one JSON line with what it saw.

Usage: python multiworker_worker.py SERVING_DIR [COLLECTIVE_TIMEOUT_SECONDS]
"""

import json
import logging
import os
import sys

from tfx_autostrategy.distribute import cpu_replicas as cpu_replicas_lib
from tfx_autostrategy.distribute import distribution_plan
from tfx_autostrategy import settings

PER_REPLICA_BATCH_SIZE = 4
STEPS_PER_EPOCH = 5
EPOCHS = 3
# Test hook: this worker exits abruptly after that epoch.
DIE_AFTER_EPOCH_ENV = 'MULTIWORKER_TEST_DIE_AFTER_EPOCH'


def main(argv):
  serving_dir = argv[1]
  timeout = float(argv[2]) if len(argv) > 2 else 120.0
  # Before anything else touches TensorFlow devices.
  cpu_replicas = cpu_replicas_lib.configure_cpu_replicas_from_env()
  logging.basicConfig(level=logging.INFO, stream=sys.stderr)
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components.trainer import export  # pylint: disable=g-import-not-at-top

  strategy, plan, info = distribution_plan.resolve(
      settings.TrainerSettings(per_replica_batch_size=PER_REPLICA_BATCH_SIZE),
      collective_timeout_seconds=timeout)

  rng = np.random.default_rng(0)
  rows = plan.global_batch_size * STEPS_PER_EPOCH
  features = rng.normal(size=(rows, 4)).astype('float32')
  labels = features @ np.array([[1.0], [-2.0], [0.5], [3.0]], 'float32')
  options = tf.data.Options()
  # Every worker reads the same in-memory tensors; shard by element.
  options.experimental_distribute.auto_shard_policy = (
      tf.data.experimental.AutoShardPolicy.DATA)
  dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(
      plan.global_batch_size, drop_remainder=True).repeat().with_options(
          options)

  distribution_plan.apply_precision(plan.precision)
  with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(1, input_shape=(4,),
                              kernel_initializer='zeros')])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss='mse',
                  steps_per_execution=plan.steps_per_execution)
  callbacks = []
  die_after = int(os.environ.get(DIE_AFTER_EPOCH_ENV, '0'))
  if die_after:
    # Simulates a machine lost mid-training: no clean-up, no goodbye.
    callbacks.append(tf.keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: (
            os._exit(3) if epoch + 1 == die_after else None)))  # pylint: disable=protected-access
  history = model.fit(dataset, epochs=EPOCHS, steps_per_epoch=STEPS_PER_EPOCH,
                      verbose=0, callbacks=callbacks)
  kernel = model.layers[0].kernel.numpy().ravel().tolist()

  export_dir = export.export_dir_for(info, serving_dir)
  model.save(export_dir, save_format='tf')
  saved = os.path.exists(os.path.join(export_dir, 'saved_model.pb'))
  if export_dir != serving_dir:
    export.cleanup(export_dir)

  reconfigure_error = ''
  if cpu_replicas:
    cpu_replicas_lib.configure_cpu_replicas(cpu_replicas)  # same N: a no-op
    try:
      cpu_replicas_lib.configure_cpu_replicas(cpu_replicas + 1)
    except RuntimeError as error:
      reconfigure_error = str(error)

  print(json.dumps({
      'plan': plan.to_dict(),
      'replicas_in_sync': strategy.num_replicas_in_sync,
      'task': [info.task_type, info.task_id],
      'losses': history.history['loss'],
      'kernel': kernel,
      'export_dir': export_dir,
      'saved_model_written': saved,
      'export_dir_exists_after_cleanup': os.path.exists(export_dir),
      'reconfigure_error': reconfigure_error,
  }))


if __name__ == '__main__':
  main(sys.argv)
