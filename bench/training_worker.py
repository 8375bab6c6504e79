"""Worker: Trainer throughput, plain in-memory Keras, and the input pipeline.

    python -m bench.training_worker \
        --examples URI --transform-graph URI \
        [--model bow|transformer|hub [--hub-model-path DIR]] \
        [--per-replica-batch-size 32] [--cpu-replicas N] \
        [--variants trainer,memory,predict,input] [--rounds 3] [--steps 0]

`--examples` and `--transform-graph` are Transform's output artifacts
(`pipeline_root/Transform/transformed_examples/<id>` and
`.../transform_graph/<id>`). `--model hub` fine-tunes the pretrained encoder
in `--hub-model-path` (a Hugging Face checkpoint or a SavedModel): the
artifacts must come from an `autostrategy run --model hub` with that
checkpoint, whose tokenizer made the ids, attention mask and type ids both
fits read. As in the Trainer, a checkpoint is converted into a SavedModel
encoder first (`hf_checkpoint.encoder_path`, cached), outside the timing.

Variants, all in this one process so that their ratios share the machine's
state (the rounds alternate between them):

* `trainer`: what `run_fn` does — `distribution_plan.resolve`, the FnArgs TFX
  builds (`fn_args_utils.get_common_fn_args`, so the same `data_accessor`),
  `input_pipeline.input_dataset` over the transformed TFRecords (decoded
  examples cached in memory when `cache_plan` says the split fits, as
  run_fn decides), model built and compiled in `strategy.scope()` with the
  plan's steps_per_execution, `model.fit(dataset, steps_per_epoch=...)`.
* `memory`: the same model, batch and steps_per_execution, `model.fit` on
  in-memory tensors of the same train split, read once with the Trainer's
  own `input_dataset`.
* `streamed`: like `trainer` with the cache off (`--input-cache-mb 0`):
  every step decompresses and parses its records.
* `predict`: `model.predict` of the same model on those in-memory tensors
  at the same global batch: the inference rate the training rates are
  compared with (issue 19: training should reach >= 1/3 of it, since a
  training step costs about three forward passes).
* `input`: iterating the Trainer's dataset without a model.

Throughput is examples/s over the steps after `--warmup` steps of every fit
call (tracing, the shuffle buffer's first fill and the iterator's start are
excluded; they are one-off costs, not throughput); each variant's figure is
the median over rounds. Validation and the epoch-end callbacks of `run_fn`
are not part of these figures (see BENCHMARKS.md).
"""

import argparse
import dataclasses
import os
import statistics
import sys
import time

from tfx_autostrategy import tf_env

VARIANTS = ('trainer', 'memory', 'streamed', 'predict', 'input')


def text_settings_of(tf_transform_output, settings_lib,
                     pretrained_model: str = ''):
  """TextSettings with the fixed lengths the transformed examples have.

  Args:
    tf_transform_output: the Transform output the benchmark reads.
    settings_lib: `tfx_autostrategy.settings`.
    pretrained_model: the checkpoint whose tokenizer made the ids ('' for
      the vocabulary of bow/transformer). The model then reads the
      attention mask and type ids too, as the Trainer's does.

  Raises:
    ValueError: `pretrained_model` is given but the Transform output holds
      no attention mask (it was not made with a checkpoint's tokenizer).
  """
  spec = tf_transform_output.transformed_feature_spec()
  lengths = {'sequence_length': spec[settings_lib.TEXT_IDS].shape[0]}
  if settings_lib.CHAR_NGRAMS in spec:
    lengths['char_ngram_length'] = spec[settings_lib.CHAR_NGRAMS].shape[0]
  else:
    lengths['char_ngram_min'] = 0
  if pretrained_model:
    if settings_lib.TEXT_MASK not in spec:
      raise ValueError(
          'the Transform output has no attention mask '
          f'({settings_lib.TEXT_MASK}): make it with `autostrategy run '
          f'--model hub --hub-model-path {pretrained_model}`')
    lengths.update(tokenizer='pretrained', pretrained_model=pretrained_model)
  return settings_lib.TextSettings(**lengths)


def _configure_devices(cpu_replicas: int) -> None:
  tf_env.set_keras_flavour()
  from tfx_autostrategy.distribute import cpu_replicas as cpu_replicas_lib  # pylint: disable=g-import-not-at-top
  if cpu_replicas:
    cpu_replicas_lib.configure_cpu_replicas(cpu_replicas)


def fn_args_for(examples_uri: str, transform_graph_uri: str):
  """The FnArgs TFX's Trainer executor would build for these artifacts."""
  from tfx.components.trainer import fn_args_utils  # pylint: disable=g-import-not-at-top
  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  examples = standard_artifacts.Examples()
  examples.uri = examples_uri
  splits = sorted(name[len('Split-'):] for name in os.listdir(examples_uri)
                  if name.startswith('Split-'))
  examples.split_names = artifact_utils.encode_split_names(splits)
  graph = standard_artifacts.TransformGraph()
  graph.uri = transform_graph_uri
  fn_args = fn_args_utils.get_common_fn_args(
      {'examples': [examples], 'transform_graph': [graph]},
      {'train_args': '{}', 'eval_args': '{}'})
  # As TFX's Trainer executor does (`transform_output` is the old name).
  fn_args.transform_output = fn_args.transform_graph_path
  return fn_args


def count_examples(file_patterns) -> int:
  """Examples in a split's transformed TFRecords, without decoding them."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  total = 0
  for pattern in file_patterns:
    for path in tf.io.gfile.glob(pattern):
      # Transform writes gzipped TFRecords (`*.gz`).
      records = tf.data.TFRecordDataset(
          path, compression_type='GZIP' if path.endswith('.gz') else '')
      total += int(records.reduce(0, lambda count, _: count + 1))
  return total


def in_memory_batches(fn_args, tf_transform_output, global_batch_size: int,
                      batches: int):
  """The first `batches` batches of the train split, as numpy arrays.

  Read with the Trainer's own input function
  (`input_pipeline.input_dataset`, unshuffled, uncached), so the in-memory
  baseline fits exactly the examples and shapes the Trainer reads.

  Returns:
    (features, labels): feature name -> [batches x batch, ...], labels.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components.trainer import input_pipeline  # pylint: disable=g-import-not-at-top
  dataset = input_pipeline.input_dataset(
      fn_args.train_files, fn_args.data_accessor, tf_transform_output,
      global_batch_size, shuffle=False)
  features, labels = {}, []
  for batch_features, batch_labels in (
      dataset.take(batches).as_numpy_iterator()):
    for key, value in batch_features.items():
      features.setdefault(key, []).append(value)
    labels.append(batch_labels)
  return ({k: np.concatenate(v) for k, v in features.items()},
          np.concatenate(labels))


def _step_timer():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  class StepTimer(tf.keras.callbacks.Callback):
    """Records (last step index, time) after every train/predict call."""

    def __init__(self):
      super().__init__()
      # Keep logs as tensors: no per-step conversion that the Trainer
      # would not do either.
      self._supports_tf_logs = True
      self.marks = []

    def on_train_begin(self, logs=None):
      self.marks = []

    def on_train_batch_end(self, batch, logs=None):
      self.marks.append((batch, time.perf_counter()))

    def on_predict_begin(self, logs=None):
      self.marks = []

    def on_predict_batch_end(self, batch, logs=None):
      self.marks.append((batch, time.perf_counter()))

    def rate(self, batch_size: int, warmup: int) -> float:
      """Examples/s from the end of step `warmup` to the last step."""
      start = next((m for m in self.marks if m[0] >= warmup - 1),
                   self.marks[0])
      end = self.marks[-1]
      if end[0] <= start[0]:
        start = self.marks[0]
      return (end[0] - start[0]) * batch_size / max(end[1] - start[1], 1e-9)

  return StepTimer()


def build_parser() -> argparse.ArgumentParser:
  """The worker's options."""
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--examples', required=True)
  parser.add_argument('--transform-graph', required=True)
  parser.add_argument('--model', default='bow',
                      choices=('bow', 'transformer', 'hub'))
  parser.add_argument('--hub-model-path', default='',
                      help='the pretrained encoder of --model hub (the '
                      'checkpoint the Transform output was tokenised with)')
  parser.add_argument('--per-replica-batch-size', type=int, default=32)
  parser.add_argument('--cpu-replicas', type=int, default=0)
  parser.add_argument('--variants', default='trainer,memory,input')
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--steps', type=int, default=0,
                      help='steps per fit call; 0 = one pass over the train '
                      'split (capped by --max-steps)')
  parser.add_argument('--max-steps', type=int, default=400)
  parser.add_argument('--warmup', type=int, default=5)
  parser.add_argument('--input-batches', type=int, default=0,
                      help='batches per input-only round; 0 = 4x the steps')
  return parser


def parse_args(argv=None) -> argparse.Namespace:
  """The options, checked (a usage error exits with status 2)."""
  parser = build_parser()
  args = parser.parse_args(argv)
  variants = [v for v in args.variants.split(',') if v]
  unknown = sorted(set(variants) - set(VARIANTS))
  if unknown:
    parser.error(f'unknown variants {unknown}; choose from {VARIANTS}')
  if (args.model == 'hub') != bool(args.hub_model_path):
    parser.error('--hub-model-path goes with --model hub, and only with it')
  if args.hub_model_path:
    args.hub_model_path = os.path.abspath(args.hub_model_path)
  args.variant_list = variants
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  variants = args.variant_list

  _configure_devices(args.cpu_replicas)
  started = time.monotonic()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
  from bench import common  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components.trainer import input_pipeline  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.distribute import distribution_plan  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.modeling import models  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy import settings as settings_lib  # pylint: disable=g-import-not-at-top

  trainer_settings = settings_lib.TrainerSettings(
      model=args.model, per_replica_batch_size=args.per_replica_batch_size,
      hub_model_path=args.hub_model_path)
  # As in run_fn.
  strategy, plan, _ = distribution_plan.resolve(trainer_settings)
  batch = plan.global_batch_size
  fn_args = fn_args_for(args.examples, args.transform_graph)
  tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
  # The lengths Transform padded to (`auto` picks them from the data).
  text_settings = text_settings_of(tf_transform_output, settings_lib,
                                   args.hub_model_path)
  if args.model == 'hub':
    # As run_fn: the checkpoint becomes a SavedModel encoder on the host,
    # once per precision (cached), before the strategy's scope.
    from tfx_autostrategy.modeling import hf_checkpoint  # pylint: disable=g-import-not-at-top
    trainer_settings = dataclasses.replace(
        trainer_settings, hub_model_path=hf_checkpoint.encoder_path(
            args.hub_model_path, precision=plan.precision or 'float32'))

  train_examples = count_examples(fn_args.train_files)
  steps = args.steps or max(1, min(args.max_steps, train_examples // batch))
  if train_examples < batch:
    raise SystemExit(f'train split has {train_examples} examples, fewer than '
                     f'one global batch of {batch}')
  warmup = min(args.warmup, max(steps - 2, 0))

  # As run_fn: the learning-rate schedule spans the training steps.
  compile_kwargs = {'decay_steps': steps * args.rounds}

  distribution_plan.apply_precision(plan.precision)
  datasets, fitted = {}, {}
  # As run_fn: a shuffle buffer that covers the split, and the split cached
  # when it fits the default budget.
  cached = input_pipeline.cache_plan(
      {'train': train_examples},
      input_pipeline.decoded_example_bytes(tf_transform_output),
      trainer_settings.input_cache_mb)['train']
  for variant in variants:
    if variant in ('trainer', 'input', 'streamed'):
      datasets[variant] = input_pipeline.input_dataset(
          fn_args.train_files, fn_args.data_accessor, tf_transform_output,
          batch, shuffle=True,
          shuffle_buffer_size=input_pipeline.shuffle_buffer_for(
              train_examples),
          cache=cached and variant != 'streamed')
      input_pipeline.check_static_shapes(datasets[variant])
    if variant == 'input':
      continue
    with strategy.scope():
      model = models.build(text_settings, trainer_settings)
      models.compile_model(model, trainer_settings, plan.steps_per_execution,
                           **compile_kwargs)
    fitted[variant] = model

  # In-memory tensors: the model's inputs only, whole batches only.
  in_memory = None
  in_memory_model = fitted.get('memory') or fitted.get('predict')
  if in_memory_model is not None:
    features, labels = in_memory_batches(
        fn_args, tf_transform_output, batch,
        min(steps, train_examples // batch))
    in_memory = ({k: tf.constant(features[k])
                  for k in in_memory_model.input_names},
                 tf.constant(labels))

  rates = {v: [] for v in fitted}
  timer = _step_timer()
  prepared = time.monotonic()
  for round_index in range(args.rounds):
    order = list(fitted)
    if round_index % 2:
      order.reverse()  # ABBA: drift in machine load hits every variant alike
    for variant in order:
      model = fitted[variant]
      if variant == 'memory':
        model.fit(in_memory[0], in_memory[1], batch_size=batch, epochs=1,
                  shuffle=True, callbacks=[timer], verbose=0)
      elif variant == 'predict':
        model.predict(in_memory[0], batch_size=batch, callbacks=[timer],
                      verbose=0)
      else:
        model.fit(datasets[variant], epochs=1, steps_per_epoch=steps,
                  callbacks=[timer], verbose=0)
      rates[variant].append(timer.rate(batch, warmup))
      print(f'round {round_index} {variant}: {rates[variant][-1]:.0f} '
            'examples/s', file=sys.stderr, flush=True)

  input_rates = []
  if 'input' in variants:
    input_batches = args.input_batches or 4 * steps
    iterator = iter(datasets['input'])
    for _ in range(max(warmup, 1)):
      next(iterator)
    for _ in range(args.rounds):
      begin = time.perf_counter()
      for _ in range(input_batches):
        next(iterator)
      input_rates.append(input_batches * batch /
                         max(time.perf_counter() - begin, 1e-9))
  distribution_plan.apply_precision('float32')

  result = {
      'model': args.model,
      'hub_model_path': args.hub_model_path,
      'sequence_length': text_settings.sequence_length,
      'plan': plan.to_dict(),
      'global_batch_size': batch,
      'train_examples': train_examples,
      'train_cached': cached,
      'steps_per_fit': steps,
      'warmup_steps': warmup,
      'rounds': args.rounds,
      'rates': rates,
      'median': {v: statistics.median(r) for v, r in rates.items()},
      'setup_seconds': prepared - started,
      'measure_seconds': time.monotonic() - prepared,
  }
  if input_rates:
    result['rates']['input'] = input_rates
    result['median']['input'] = statistics.median(input_rates)
  common.emit_result(result)
  return 0


if __name__ == '__main__':
  sys.exit(main())
