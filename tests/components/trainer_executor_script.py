"""Runs AutoStrategyTrainer's executor `Do()` in its own process.

Usage: python trainer_executor_script.py SPEC_JSON [--pause-after-epoch N]
                                                    [--pause-after-step N]

SPEC_JSON names the input artifact directories, the output directories and the
execution properties. `--pause-after-epoch` sleeps after that epoch is logged
(and backed up), `--pause-after-step` after the first execution that reaches
that optimizer step (and its callbacks, the step backup included, have run),
giving a test a window to kill the process mid-training.
"""

import argparse
import json
import logging
import time

from tfx_autostrategy import tf_env  # pylint: disable=g-import-not-at-top

# The Keras flavour, and the logical CPU devices of AUTOSTRATEGY_CPU_REPLICAS,
# as every entry point sets them before TensorFlow loads.
tf_env.prepare()

from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
from tfx.types import standard_artifacts

from tfx_autostrategy.components.trainer import executor as executor_lib


def artifact(cls, uri, splits=None):
  a = cls()
  a.uri = uri
  if splits:
    a.split_names = artifact_utils.encode_split_names(splits)
  return a


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('spec')
  parser.add_argument('--pause-after-epoch', type=int, default=0)
  parser.add_argument('--pause-after-step', type=int, default=0)
  args = parser.parse_args()
  logging.basicConfig(level=logging.INFO, format='%(levelname)s %(message)s',
                      force=True)
  with open(args.spec) as f:
    spec = json.load(f)

  if args.pause_after_epoch:
    # TFX re-imports (reloads) the run_fn module, so patch Keras itself: after
    # every callback of the epoch (backup, EpochLog) has run, pause.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    callback_list = type(tf.keras.callbacks.CallbackList([]))
    original = callback_list.on_epoch_end

    def pausing_on_epoch_end(self, epoch, logs=None):
      original(self, epoch, logs)
      if epoch + 1 == args.pause_after_epoch:
        print('PAUSED', flush=True)
        time.sleep(600)

    callback_list.on_epoch_end = pausing_on_epoch_end

  if args.pause_after_step:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    callback_list = type(tf.keras.callbacks.CallbackList([]))
    original_batch_end = callback_list.on_train_batch_end

    def pausing_on_train_batch_end(self, batch, logs=None):
      original_batch_end(self, batch, logs)
      step = int(self.model.optimizer.iterations.numpy())
      if step >= args.pause_after_step:
        print(f'PAUSED at step {step}', flush=True)
        time.sleep(600)

    callback_list.on_train_batch_end = pausing_on_train_batch_end

  splits = ['train', 'eval']
  input_dict = {
      'examples': [artifact(standard_artifacts.Examples, spec['examples'],
                            splits)],
      'transform_graph': [artifact(standard_artifacts.TransformGraph,
                                   spec['transform_graph'])],
  }
  if spec.get('statistics'):
    input_dict['statistics'] = [artifact(standard_artifacts.ExampleStatistics,
                                         spec['statistics'], splits)]
  if spec.get('base_model'):
    input_dict['base_model'] = [artifact(standard_artifacts.Model,
                                         spec['base_model'])]
  output_dict = {
      'model': [artifact(standard_artifacts.Model, spec['model'])],
      'model_run': [artifact(standard_artifacts.ModelRun, spec['model_run'])],
  }
  executor_lib.Executor().Do(input_dict, output_dict, spec['exec_properties'])
  print('DONE', flush=True)


if __name__ == '__main__':
  main()
