"""`autostrategy compile` through the real entry point, in a fresh process."""

import json

from conftest import run_cli

ARGS = ('compile', '--pipeline-root', 'gs://bucket/root', '--image',
        'gcr.io/proj/autostrategy:1', '--data', 'gs://bucket/data',
        '--project', 'proj', '--region', 'us-central1',
        # gs://bucket is not readable here: auto lengths would need it.
        '--sequence-length', '64', '--char-ngram-length', '512')


def test_compiles_vertex_tpu_pipeline(tmp_path):
  output = tmp_path / 'pipeline.json'
  proc = run_cli(*ARGS, '--target', 'vertex', '--machine', 'tpu-v3-8',
                 '--output', str(output), timeout=600)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  assert f'wrote {output}' in proc.stdout
  spec = json.loads(output.read_text())['pipelineSpec']
  assert spec['schemaVersion'] == '2.1.0'
  custom_config = json.loads(
      spec['root']['dag']['tasks']['AutoStrategyTrainer']['inputs'][
          'parameters']['custom_config']['runtimeValue']['constant'])
  [pool] = custom_config['ai_platform_training_args']['job_spec'][
      'worker_pool_specs']
  assert pool['machine_spec'] == {'machine_type': 'cloud-tpu',
                                  'accelerator_type': 'TPU_V3',
                                  'accelerator_count': 8}


def test_unknown_machine_is_bad_input(tmp_path):
  output = tmp_path / 'pipeline.json'
  # (nvidia-h100 was the unknown name here until issue 34 added it.)
  proc = run_cli(*ARGS, '--target', 'vertex', '--machine', 'nvidia-b200',
                 '--output', str(output), timeout=600)
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "unknown machine 'nvidia-b200'; valid values: cpu, " in proc.stderr
  assert 'tpu-v3-8' in proc.stderr and 'nvidia-a100x4' in proc.stderr
  assert 'nvidia-h100' in proc.stderr and 'tpu-v6e-4' in proc.stderr
  assert not output.exists()


def test_the_old_machine_spelling_names_the_new_one(tmp_path):
  # compile and rehearse take a machine shape (--machine); --accelerator is
  # the accelerator family of run and detect, so there it is refused.
  output = tmp_path / 'pipeline.json'
  for args in ((*ARGS, '--target', 'vertex', '--output', str(output)),
               ('rehearse', '--output', str(tmp_path / 'rehearse'))):
    proc = run_cli(*args, '--accelerator', 'tpu-v3-8', timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].endswith(
        'error: --accelerator tpu-v3-8: the machine shape is --machine '
        'tpu-v3-8 (--accelerator is the accelerator family of run and '
        'detect: auto, cpu, gpu, tpu)'), proc.stderr
  assert not output.exists() and not (tmp_path / 'rehearse').exists()
