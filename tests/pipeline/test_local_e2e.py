"""The whole pipeline, for real: CLI → LocalDagRunner → SQLite MLMD → Beam.

One first run through the `autostrategy` CLI in a subprocess; the tests after
it read its outputs and rerun it. Which code edits invalidate which caches is
tests/pipeline/test_code_cache.py.
"""

import json
import os

import pytest

from conftest import PIPELINE_RUN_ARGS
from conftest import PIPELINE_RUN_AUC_THRESHOLD
from conftest import PIPELINE_RUN_PER_REPLICA_BATCH
from conftest import PIPELINE_RUN_REPLICAS
from conftest import assert_serves_raw_text
from conftest import run_cli

from tfx_autostrategy.pipeline import local_runner
from tfx_autostrategy.pipeline import pipeline as pipeline_lib
from tfx_autostrategy.pipeline import run_result
from tfx_autostrategy.preflight import csv_check
from tfx_autostrategy import settings as settings_lib

pytestmark = pytest.mark.e2e



def executions_by_component(config):
  return {c.component: c.state
          for c in run_result.read_result(config).components}


def config_for(data, output_dir, **overrides):
  """The PipelineConfig that the CLI builds for `PIPELINE_RUN_ARGS`."""
  return local_runner.build_config(
      data, output_dir, settings_lib.TextSettings(),
      settings_lib.TrainerSettings(
          epochs=2, per_replica_batch_size=PIPELINE_RUN_PER_REPLICA_BATCH),
      csv_check.check_csv_dir(data), auc_threshold=PIPELINE_RUN_AUC_THRESHOLD,
      **overrides)


def test_run_pushes_a_blessed_model_and_ends_with_json(pipeline_run):
  proc, result, output = pipeline_run

  def reject(constant):
    raise AssertionError(f'{constant} is not JSON')
  # Strict JSON: undefined metrics are null, never NaN.
  json.loads(proc.stdout.strip().splitlines()[-1], parse_constant=reject)
  summary = json.load(open(os.path.join(output, 'summary.json')),
                      parse_constant=reject)
  # The defaults are --sequence-length auto and --char-ngram-length auto:
  # picked from the data in the preflight, said on one line, recorded.
  assert ('lengths: --sequence-length auto -> 40 words (95th percentile 33; '
          'truncates 2.1 % of 1,200 texts), --char-ngram-length auto -> 416 '
          'n-grams (95th percentile 412; truncates 4.8 %)\n') in proc.stdout
  assert result['text_lengths'] == {'sequence_length': 40,
                                    'char_ngram_length': 416}
  assert summary['text_lengths']['char_ngram_length'] == {
      'length': 416, 'auto': True, 'percentile': 412, 'capped_at': 0,
      'texts': 1200, 'truncated_share': 0.0483}
  assert result['blessed'] is True
  assert result['pushed_model'].startswith(os.path.join(output, 'serving_model'))
  assert os.path.exists(os.path.join(result['pushed_model'], 'saved_model.pb'))
  assert PIPELINE_RUN_AUC_THRESHOLD <= result['metrics']['auc'] <= 1.0
  assert 0.0 <= result['metrics']['binary_accuracy'] <= 1.0
  assert result['metrics']['example_count'] > 50
  assert any(name.startswith('lang=') for name in result['slices'])
  # One line as each component starts and one as it finishes.
  for component in pipeline_lib.COMPONENT_IDS:
    assert f'  {component:<20} ...' in proc.stdout
    assert f'  {component:<20} done in ' in proc.stdout
  # The full TFX/Beam logs went to the file, not to the terminal.
  log_path = os.path.join(output, 'logs', 'pipeline.log')
  assert 'Component Transform is running.' in open(log_path).read()
  assert 'Component Transform is running.' not in proc.stdout + proc.stderr


def test_trainer_ran_under_four_replica_mirrored_strategy(pipeline_run):
  _, _, output = pipeline_run
  log = open(os.path.join(output, 'logs', 'pipeline.log')).read()
  plans = [json.loads(line.split('autostrategy: ', 1)[1])
           for line in log.splitlines()
           if 'autostrategy: {' in line and 'global_batch_size' in line]
  assert plans, 'the Trainer did not log its distribution plan'
  plan = plans[-1]
  assert plan['strategy'] == 'MirroredStrategy'
  assert plan['num_replicas'] == PIPELINE_RUN_REPLICAS
  assert plan['global_batch_size'] == (PIPELINE_RUN_REPLICAS *
                                       PIPELINE_RUN_PER_REPLICA_BATCH)
  assert len(plan['devices']) == PIPELINE_RUN_REPLICAS


def test_detect_reports_the_plan_as_json():
  proc = run_cli('detect', '--json', '--cpu-replicas', '2',
                 '--per-replica-batch-size', '24', timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  plan = json.loads(proc.stdout.strip().splitlines()[-1])
  assert {'accelerator', 'strategy', 'num_replicas', 'per_replica_batch_size',
          'global_batch_size', 'precision', 'steps_per_execution',
          'is_chief'} <= set(plan)
  assert plan['accelerator'] == 'cpu'
  assert plan['strategy'] == 'MirroredStrategy'
  assert plan['num_replicas'] == 2
  assert plan['global_batch_size'] == 48
  assert plan['precision'] == 'float32'
  assert plan['steps_per_execution'] == 1
  assert plan['is_chief'] is True
  human = run_cli('detect', timeout=300)
  assert human.returncode == 0
  lines = human.stdout.splitlines()
  for line in ('accelerator:         cpu', 'strategy:            DefaultStrategy',
               'replicas:            1', 'global batch:        32',
               'precision:           float32', 'chief:               yes'):
    assert line in lines, (line, lines)
  missing = run_cli('detect', '--accelerator', 'tpu', timeout=300)
  assert missing.returncode == 2
  last = missing.stderr.strip().splitlines()[-1]
  assert last.startswith("error: accelerator='tpu' was requested but no TPU "
                         'was found: '), last
  assert "devices found: ['/device:CPU:0']" in last, last


def test_detect_takes_the_xla_and_backup_settings():
  proc = run_cli('detect', '--json', '--jit-compile', 'on',
                 '--backup-every-steps', '50', timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  plan = json.loads(proc.stdout.strip().splitlines()[-1])
  assert (plan['accelerator'], plan['jit_compile'],
          plan['backup_every_steps']) == ('cpu', True, 50)
  bad = run_cli('detect', '--backup-every-steps', '-5', timeout=300)
  assert bad.returncode == 2
  assert bad.stderr.strip().splitlines()[-1] == (
      'error: backup_every_steps must be >= 0 (or -1 for the device '
      'default), got -5')


def test_mlmd_records_one_complete_execution_per_component(pipeline_run,
                                                          pipeline_data):
  _, _, output = pipeline_run
  data = pipeline_data
  states = executions_by_component(config_for(data, output))
  assert sorted(states) == sorted(pipeline_lib.COMPONENT_IDS)
  assert set(states.values()) == {'COMPLETE'}


def test_pushed_model_serves_raw_text_in_a_fresh_process(pipeline_run):
  _, result, _ = pipeline_run
  assert_serves_raw_text(result['pushed_model'])


def test_second_identical_run_reuses_all_up_to_the_evaluator(pipeline_run,
                                                              pipeline_data):
  _, result, output = pipeline_run
  proc = run_cli('run', '--data', pipeline_data, '--output', output,
                 *PIPELINE_RUN_ARGS)
  assert proc.returncode == 0, proc.stderr[-3000:]
  again = json.loads(proc.stdout.strip().splitlines()[-1])
  states = executions_by_component(config_for(pipeline_data, output))
  assert sorted(states) == sorted(pipeline_lib.COMPONENT_IDS)
  upstream = pipeline_lib.COMPONENT_IDS[:pipeline_lib.COMPONENT_IDS.index(
      pipeline_lib.TRAINER) + 1]
  assert {states[c] for c in upstream} == {'CACHED'}
  # The first run's model is now the serving one, so the Evaluator has a
  # baseline it lacked before and runs again: the cached model against
  # itself, gain 0, blessed (TFX's Pusher then pushes it as a new version).
  assert states[pipeline_lib.EVALUATOR] == 'COMPLETE'
  assert again['baseline_metrics']['auc'] == pytest.approx(
      result['metrics']['auc'], abs=1e-6)
  assert again['metrics']['auc'] == pytest.approx(result['metrics']['auc'],
                                                  abs=1e-6)
  assert again['blessed'] is True
