"""The accelerator-aware `run_fn` that AutoStrategyTrainer runs.

This directory is the Trainer's `module_file` package: TFX hashes it into the
Trainer cache key, so editing this file re-runs the Trainer (and only it).
The same `run_fn` also works with the stock TFX Trainer when `custom_config`
carries the settings and `train_args`/`eval_args` carry the step counts.
"""

import dataclasses
import json
import logging
import math
import os
import time
from typing import Any, Dict, Optional, Tuple

import tensorflow as tf
import tensorflow_transform as tft
from tfx_bsl.public import tfxio

from tfx_autostrategy.components import accelerator
from tfx_autostrategy.components import models
from tfx_autostrategy.components import rehearsal
from tfx_autostrategy.components import settings as settings_lib
from tfx_autostrategy.components.trainer import export

# Keys of `fn_args.custom_config` (written by the executor).
TRAINER_KEY = 'trainer'
TEXT_KEY = 'text'
EXAMPLE_COUNTS_KEY = 'example_counts'
BACKUP_DIR_KEY = 'backup_dir'
# A `rehearsal.MachineShape` dict: train as that machine would, on stand-ins.
REHEARSAL_KEY = 'rehearsal'

HISTORY_FILE = 'history.json'
# The distribution plan the run trained with (and its stand-ins, when it was
# a rehearsal), beside the history in model_run.
PLAN_FILE = 'plan.json'
SERVING_SIGNATURE = 'serving_default'
TRANSFORM_SIGNATURE = 'transform_features'
PROBABILITIES = 'probabilities'
# Exports are often sorted (by date, source or label); a buffer that covers the
# split shuffles it fully. Capped: one transformed example is ~5 KB.
MAX_SHUFFLE_BUFFER = 100_000
DEFAULT_SHUFFLE_BUFFER = 10_000
# Records parsed per call on the first pass of a cached split.
DECODE_BATCH_SIZE = 1024


class TrainingDataError(ValueError):
  """The training data cannot train the model as configured."""


def steps_for_split(split: str, num_steps: Optional[int],
                    example_counts: Dict[str, int], global_batch_size: int,
                    divide_by: int = 1) -> int:
  """Steps per epoch for a split, from explicit steps or the example count.

  Args:
    split: split name, for messages.
    num_steps: explicit total steps (`train_args`/`eval_args`), or None/0.
    example_counts: examples per split, from the statistics artifact.
    global_batch_size: examples per step over all replicas.
    divide_by: number of epochs the explicit steps are spread over.

  Returns:
    Whole steps per epoch: every step sees one full global batch.

  Raises:
    TrainingDataError: the split has fewer examples than one global batch, or
      neither steps nor counts are known.
  """
  if num_steps:
    return max(1, num_steps // divide_by)
  if split not in example_counts:
    raise TrainingDataError(
        f'cannot derive steps for split {split!r}: no example count (pass the '
        'StatisticsGen output as `statistics`, or set num_steps)')
  count = int(example_counts[split])
  if count < global_batch_size:
    raise TrainingDataError(
        f'split {split!r} has {count} examples, fewer than one global batch '
        f'of {global_batch_size}; use more data or a smaller '
        '--per-replica-batch-size')
  return count // global_batch_size


def check_static_shapes(dataset: tf.data.Dataset) -> None:
  """Raises if any feature's batch or feature dimension is not static.

  TPUs and XLA need static shapes; a dynamic dimension would otherwise show up
  later as a recompilation per batch or an obscure XLA error.
  """
  features, label = dataset.element_spec
  specs = sorted(dict(features).items()) + [('<label>', label)]
  for name, spec in specs:
    if not isinstance(spec, tf.TensorSpec) or not spec.shape.is_fully_defined():
      raise TrainingDataError(
          f'feature {name!r} has no static shape ({spec}); Transform must '
          'output dense fixed-length tensors and batches must drop the '
          'remainder')


def check_tpu_lengths(text_settings: settings_lib.TextSettings) -> None:
  """Refuses fixed lengths that break the TPU tiling rule.

  Transform has already written ids of these lengths, so the Trainer cannot
  round them up the way it rounds the batch: the run must be repeated with
  other text settings.

  Raises:
    TrainingDataError: a fixed length is not a multiple of
      `accelerator.TPU_BATCH_MULTIPLE`; the message names the setting and the
      value to use.
  """
  multiple = accelerator.TPU_BATCH_MULTIPLE
  lengths = [('sequence_length', '--sequence-length',
              text_settings.sequence_length)]
  if text_settings.char_ngram_min:
    lengths.append(('char_ngram_length', '--char-ngram-length',
                    text_settings.char_ngram_length))
  for name, flag, value in lengths:
    if value % multiple:
      raise TrainingDataError(
          f'{name} {value} is not a multiple of {multiple}: the TPU tiles '
          f'fixed feature lengths in multiples of {multiple}, and Transform '
          f'already wrote ids of length {value}; rerun with {flag} '
          f'{-(-value // multiple) * multiple}')


def shuffle_buffer_for(example_count: Optional[int]) -> int:
  """A shuffle buffer that covers the split, up to `MAX_SHUFFLE_BUFFER`."""
  if not example_count:
    return DEFAULT_SHUFFLE_BUFFER
  return max(1, min(int(example_count), MAX_SHUFFLE_BUFFER))


def decoded_example_bytes(tf_transform_output) -> int:
  """Bytes one decoded, transformed example (features and label) takes."""
  total = 0
  for spec in tf_transform_output.transformed_feature_spec().values():
    if not isinstance(spec, tf.io.FixedLenFeature):
      raise TrainingDataError(
          f'transformed feature has no fixed length ({spec}); Transform must '
          'output dense fixed-length tensors')
    total += math.prod(spec.shape or [1]) * tf.as_dtype(spec.dtype).size
  return total


def input_dataset(file_pattern, data_accessor, tf_transform_output,
                  global_batch_size: int, shuffle: bool,
                  shuffle_buffer_size: int = DEFAULT_SHUFFLE_BUFFER,
                  cache: bool = False) -> tf.data.Dataset:
  """Fixed-shape, repeated batches of transformed examples.

  Args:
    file_pattern: the split's transformed TFRecord files.
    data_accessor: `fn_args.data_accessor`.
    tf_transform_output: the Transform graph's output.
    global_batch_size: examples per step over all replicas; the last partial
      batch is dropped so that every batch has a static shape.
    shuffle: shuffle examples (seeded, reshuffled every epoch).
    shuffle_buffer_size: examples in the shuffle buffer.
    cache: decode the split once and keep the decoded examples in memory.
      Without it every step decompresses and parses its records, on the same
      CPU cores the model runs on (on a 2-core host that cost the transformer
      9% of its throughput); with it later epochs only shuffle and batch.
      The caller checks that the split fits (`decoded_example_bytes`).
  """
  if cache:
    # One pass, all examples (the remainder is dropped after shuffling, so a
    # different one every epoch).
    dataset = data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(
            batch_size=DECODE_BATCH_SIZE,
            label_key=settings_lib.LABEL, num_epochs=1, shuffle=False,
            drop_final_batch=False),
        tf_transform_output.transformed_metadata.schema)
    dataset = dataset.unbatch().cache()
    if shuffle:
      dataset = dataset.shuffle(shuffle_buffer_size, seed=0,
                                reshuffle_each_iteration=True)
    dataset = dataset.repeat().batch(global_batch_size, drop_remainder=True)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
  else:
    dataset = data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(
            batch_size=global_batch_size,
            label_key=settings_lib.LABEL,
            drop_final_batch=True,
            shuffle=shuffle,
            shuffle_buffer_size=shuffle_buffer_size,
            shuffle_seed=0 if shuffle else None),
        tf_transform_output.transformed_metadata.schema)
  options = tf.data.Options()
  # Transform writes few files; shard by element so every worker gets data
  # (the fixed shuffle seed gives every worker the same order to shard).
  options.experimental_distribute.auto_shard_policy = (
      tf.data.experimental.AutoShardPolicy.DATA)
  return dataset.with_options(options)


def cache_plan(example_counts: Dict[str, int], example_bytes: int,
               budget_mb: int) -> Dict[str, bool]:
  """Which of the train and eval splits to keep decoded in memory.

  The train split is read every epoch and comes first; eval gets what is
  left. A split without a known count is streamed.
  """
  left = budget_mb * (1 << 20)
  plan = {}
  for split in ('train', 'eval'):
    count = example_counts.get(split)
    size = int(count) * example_bytes if count else None
    plan[split] = size is not None and size <= left
    if plan[split]:
      left -= size
  return plan


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
  it from the 'finished' log record (`local_runner.ProgressHandler`).
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
    # The CLI parses this record (local_runner.EPOCH_FINISHED_MESSAGE).
    logging.info('autostrategy: epoch %d/%d finished %s', epoch + 1,
                 self._epochs, json.dumps(history[-1], sort_keys=True))


def training_callbacks(plan: accelerator.DistributionPlan, backup_dir: str,
                       model_run_dir: str, epochs: int,
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
      EpochLog(os.path.join(model_run_dir, HISTORY_FILE), epochs,
               write=plan.is_chief,
               examples_per_epoch=steps_per_epoch * plan.global_batch_size),
  ]


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
    return {PROBABILITIES: tf.reshape(tf.cast(probabilities, tf.float32), [-1])}

  @tf.function(input_signature=[
      tf.TensorSpec(shape=[None], dtype=tf.string, name='examples')])
  def transform_features(serialized):
    parsed = tf.io.parse_example(serialized, raw_spec)
    return model.tft_layer(parsed)

  return {SERVING_SIGNATURE: serve, TRANSFORM_SIGNATURE: transform_features}


def export_serving_model(model: tf.keras.Model, tf_transform_output,
                         text_column: str, export_dir: str) -> None:
  """Saves a SavedModel that takes serialized raw `tf.Example`s."""
  signatures = _serving_signatures(model, tf_transform_output, text_column)
  model.save(export_dir, save_format='tf', signatures=signatures)


def settings_from_config(custom_config: Optional[Dict[str, Any]]
                        ) -> Tuple[settings_lib.TrainerSettings,
                                   settings_lib.TextSettings]:
  """Parses the trainer and text settings carried by `custom_config`."""
  custom_config = custom_config or {}
  return (settings_lib.from_json(settings_lib.TrainerSettings,
                                 custom_config.get(TRAINER_KEY, '{}')),
          settings_lib.from_json(settings_lib.TextSettings,
                                 custom_config.get(TEXT_KEY, '{}')))


def _check_keras_flavour() -> None:
  if not hasattr(tf.keras, '__internal__') or 'keras.src' in tf.keras.__name__:
    raise RuntimeError(
        'tf.keras is Keras 3; set TF_USE_LEGACY_KERAS=1 before TensorFlow is '
        'imported (the autostrategy CLI and container image do this)')


# TrainerSettings fields a Tuner's best hyperparameters may set.
TUNABLE_FIELDS = ('learning_rate', 'epochs', 'per_replica_batch_size', 'model')


def apply_hyperparameters(trainer_settings: settings_lib.TrainerSettings,
                          hyperparameters: Optional[Dict[str, Any]]
                         ) -> settings_lib.TrainerSettings:
  """Overrides settings with a Tuner's best hyperparameters.

  Accepts the `keras_tuner.HyperParameters.get_config()` dict that TFX's
  Tuner writes (values under `values`) or a plain name → value dict. Only
  `TUNABLE_FIELDS` are taken; any other name is logged and ignored.
  """
  if not hyperparameters:
    return trainer_settings
  values = hyperparameters.get('values', hyperparameters)
  updates = {k: v for k, v in values.items() if k in TUNABLE_FIELDS}
  ignored = sorted(set(values) - set(updates) - {'space'})
  if ignored:
    logging.warning('autostrategy: ignoring hyperparameters %s (tunable: %s)',
                    ignored, TUNABLE_FIELDS)
  if updates:
    logging.info('autostrategy: hyperparameters override %s', updates)
  return dataclasses.replace(trainer_settings, **updates)


def warm_start(model: tf.keras.Model, base_model_dir: str) -> None:
  """Loads the weights of an earlier exported model of the same shape.

  Raises:
    ValueError: the base model's variables do not fit this model (another
      architecture or other text settings).
  """
  checkpoint = os.path.join(base_model_dir, 'variables', 'variables')
  if not tf.io.gfile.exists(checkpoint + '.index'):
    raise ValueError(f'base model {base_model_dir!r} has no SavedModel '
                     'variables to warm-start from')
  try:
    model.load_weights(checkpoint).assert_existing_objects_matched()
  except (AssertionError, ValueError, tf.errors.OpError) as error:
    raise ValueError(
        f'base model {base_model_dir!r} does not fit model '
        f'{model.name!r} built with the current settings: '
        f'{str(error).splitlines()[0]}') from error
  logging.info('autostrategy: warm-started from %s', base_model_dir)


def _write_plan(plan: accelerator.DistributionPlan,
                stand_ins: Optional[rehearsal.StandInStrategies],
                model_run_dir: str) -> None:
  values = plan.to_dict()
  if stand_ins is not None:
    values['stand_ins'] = (rehearsal.stand_in_notes(stand_ins.shape)
                           + stand_ins.notes)
    values['xla_in_fit'] = plan.jit_compile and stand_ins.xla_in_fit
    if plan.jit_compile and not stand_ins.xla_in_fit:
      values['stand_ins'].append(
          'XLA: the train step compiles and runs with XLA on one CPU device '
          'at the per-replica batch; the replicated fit runs without XLA, '
          'which cannot span logical CPU devices or workers')
  tf.io.gfile.makedirs(model_run_dir)
  with tf.io.gfile.GFile(os.path.join(model_run_dir, PLAN_FILE), 'w') as f:
    json.dump(values, f, indent=2, sort_keys=True)


# TFX Trainer will call this function.
def run_fn(fn_args) -> None:
  """Trains with the strategy that fits this machine and exports for serving.

  Reads `fn_args`: `train_files`, `eval_files`, `transform_output`,
  `data_accessor`, `train_steps`, `eval_steps`, `serving_model_dir`,
  `model_run_dir`, `base_model`, `hyperparameters` and `custom_config` (keys
  `trainer`, `text`, `example_counts`, `backup_dir`).

  Raises:
    TrainingDataError: a split is smaller than one global batch, or a feature
      has no static shape.
  """
  _check_keras_flavour()
  trainer_settings, text_settings = settings_from_config(fn_args.custom_config)
  trainer_settings = apply_hyperparameters(
      trainer_settings, getattr(fn_args, 'hyperparameters', None))
  custom_config = fn_args.custom_config or {}
  plan_options = dict(
      precision=trainer_settings.precision,
      steps_per_execution=trainer_settings.steps_per_execution,
      jit_compile=trainer_settings.jit_compile,
      backup_every_steps=trainer_settings.backup_every_steps)
  stand_ins = None
  if custom_config.get(REHEARSAL_KEY):
    strategy, plan, info, stand_ins = rehearsal.resolve(
        rehearsal.MachineShape.from_dict(custom_config[REHEARSAL_KEY]),
        trainer_settings.per_replica_batch_size, **plan_options)
  else:
    strategy, plan, info = accelerator.resolve(
        trainer_settings.accelerator,
        trainer_settings.per_replica_batch_size, **plan_options)
  logging.info('autostrategy: %s', json.dumps(plan.to_dict(), sort_keys=True))
  if plan.is_chief:
    _write_plan(plan, stand_ins, fn_args.model_run_dir)
  if plan.accelerator == 'tpu':
    check_tpu_lengths(text_settings)

  example_counts = custom_config.get(EXAMPLE_COUNTS_KEY, {})
  epochs = trainer_settings.epochs
  steps_per_epoch = steps_for_split('train', fn_args.train_steps,
                                    example_counts, plan.global_batch_size,
                                    divide_by=epochs)
  eval_steps = steps_for_split('eval', fn_args.eval_steps, example_counts,
                               plan.global_batch_size)

  tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
  example_bytes = decoded_example_bytes(tf_transform_output)
  cached = cache_plan(example_counts, example_bytes,
                      trainer_settings.input_cache_mb)
  logging.info('autostrategy: input: %d bytes per decoded example; cached in '
               'memory: %s (budget %d MiB)', example_bytes,
               ', '.join(s for s in cached if cached[s]) or 'none',
               trainer_settings.input_cache_mb)
  train_dataset = input_dataset(fn_args.train_files, fn_args.data_accessor,
                                tf_transform_output, plan.global_batch_size,
                                shuffle=True,
                                shuffle_buffer_size=shuffle_buffer_for(
                                    example_counts.get('train')),
                                cache=cached['train'])
  eval_dataset = input_dataset(fn_args.eval_files, fn_args.data_accessor,
                               tf_transform_output, plan.global_batch_size,
                               shuffle=False, cache=cached['eval'])
  check_static_shapes(train_dataset)

  # A stand-in over several logical CPUs cannot run XLA across them: the
  # replicated fit runs without it and XLA compiles the step on one device.
  xla_in_fit = plan.jit_compile and (stand_ins is None or stand_ins.xla_in_fit)

  def build_and_compile(jit_compile: bool) -> tf.keras.Model:
    model = models.build(text_settings, trainer_settings)
    if fn_args.base_model:
      warm_start(model, fn_args.base_model)
    models.compile_model(model, trainer_settings, plan.steps_per_execution,
                         decay_steps=steps_per_epoch * epochs,
                         jit_compile=jit_compile)
    return model

  accelerator.apply_precision(plan.precision)
  try:
    if plan.jit_compile and not xla_in_fit:
      rehearsal.check_xla_train_step(
          build_and_compile,
          input_dataset(fn_args.train_files, fn_args.data_accessor,
                        tf_transform_output, plan.per_replica_batch_size,
                        shuffle=False),
          plan.steps_per_execution)
      logging.info('autostrategy: the train step compiled with XLA and ran '
                   '%d step(s) on one device at the per-replica batch',
                   plan.steps_per_execution)
    # Only model construction and compile belong inside the scope.
    with strategy.scope():
      model = build_and_compile(xla_in_fit)

    backup_dir = custom_config.get(BACKUP_DIR_KEY) or os.path.join(
        fn_args.model_run_dir, 'backup')
    callbacks = training_callbacks(plan, backup_dir, fn_args.model_run_dir,
                                   epochs, steps_per_epoch)
    if stand_ins is not None:
      stand_ins.check_callbacks(callbacks)
    model.fit(train_dataset, epochs=epochs, steps_per_epoch=steps_per_epoch,
              validation_data=eval_dataset, validation_steps=eval_steps,
              callbacks=callbacks, verbose=2)
  finally:
    accelerator.apply_precision('float32')

  # Every worker saves (collective ops need all of them); only the chief's
  # copy is kept.
  export_dir = export.export_dir_for(info, fn_args.serving_model_dir)
  export_serving_model(model, tf_transform_output, text_settings.text_column,
                       export_dir)
  if export_dir != fn_args.serving_model_dir:
    export.cleanup(export_dir)
