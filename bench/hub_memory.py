"""Measured memory of fine-tuning a pretrained encoder, on this CPU.

    python -m bench.hub_memory --hub-model-path DIR [--sequence-length 64] \
        [--batch-size 32] [--steps 5] [--precision float32]

docs/PRETRAINED.md's per-replica memory table is an estimate (16 bytes per
parameter of state plus the activations kept for the backward pass). This
worker measures one row of it: in one process it converts the checkpoint as
the Trainer does (`hf_checkpoint.encoder_path`, cached, in a child process
so the conversion's own memory does not count), reads the
resident set, then builds the Trainer's model (`models.build`: encoder,
the declared pooling, dropout, classifier), compiles it with the Trainer's
fine-tuning optimizer (AdamW) and runs `--steps` train steps on random ids
of the given shape (every token real). It prints the peak resident set
growth over the reading (`getrusage` ru_maxrss, the whole process: TF's
allocator, the SavedModel's restored variables, the Keras weights, AdamW's
moments, the activations and XLA/TF scratch) as one JSON line, with the
table's estimate for the same shape beside it.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from tfx_autostrategy import tf_env


def _rss_mib() -> float:
  """Peak resident set of this process so far, MiB (Linux: KiB units)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mib() -> float:
  """Resident set of this process now, MiB (Linux)."""
  with open('/proc/self/statm') as f:
    pages = int(f.read().split()[1])
  return pages * os.sysconf('SC_PAGE_SIZE') / 2**20


def estimate_gib(parameters: int, layers: int, width: int, heads: int,
                 length: int, batch: int, float32: bool) -> dict:
  """docs/PRETRAINED.md's estimate: state + activations, GiB."""
  state = 16 * parameters
  activations = layers * length * batch * width * (
      34 + 5 * heads * length / width)
  if float32:
    activations *= 2
  return {'state': state / 2**30, 'activations': activations / 2**30,
          'total': (state + activations) / 2**30}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--hub-model-path', required=True)
  parser.add_argument('--sequence-length', type=int, default=64)
  parser.add_argument('--batch-size', type=int, default=32)
  parser.add_argument('--steps', type=int, default=5)
  parser.add_argument('--precision', default='float32',
                      choices=('float32', 'mixed_bfloat16'))
  args = parser.parse_args(argv)

  tf_env.set_keras_flavour()
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy import settings as settings_lib  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.distribute import distribution_plan  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.modeling import hf_checkpoint  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.modeling import models  # pylint: disable=g-import-not-at-top

  config = hf_checkpoint.read_config(args.hub_model_path)
  # As run_fn: convert on the host first (cached), here in a child process,
  # so that the conversion's peak is not this process's; then the reading.
  encoder = subprocess.run(
      [sys.executable, '-c', 'import sys; from tfx_autostrategy import '
       'tf_env; tf_env.set_keras_flavour(); from tfx_autostrategy.modeling '
       'import hf_checkpoint; print(hf_checkpoint.encoder_path(sys.argv[1], '
       'precision=sys.argv[2]))', args.hub_model_path, args.precision],
      check=True, capture_output=True, text=True).stdout.strip().splitlines(
          )[-1]
  rng = np.random.default_rng(0)
  shape = (args.batch_size * args.steps, args.sequence_length)
  features = {
      settings_lib.TEXT_IDS: tf.constant(
          rng.integers(1000, config.vocab_size, shape), tf.int64),
      settings_lib.TEXT_MASK: tf.ones(shape, tf.int64),
      settings_lib.TEXT_TYPE_IDS: tf.zeros(shape, tf.int64),
  }
  labels = tf.constant(rng.integers(0, 2, shape[0]), tf.int64)
  base_peak, base_now = _rss_mib(), _current_rss_mib()

  distribution_plan.apply_precision(args.precision)
  text_settings = settings_lib.TextSettings(
      sequence_length=args.sequence_length, tokenizer='pretrained',
      pretrained_model=args.hub_model_path)
  trainer_settings = settings_lib.TrainerSettings(
      model='hub', per_replica_batch_size=args.batch_size,
      hub_model_path=encoder)
  model = models.build(text_settings, trainer_settings)
  models.compile_model(model, trainer_settings, steps_per_execution=1,
                       decay_steps=args.steps)
  built = _current_rss_mib()
  started = time.perf_counter()
  history = model.fit(features, labels, batch_size=args.batch_size, epochs=1,
                      shuffle=False, verbose=0)
  seconds = time.perf_counter() - started
  parameters = int(sum(np.prod(w.shape) for w in model.trainable_weights))
  peak = _rss_mib()
  estimate = estimate_gib(parameters, config.num_layers, config.hidden_size,
                          config.num_heads, args.sequence_length,
                          args.batch_size, args.precision == 'float32')
  print(json.dumps({
      'hub_model_path': args.hub_model_path,
      'precision': args.precision,
      'sequence_length': args.sequence_length,
      'batch_size': args.batch_size,
      'steps': args.steps,
      'parameters': parameters,
      'loss': history.history['loss'][-1],
      'rss_before_mib': round(base_now, 1),
      'peak_before_mib': round(base_peak, 1),
      'rss_after_build_mib': round(built, 1),
      'peak_mib': round(peak, 1),
      'peak_growth_gib': round((peak - base_now) / 1024, 3),
      'estimate_gib': {k: round(v, 3) for k, v in estimate.items()},
      'fit_seconds': round(seconds, 1),
  }, sort_keys=True))
  return 0


if __name__ == '__main__':
  sys.exit(main())
