"""Test set-up that must happen before TensorFlow is imported."""

import os

from tfx_autostrategy import tf_env

# tf.keras must be tf_keras (Keras 2) in every test process; TFX, TFMA and
# MultiWorkerMirroredStrategy need it and TF decides at import time.
tf_env.set_keras_flavour()
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import json
import subprocess
import sys

import pytest

# The settings of the one real pipeline run that several test modules share.
# It trains under a real 4-replica MirroredStrategy (logical CPU devices) and
# must learn: the AUC threshold is the CLI default, well above chance.
PIPELINE_RUN_REPLICAS = 4
PIPELINE_RUN_PER_REPLICA_BATCH = 8
PIPELINE_RUN_AUC_THRESHOLD = 0.6
PIPELINE_RUN_ARGS = ('--epochs', '2',
                     '--per-replica-batch-size',
                     str(PIPELINE_RUN_PER_REPLICA_BATCH),
                     '--cpu-replicas', str(PIPELINE_RUN_REPLICAS),
                     '--auc-threshold', str(PIPELINE_RUN_AUC_THRESHOLD),
                     '--json')
PIPELINE_RUN_ROWS = 1200


def run_cli(*args, timeout=1200, env=None):
  """Runs the real `autostrategy` entry point in a fresh process."""
  return subprocess.run(
      [sys.executable, '-m', 'tfx_autostrategy.cli', *args],
      capture_output=True, text=True, timeout=timeout, check=False, env=env)


@pytest.fixture(scope='session')
def pipeline_data(tmp_path_factory):
  """A seeded synthetic data set in Jigsaw CSV format."""
  root = tmp_path_factory.mktemp('pipeline_data') / 'data'
  subprocess.run(
      [sys.executable, '-m', 'tfx_autostrategy.sample_data', '--rows',
       str(PIPELINE_RUN_ROWS), '--seed', '7', '--output', str(root)],
      check=True)
  return str(root)


@pytest.fixture(scope='session')
def pipeline_run(pipeline_data, tmp_path_factory):
  """One full `autostrategy run` through the CLI: (process, JSON, output dir)."""
  output = str(tmp_path_factory.mktemp('pipeline_run') / 'out')
  proc = run_cli('run', '--data', pipeline_data, '--output', output,
                 *PIPELINE_RUN_ARGS)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  return proc, json.loads(proc.stdout.strip().splitlines()[-1]), output
