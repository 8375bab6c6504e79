"""The callbacks of every Trainer `fit`: divergence, backups, logs, history.

`training_callbacks` lists them in order: `FailOnNonFiniteLoss` (a NaN loss
is an error, not a quietly exported model), `BackupAndRestore` (at epoch ends,
or every N steps where the plan says so), TensorBoard, and `EpochLog` (the
progress lines the CLI prints and `history.json` in model_run).
"""

import json
import logging
import math
import os
import time
from typing import Any

import tensorflow as tf

from tfx_autostrategy import conventions
from tfx_autostrategy.distribute import distribution_plan



class TrainingDivergedError(RuntimeError):
  """The loss stopped being a finite number: nothing sensible can be exported."""


class FailOnNonFiniteLoss(tf.keras.callbacks.Callback):
  """Stops training with an error the moment the loss is NaN or infinite.

  Keras's TerminateOnNaN only stops quietly, and the model would then be
  exported, evaluated (AUC 0.5) and reported as merely "not blessed".
  """

  def __init__(self):
    super().__init__()
    self._epoch = 0

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch

  def on_train_batch_end(self, batch, logs=None):
    loss = (logs or {}).get('loss')
    if loss is not None and not math.isfinite(float(loss)):
      raise TrainingDivergedError(
          f'training loss became {float(loss)} in epoch {self._epoch + 1} at '
          f'step {batch + 1}: the inputs or labels hold invalid values, or '
          'the learning rate is too high (--learning-rate)')


class EpochLog(tf.keras.callbacks.Callback):
  """Logs epoch boundaries and keeps the history in `model_run_dir`.

  The history survives a restart: BackupAndRestore skips finished epochs, and
  the log shows which epoch a resumed run started from. Each entry also has
  `examples_per_second`: training examples of the epoch (steps x global
  batch) over the epoch's training time, validation excluded; the CLI prints
  it from the 'finished' log record (`progress_log.ProgressHandler`).
  """

  def __init__(self, history_path: str, epochs: int, write: bool = True,
               examples_per_epoch: int = 0):
    super().__init__()
    self._history_path = history_path
    self._epochs = epochs
    self._examples_per_epoch = examples_per_epoch
    self._epoch_started = None
    self._validation_started = None
    # Only the chief writes: every worker of a cluster gets the same
    # model_run directory.
    self._write = write
    self._first_batch = True

  def on_epoch_begin(self, epoch, logs=None):
    logging.info('autostrategy: epoch %d/%d started', epoch + 1, self._epochs)
    self._first_batch = True
    self._epoch_started = time.monotonic()
    self._validation_started = None

  def on_test_begin(self, logs=None):
    # fit's validation pass: the epoch's training time ends here.
    if self._epoch_started is not None and self._validation_started is None:
      self._validation_started = time.monotonic()

  def on_train_batch_begin(self, batch, logs=None):
    # A run restored from a mid-epoch backup starts the epoch past step 0.
    # The optimizer's step count is the work kept; Keras's batch index
    # restarts one execution early when steps_per_execution > 1.
    if self._first_batch and batch:
      logging.info('autostrategy: resumed from the backup at optimizer step '
                   '%d (batch index %d of the epoch)',
                   int(self.model.optimizer.iterations.numpy()), batch)
    self._first_batch = False

  def on_epoch_end(self, epoch, logs=None):
    history = []
    if tf.io.gfile.exists(self._history_path):
      with tf.io.gfile.GFile(self._history_path) as f:
        history = json.load(f)
    entry = {'epoch': epoch + 1,
             **{k: float(v) for k, v in (logs or {}).items()}}
    if self._examples_per_epoch and self._epoch_started is not None:
      seconds = ((self._validation_started or time.monotonic()) -
                 self._epoch_started)
      if seconds > 0:
        entry['examples_per_second'] = self._examples_per_epoch / seconds
    history.append(entry)
    if self._write:
      with tf.io.gfile.GFile(self._history_path, 'w') as f:
        json.dump(history, f)
    # The CLI parses this record (pipeline/progress_log.py).
    logging.info(conventions.EPOCH_FINISHED_MESSAGE, epoch + 1,
                 self._epochs, json.dumps(history[-1], sort_keys=True))


def training_callbacks(plan: distribution_plan.DistributionPlan,
                       backup_dir: str, model_run_dir: str, epochs: int,
                       steps_per_epoch: int = 0) -> list:
  """The callbacks of every Trainer `fit`, in order.

  `BackupAndRestore` saves at epoch ends, or every `plan.backup_every_steps`
  steps where the plan says so (TPUs). Keras calls batch hooks once per
  execution of `steps_per_execution` steps, so the interval is counted in
  executions, rounded up.
  """
  save_freq: Any = 'epoch'
  if plan.backup_every_steps:
    save_freq = max(1, math.ceil(plan.backup_every_steps /
                                 plan.steps_per_execution))
  return [
      FailOnNonFiniteLoss(),
      tf.keras.callbacks.BackupAndRestore(backup_dir, save_freq=save_freq),
      tf.keras.callbacks.TensorBoard(model_run_dir, update_freq='epoch'),
      EpochLog(os.path.join(model_run_dir, conventions.HISTORY_FILE), epochs,
               write=plan.is_chief,
               examples_per_epoch=steps_per_epoch * plan.global_batch_size),
  ]
