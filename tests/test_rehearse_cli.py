"""`autostrategy rehearse` for every row of the accelerator matrix, for real.

Each row runs the real CLI in a fresh process: the Trainer's executor trains
under the strategy family that machine builds (logical CPU devices standing in
for its GPUs or TPU cores, local processes for its workers), backs up,
exports, and the exported model serves raw text. The Transform output comes
from the session's one pipeline run (its MLMD store is copied, so the
rehearsals find it and no pipeline is re-run).
"""

import json
import os
import shutil

import pytest

from conftest import run_cli


@pytest.fixture(scope='module')
def rehearse_output(pipeline_run, tmp_path_factory):
  """An output directory whose MLMD store lists the session run's Transform."""
  _, _, run_output = pipeline_run
  output = tmp_path_factory.mktemp('rehearse') / 'out'
  output.mkdir()
  shutil.copy(os.path.join(run_output, 'metadata.sqlite'),
              output / 'metadata.sqlite')
  return str(output)


def rehearse(output, *args):
  proc = run_cli('rehearse', '--output', output, '--json', *args,
                 timeout=900)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert 'transform output: reused from' in proc.stdout
  summary = json.loads(proc.stdout.strip().splitlines()[-1])
  assert summary['serves'] is True
  probabilities = summary['probabilities']
  assert len(probabilities) == 3
  assert all(0.0 <= p <= 1.0 for p in probabilities)
  assert os.path.exists(
      os.path.join(summary['exported_model'], 'saved_model.pb'))
  return summary


# (arguments, expected fields). One TPU row keeps every default (per-replica
# batch 32, steps_per_execution 32, two epochs of one execution each); the
# others are cut to a few steps to keep CI short.
ROWS = {
    'tpu-v3-8': (
        (), dict(strategy='TPUStrategy', num_replicas=8,
                 per_replica_batch_size=32, global_batch_size=256,
                 precision='mixed_bfloat16', steps_per_execution=32,
                 jit_compile=True, xla_in_fit=False, steps_trained=64,
                 backup_every_steps=256, workers=1)),
    'tpu-v5e-8': (
        ('--per-replica-batch-size', '8', '--steps', '16'),
        dict(strategy='TPUStrategy', num_replicas=8, per_replica_batch_size=8,
             global_batch_size=64, precision='mixed_bfloat16',
             steps_per_execution=32, jit_compile=True, steps_trained=16,
             workers=1)),
    'nvidia-t4': (
        ('--steps', '4'),
        dict(strategy='MirroredStrategy', num_replicas=1,
             per_replica_batch_size=32, global_batch_size=32,
             precision='mixed_float16', steps_per_execution=4,
             jit_compile=True, xla_in_fit=True, steps_trained=4,
             backup_every_steps=0, workers=1)),
    'nvidia-a100x4': (
        ('--steps', '4', '--per-replica-batch-size', '8'),
        dict(strategy='MirroredStrategy', num_replicas=4,
             per_replica_batch_size=8, global_batch_size=32,
             precision='mixed_float16', steps_per_execution=4,
             jit_compile=True, xla_in_fit=False, steps_trained=4,
             workers=1)),
    'cpu': (
        (), dict(strategy='DefaultStrategy', num_replicas=1,
                 global_batch_size=32, precision='float32',
                 steps_per_execution=1, jit_compile=False, steps_trained=2,
                 stand_ins=[], workers=1)),
    'nvidia-t4 --workers 2': (
        ('--workers', '2', '--steps', '4', '--per-replica-batch-size', '8'),
        dict(strategy='MultiWorkerMirroredStrategy', num_replicas=2,
             per_replica_batch_size=8, global_batch_size=16,
             precision='mixed_float16', steps_per_execution=4,
             jit_compile=True, xla_in_fit=False, steps_trained=4,
             workers=2)),
}


@pytest.mark.parametrize('row', list(ROWS))
def test_every_row_trains_exports_and_serves(rehearse_output, row):
  args, expected = ROWS[row]
  accelerator = row.split()[0]
  summary = rehearse(rehearse_output, '--accelerator', accelerator, *args)
  assert summary['accelerator'] == accelerator
  assert {key: summary[key] for key in expected} == expected
  if summary['kind'] == 'tpu':
    # The TPU tiling rule: a multiple of 8 examples per core.
    assert summary['global_batch_size'] % (8 * summary['num_replicas']) == 0
    assert (f'TPUStrategy over 8 TPU cores -> MirroredStrategy over 8 '
            'logical CPU devices') in summary['stand_ins']
  if summary['kind'] == 'gpu':
    assert any(note.startswith('device discovery: ')
               for note in summary['stand_ins'])
  if summary['workers'] == 2:
    assert ('2 Vertex AI machines -> 2 local processes with the CLUSTER_SPEC '
            'Vertex AI writes, on localhost ports') in summary['stand_ins']
    run_dir = os.path.dirname(os.path.dirname(summary['exported_model']))
    # Each process joined the cluster in its own role and finished.
    for index, role in enumerate(('chief:0', 'worker:0')):
      log = open(os.path.join(run_dir, f'worker-{index}.log')).read()
      assert 'Joining the 2-worker cluster' in log and f' as {role};' in log
      result = json.load(open(os.path.join(run_dir, f'result-{index}.json')))
      assert 'error' not in result


@pytest.mark.parametrize('args, message', [
    (('--accelerator', 'nvidia-h100'),
     'error: unknown accelerator \'nvidia-h100\'; valid values: cpu, '),
    (('--accelerator', 'tpu-v3-8', '--workers', '2'),
     'error: tpu-v3-8 is one TPU slice: --workers must be 1, got 2'),
    (('--accelerator', 'cpu', '--steps', '-1'),
     'error: --steps must be >= 0, got -1'),
    (('--accelerator', 'nvidia-a100x4', '--workers', '2'),
     'error: cannot rehearse 2 x nvidia-a100x4 here: '),
])
def test_bad_options_exit_2_naming_the_cause(tmp_path, args, message):
  proc = run_cli('rehearse', '--output', str(tmp_path / 'out'), *args,
                 timeout=300)
  assert proc.returncode == 2, proc.stdout + proc.stderr
  assert proc.stderr.strip().splitlines()[-1].startswith(message), proc.stderr
  assert not (tmp_path / 'out').exists()
