"""The cache follows the code: real edits to a copy of the package, real runs.

TFX's cache key covers a module file's directory; the Trainer and Transform
also run code outside it (models, settings, accelerator, the executor). These
tests lay out a copy of the package the way setup.py installs it, put it
first on PYTHONPATH of a fresh process, run the real pipeline up to the
Trainer with LocalDagRunner, edit files of the copy, and read from MLMD which
components ran again.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import tfx_autostrategy
from tfx_autostrategy.pipeline import code_fingerprint
from tfx_autostrategy.pipeline import config as config_lib

pytestmark = pytest.mark.e2e

REPO = os.path.dirname(os.path.dirname(os.path.abspath(
    tfx_autostrategy.__file__)))

RUN_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from tfx_autostrategy import tf_env
    tf_env.set_keras_flavour()
    import tfx_autostrategy
    # The copy, not the editable install, must be the code that runs.
    assert tfx_autostrategy.__file__.startswith(sys.argv[3]), tfx_autostrategy.__file__
    from tfx_autostrategy.pipeline import local_runner
    from tfx_autostrategy.pipeline import pipeline as pipeline_lib
    from tfx_autostrategy.preflight import csv_check
    from tfx_autostrategy import settings
    data, output = sys.argv[1], sys.argv[2]
    config = local_runner.build_config(
        data, output, settings.TextSettings(sequence_length=32),
        settings.TrainerSettings(epochs=1, per_replica_batch_size=16),
        csv_check.check_csv_dir(data))
    result = local_runner.run_pipeline(config, until=pipeline_lib.TRAINER)
    print(json.dumps({c.component: c.state for c in result.components}))
""")


def package_copy(root):
  """The repository's package laid out as setup.py's PACKAGE_DIRS install it."""
  package = root / 'tfx_autostrategy'
  shutil.copytree(os.path.join(REPO, 'tfx_autostrategy'), package,
                  ignore=shutil.ignore_patterns('__pycache__'))
  for name in ('components', 'pipeline', 'kubeflow', 'schemas'):
    shutil.copytree(os.path.join(REPO, name), package / name,
                    ignore=shutil.ignore_patterns('__pycache__'))
  return package


def append(path, text):
  assert os.path.isfile(path), path  # An edit, not a new file.
  with open(path, 'a') as f:
    f.write(text)


def test_each_component_hashes_exactly_the_package_files_it_runs():
  trainer_dir = os.path.dirname(config_lib.TRAINER_MODULE_FILE)
  executor = os.path.join(trainer_dir, 'executor.py')

  def names(files):
    return sorted(os.path.relpath(f, REPO) for f in files)

  assert names(code_fingerprint.source_files(
      [config_lib.TRAINER_MODULE_FILE, executor])) == [
          'components/__init__.py', 'components/trainer/__init__.py',
          'components/trainer/callbacks.py', 'components/trainer/executor.py',
          'components/trainer/export.py',
          'components/trainer/input_pipeline.py', 'components/trainer/spec.py',
          'components/trainer/trainer_module.py', 'tfx_autostrategy/__init__.py',
          'tfx_autostrategy/conventions.py',
          'tfx_autostrategy/distribute/__init__.py',
          'tfx_autostrategy/distribute/cluster.py',
          'tfx_autostrategy/distribute/devices.py',
          'tfx_autostrategy/distribute/distribution_plan.py',
          'tfx_autostrategy/distribute/rehearsal.py',
          'tfx_autostrategy/distribute/strategies.py',
          'tfx_autostrategy/modeling/__init__.py',
          'tfx_autostrategy/modeling/embedding_training.py',
          'tfx_autostrategy/modeling/hf_checkpoint.py',
          'tfx_autostrategy/modeling/hub_encoder.py',
          'tfx_autostrategy/modeling/models.py',
          'tfx_autostrategy/modeling/pretrained_dir.py',
          'tfx_autostrategy/settings.py']
  assert names(code_fingerprint.source_files(
      [config_lib.TRANSFORM_MODULE_FILE])) == [
          'components/__init__.py', 'components/transform/__init__.py',
          'components/transform/preprocessing.py',
          'components/transform/pretrained_tokens.py',
          'tfx_autostrategy/__init__.py',
          'tfx_autostrategy/modeling/__init__.py',
          'tfx_autostrategy/modeling/pretrained_dir.py',
          'tfx_autostrategy/settings.py']


def test_model_edits_rerun_the_trainer_preprocessing_edits_rerun_both(
    tmp_path):
  package = package_copy(tmp_path / 'code')
  data = tmp_path / 'data'
  subprocess.run([sys.executable, '-m', 'tfx_autostrategy.sample_data',
                  '--rows', '300', '--seed', '3', '--output', str(data)],
                 check=True)
  output = tmp_path / 'out'
  env = dict(os.environ, PYTHONPATH=str(tmp_path / 'code'))

  def run():
    proc = subprocess.run(
        [sys.executable, '-c', RUN_SCRIPT, str(data), str(output),
         str(tmp_path / 'code')],
        capture_output=True, text=True, timeout=900, env=env, check=False,
        cwd=str(tmp_path))  # not the repository root: '' leads sys.path
    assert proc.returncode == 0, proc.stderr[-3000:]
    states = json.loads(proc.stdout.strip().splitlines()[-1])
    return states['Transform'], states['AutoStrategyTrainer']

  assert run() == ('COMPLETE', 'COMPLETE')
  # Code neither component runs: the CLI and the Kubeflow compiler.
  append(package / 'cli' / 'run_command.py', '\n# an edit to the CLI\n')
  append(package / 'kubeflow' / 'compiler.py', '\n# an edit to compile\n')
  assert run() == ('CACHED', 'CACHED')
  # The model lives outside the Trainer's module-file directory.
  append(package / 'modeling' / 'models.py', '\n# an edit to the model\n')
  assert run() == ('CACHED', 'COMPLETE')
  append(package / 'components' / 'transform' / 'preprocessing.py',
         '\n# an edit to the preprocessing\n')
  assert run() == ('COMPLETE', 'COMPLETE')
  # Settings are read by both.
  append(package / 'settings.py', '\n# an edit to settings\n')
  assert run() == ('COMPLETE', 'COMPLETE')
