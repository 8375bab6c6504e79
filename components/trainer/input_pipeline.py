"""The Trainer's input pipeline: fixed-shape batches of transformed examples.

Steps per epoch from the example counts, the static-shape and TPU-length
checks, the shuffle buffer, which splits are decoded once and kept in memory
(`cache_plan`, sized by `decoded_example_bytes`), and each input pipeline's
own shard of a split (`distributed_dataset`: one pipeline per host of a TPU
slice or per worker, each reading a disjoint share every epoch).
"""

import math
from typing import Callable, Dict, Optional, Tuple

import tensorflow as tf
from tfx_bsl.public import tfxio

from tfx_autostrategy import conventions
from tfx_autostrategy import settings as settings_lib

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
      `conventions.TPU_MULTIPLE`; the message names the setting
      and the value to use.
  """
  multiple = conventions.TPU_MULTIPLE
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
                  batch_size: int, shuffle: bool,
                  shuffle_buffer_size: int = DEFAULT_SHUFFLE_BUFFER,
                  cache: bool = False,
                  shard: Tuple[int, int] = (1, 0)) -> tf.data.Dataset:
  """Fixed-shape, repeated batches of transformed examples.

  Args:
    file_pattern: the split's transformed TFRecord files.
    data_accessor: `fn_args.data_accessor`.
    tf_transform_output: the Transform graph's output.
    batch_size: examples per batch; the last partial batch is dropped so
      that every batch has a static shape.
    shuffle: shuffle examples (seeded, reshuffled every epoch).
    shuffle_buffer_size: examples in the shuffle buffer.
    cache: decode the split once and keep the decoded examples in memory.
      Without it every step decompresses and parses its records, on the same
      CPU cores the model runs on (on a 2-core host that cost the transformer
      9% of its throughput); with it later epochs only shuffle and batch.
      The caller checks that the split fits (`decoded_example_bytes`).
    shard: (input pipelines, this one's index): keep every n-th example
      from the index'th on, before shuffling, so that each input pipeline
      (one per host or worker) reads a fixed, disjoint share of the split
      every epoch. Transform writes few files, so the split is sharded by
      example, not by file.
  """
  num_shards, index = shard
  if cache or num_shards > 1:
    # One pass, all examples (the remainder is dropped after shuffling, so a
    # different one every epoch).
    dataset = data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(
            batch_size=DECODE_BATCH_SIZE,
            label_key=settings_lib.LABEL, num_epochs=1, shuffle=False,
            drop_final_batch=False),
        tf_transform_output.transformed_metadata.schema)
    dataset = dataset.unbatch()
    dataset = shard_and_batch(dataset, batch_size, shuffle,
                              shuffle_buffer_size, cache, shard)
  else:
    dataset = data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(
            batch_size=batch_size,
            label_key=settings_lib.LABEL,
            drop_final_batch=True,
            shuffle=shuffle,
            shuffle_buffer_size=shuffle_buffer_size,
            shuffle_seed=0 if shuffle else None),
        tf_transform_output.transformed_metadata.schema)
  options = tf.data.Options()
  # Sharded here (`distributed_dataset`), never again by tf.distribute.
  options.experimental_distribute.auto_shard_policy = (
      tf.data.experimental.AutoShardPolicy.OFF)
  return dataset.with_options(options)


def shard_and_batch(examples: tf.data.Dataset, batch_size: int,
                    shuffle: bool, shuffle_buffer_size: int = (
                        DEFAULT_SHUFFLE_BUFFER),
                    cache: bool = False,
                    shard: Tuple[int, int] = (1, 0)) -> tf.data.Dataset:
  """One input pipeline's repeated batches of an unbatched example stream.

  Shards first (every example goes to exactly one pipeline, and to the same
  one every epoch), then caches, shuffles within the shard (reshuffled every
  epoch), repeats and batches with the remainder dropped.
  """
  num_shards, index = shard
  if not 0 <= index < num_shards:
    raise ValueError(f'input pipeline {index} of {num_shards} does not exist')
  if num_shards > 1:
    examples = examples.shard(num_shards, index)
  if cache:
    examples = examples.cache()
  if shuffle:
    examples = examples.shuffle(shuffle_buffer_size, seed=0,
                                reshuffle_each_iteration=True)
  examples = examples.repeat().batch(batch_size, drop_remainder=True)
  return examples.prefetch(tf.data.AUTOTUNE)


def distributed_dataset(strategy, make_dataset: Callable[
    [int, Tuple[int, int]], tf.data.Dataset], global_batch_size: int):
  """Each input pipeline's own shard, batched per replica, for `strategy`.

  `strategy.distribute_datasets_from_function` calls `make_dataset` once per
  input pipeline with its `tf.distribute.InputContext`: on a multi-host TPU
  slice one per host (the host's CPU feeds its own chips), with
  MultiWorkerMirroredStrategy one per worker, else one. Each pipeline reads
  its shard (`shard` argument) in batches of the per-replica size, and each
  of its replicas takes its own batch per step, so a step consumes
  `global_batch_size` examples over all hosts.

  Args:
    strategy: the `tf.distribute.Strategy` training runs under.
    make_dataset: `f(per_replica_batch, (input pipelines, index))` returning
      that pipeline's batches (`input_dataset` with those arguments).
    global_batch_size: examples per step over all replicas of all hosts.
  """

  def dataset_fn(input_context):
    batch = input_context.get_per_replica_batch_size(global_batch_size)
    return make_dataset(batch, (input_context.num_input_pipelines,
                                input_context.input_pipeline_id))

  return strategy.distribute_datasets_from_function(dataset_fn)


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
