"""The accelerator-aware `run_fn` that AutoStrategyTrainer runs.

This directory is the Trainer's `module_file` package: TFX hashes it into the
Trainer cache key, so editing this file re-runs the Trainer (and only it).
The same `run_fn` also works with the stock TFX Trainer when `custom_config`
carries the settings and `train_args`/`eval_args` carry the step counts.
"""

import dataclasses
import json
import logging
import os
from typing import Any, Dict, Optional, Tuple

import tensorflow as tf
import tensorflow_transform as tft

from tfx_autostrategy.components.trainer import callbacks as callbacks_lib
from tfx_autostrategy.components.trainer import export
from tfx_autostrategy.components.trainer import input_pipeline
from tfx_autostrategy import conventions
from tfx_autostrategy.distribute import devices
from tfx_autostrategy.distribute import distribution_plan
from tfx_autostrategy.distribute import rehearsal
from tfx_autostrategy.modeling import hf_checkpoint
from tfx_autostrategy.modeling import models
from tfx_autostrategy import settings as settings_lib

# Keys of `fn_args.custom_config` (written by the executor).
TRAINER_KEY = 'trainer'
TEXT_KEY = 'text'
EXAMPLE_COUNTS_KEY = 'example_counts'
BACKUP_DIR_KEY = 'backup_dir'
# A `rehearsal.MachineShape` dict: train as that machine would, on stand-ins.
REHEARSAL_KEY = 'rehearsal'



def settings_from_config(custom_config: Optional[Dict[str, Any]]
                        ) -> Tuple[settings_lib.TrainerSettings,
                                   settings_lib.TextSettings]:
  """The trainer and text settings `custom_config` carries.

  The executor puts them there parsed (`settings.from_json` returns those as
  they are); JSON or a dict is parsed.
  """
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


def _write_plan(plan: distribution_plan.DistributionPlan,
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
  with tf.io.gfile.GFile(
      os.path.join(model_run_dir, conventions.PLAN_FILE), 'w') as f:
    json.dump(values, f, indent=2, sort_keys=True)


# TFX Trainer will call this function.
def run_fn(fn_args) -> None:
  """Trains with the strategy that fits this machine and exports for serving.

  Reads `fn_args`: `train_files`, `eval_files`, `transform_output`,
  `data_accessor`, `train_steps`, `eval_steps`, `serving_model_dir`,
  `model_run_dir`, `base_model`, `hyperparameters` and `custom_config` (keys
  `trainer`, `text`, `example_counts`, `backup_dir`, and `rehearsal` for a
  rehearsal).

  Raises:
    input_pipeline.TrainingDataError: a split is smaller than one global
      batch, or a feature has no static shape.
  """
  _check_keras_flavour()
  trainer_settings, text_settings = settings_from_config(fn_args.custom_config)
  trainer_settings = apply_hyperparameters(
      trainer_settings, getattr(fn_args, 'hyperparameters', None))
  custom_config = fn_args.custom_config or {}
  stand_ins = None
  host, hosts = devices.tpu_slice_host()
  if hosts > 1 and host and not custom_config.get(REHEARSAL_KEY):
    # TensorFlow drives a multi-host slice from one client: host 0's
    # TPUStrategy runs every host's input pipeline and chips through the pod
    # runtime's servers, and exports; the other hosts have nothing to run.
    logging.info('autostrategy: TPU host %d of %d: host 0 trains the whole '
                 'slice (TPU pod runtime); nothing to run here', host, hosts)
    return
  if custom_config.get(REHEARSAL_KEY):
    strategy, plan, info, stand_ins = rehearsal.resolve(
        rehearsal.MachineShape.from_dict(custom_config[REHEARSAL_KEY]),
        trainer_settings)
  else:
    strategy, plan, info = distribution_plan.resolve(trainer_settings)
  logging.info('autostrategy: %s', json.dumps(plan.to_dict(), sort_keys=True))
  if plan.is_chief:
    _write_plan(plan, stand_ins, fn_args.model_run_dir)
  if plan.accelerator == 'tpu':
    input_pipeline.check_tpu_lengths(text_settings)

  example_counts = custom_config.get(EXAMPLE_COUNTS_KEY, {})
  epochs = trainer_settings.epochs
  steps_per_epoch = input_pipeline.steps_for_split(
      'train', fn_args.train_steps, example_counts, plan.global_batch_size,
      divide_by=epochs)
  eval_steps = input_pipeline.steps_for_split(
      'eval', fn_args.eval_steps, example_counts, plan.global_batch_size)

  tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
  example_bytes = input_pipeline.decoded_example_bytes(tf_transform_output)
  cached = input_pipeline.cache_plan(example_counts, example_bytes,
                                     trainer_settings.input_cache_mb)
  logging.info('autostrategy: input: %d bytes per decoded example; cached in '
               'memory: %s (budget %d MiB)', example_bytes,
               ', '.join(s for s in cached if cached[s]) or 'none',
               trainer_settings.input_cache_mb)
  def make_train(batch_size, shard=(1, 0)):
    return input_pipeline.input_dataset(
        fn_args.train_files, fn_args.data_accessor, tf_transform_output,
        batch_size, shuffle=True,
        shuffle_buffer_size=input_pipeline.shuffle_buffer_for(
            example_counts.get('train')),
        cache=cached['train'], shard=shard)

  def make_eval(batch_size, shard=(1, 0)):
    return input_pipeline.input_dataset(
        fn_args.eval_files, fn_args.data_accessor, tf_transform_output,
        batch_size, shuffle=False, cache=cached['eval'], shard=shard)

  input_pipeline.check_static_shapes(make_train(plan.per_replica_batch_size))
  # Every input pipeline (one per host of a TPU slice, per worker, or one)
  # reads its own shard, batched per replica: a step takes the global batch
  # from all hosts together.
  train_dataset = input_pipeline.distributed_dataset(
      strategy, make_train, plan.global_batch_size)
  eval_dataset = input_pipeline.distributed_dataset(
      strategy, make_eval, plan.global_batch_size)

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

  if trainer_settings.model == 'hub':
    # A Hugging Face checkpoint becomes a SavedModel encoder here, on the
    # host, once per checkpoint and precision (cached), and outside the
    # strategy's scope; build_hub then loads that SavedModel.
    trainer_settings = dataclasses.replace(
        trainer_settings, hub_model_path=hf_checkpoint.encoder_path(
            trainer_settings.hub_model_path,
            precision=plan.precision or 'float32'))

  distribution_plan.apply_precision(plan.precision)
  try:
    # The same model and settings on every worker: the chief checks alone.
    if plan.jit_compile and not xla_in_fit and plan.is_chief:
      rehearsal.check_xla_train_step(
          build_and_compile,
          input_pipeline.input_dataset(
              fn_args.train_files, fn_args.data_accessor,
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
    callbacks = callbacks_lib.training_callbacks(
        plan, backup_dir, fn_args.model_run_dir, epochs, steps_per_epoch)
    if stand_ins is not None:
      stand_ins.check_callbacks(callbacks)
    model.fit(train_dataset, epochs=epochs, steps_per_epoch=steps_per_epoch,
              validation_data=eval_dataset, validation_steps=eval_steps,
              callbacks=callbacks, verbose=2)
  finally:
    distribution_plan.apply_precision('float32')

  # Every worker saves (collective ops need all of them); only the chief's
  # copy is kept.
  export_dir = export.export_dir_for(info, fn_args.serving_model_dir)
  export.export_serving_model(model, tf_transform_output,
                              text_settings.text_column, export_dir)
  if export_dir != fn_args.serving_model_dir:
    export.cleanup(export_dir)
