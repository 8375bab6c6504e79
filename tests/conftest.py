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
import textwrap

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


SERVE_SCRIPT = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_transform  # registers nothing we need; mirrors serving images
    assert 'tfx_autostrategy' not in sys.modules
    model = tf.saved_model.load(sys.argv[1])
    texts = ['you are a stupid idiot', 'thank you for the kind help', '']
    examples = []
    for text in texts:
      feature = {sys.argv[2]: tf.train.Feature(
          bytes_list=tf.train.BytesList(value=[text.encode()]))}
      examples.append(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())
    out = model.signatures['serving_default'](examples=tf.constant(examples))
    probabilities = out['probabilities']
    print(json.dumps({'keys': sorted(out), 'shape': probabilities.shape.as_list(),
                      'dtype': probabilities.dtype.name,
                      'values': probabilities.numpy().tolist(),
                      'signatures': sorted(model.signatures)}))
""")


def assert_serves_raw_text(model_dir, text_column='comment_text'):
  """Loads a pushed SavedModel in a fresh process and serves 3 raw texts.

  Returns:
    The 3 probabilities.
  """
  proc = subprocess.run([sys.executable, '-c', SERVE_SCRIPT, model_dir,
                         text_column], capture_output=True, text=True,
                        timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  served = json.loads(proc.stdout.strip().splitlines()[-1])
  assert served['keys'] == ['probabilities']
  assert served['shape'] == [3]
  assert served['dtype'] == 'float32'
  assert all(0.0 <= v <= 1.0 for v in served['values'])
  assert served['signatures'] == ['serving_default', 'transform_features']
  return served['values']


# The session's shared pipeline run is made once: under `pytest -n 2 --dist
# loadgroup` (make test) every test file that uses it runs on the same worker.
SHARED_RUN_FIXTURES = frozenset(('pipeline_run', 'pipeline_data'))
SHARED_RUN_GROUP = 'shared_pipeline_run'


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
  """Puts each test file in one xdist group, and every file using the shared run in one.

  A file stays on one worker, so its module-scoped fixtures (a Trainer run, a
  compiled pipeline) are made once; files that share the session's pipeline
  run go to one worker together, so that run is made once too. The shared
  group is scheduled first because it is the longest.
  """
  del config  # Unused.
  shared_files = {item.nodeid.split('::')[0] for item in items
                  if SHARED_RUN_FIXTURES & set(item.fixturenames)}
  for item in items:
    path = item.nodeid.split('::')[0]
    group = SHARED_RUN_GROUP if path in shared_files else path
    item.add_marker(pytest.mark.xdist_group(group))
  # A stable sort keeps pytest's order inside each group.
  items.sort(key=lambda item: item.nodeid.split('::')[0] not in shared_files)
