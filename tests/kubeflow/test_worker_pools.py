"""The accelerator -> worker pool table (pure Python, no TFX import)."""

import os

import pytest

from tfx_autostrategy.kubeflow import worker_pools

# The values the issue asks for, at least.
REQUIRED = ('cpu', 'nvidia-t4', 'nvidia-l4', 'nvidia-a100', 'nvidia-a100x4',
            'tpu-v2-8', 'tpu-v3-8', 'tpu-v5e-8')


def test_table_has_the_required_values():
  assert set(REQUIRED) <= set(worker_pools.ACCELERATORS)


@pytest.mark.parametrize('name', worker_pools.ACCELERATORS)
def test_every_row_is_consistent(name):
  pool = worker_pools.worker_pool(name)
  assert pool.name == name
  assert pool.kind in (worker_pools.CPU, worker_pools.GPU, worker_pools.TPU)
  assert pool.machine_type and pool.vcpus > 0 and pool.memory_gb > 0
  if pool.kind == worker_pools.CPU:
    assert not pool.accelerator_type and pool.accelerator_count == 0
  else:
    assert pool.accelerator_type and pool.accelerator_count >= 1
  if name.startswith('nvidia-'):
    # 'xN' in the name is the GPU count; no suffix means one.
    model = name.rsplit('-', 1)[1]  # 't4', 'a100x4'
    count = int(model.split('x')[1]) if 'x' in model else 1
    assert pool.accelerator_count == count
  if pool.kind == worker_pools.TPU:
    assert pool.tpu_chips >= 1 and not pool.multi_worker


def test_unknown_accelerator_lists_the_valid_values():
  with pytest.raises(worker_pools.UnknownAcceleratorError) as error:
    worker_pools.worker_pool('nvidia-h100')
  message = str(error.value)
  assert "unknown accelerator 'nvidia-h100'" in message
  for name in worker_pools.ACCELERATORS:
    assert name in message


def test_single_tpu_pool_spec():
  specs = worker_pools.vertex_worker_pool_specs(
      worker_pools.worker_pool('tpu-v3-8'), 'gcr.io/p/image:1')
  assert specs == [{
      'machine_spec': {'machine_type': 'cloud-tpu',
                       'accelerator_type': 'TPU_V3',
                       'accelerator_count': 8},
      'replica_count': 1,
      'container_spec': {'image_uri': 'gcr.io/p/image:1'},
  }]


def test_tpu_v5e_pool_names_its_topology():
  [spec] = worker_pools.vertex_worker_pool_specs(
      worker_pools.worker_pool('tpu-v5e-8'), 'img')
  assert spec['machine_spec'] == {
      'machine_type': 'ct5lp-hightpu-8t', 'accelerator_type': 'TPU_V5_LITEPOD',
      'accelerator_count': 8, 'tpu_topology': '2x4'}


def test_multi_worker_gpu_pools_are_chief_plus_workers():
  specs = worker_pools.vertex_worker_pool_specs(
      worker_pools.worker_pool('nvidia-a100x4'), 'img', workers=3)
  machine = {'machine_type': 'a2-highgpu-4g',
             'accelerator_type': 'NVIDIA_TESLA_A100', 'accelerator_count': 4}
  assert specs == [
      {'machine_spec': machine, 'replica_count': 1,
       'container_spec': {'image_uri': 'img'}},
      {'machine_spec': machine, 'replica_count': 2,
       'container_spec': {'image_uri': 'img'}},
  ]


def test_cpu_pool_has_no_accelerator():
  [spec] = worker_pools.vertex_worker_pool_specs(
      worker_pools.worker_pool('cpu'), 'img')
  assert spec['machine_spec'] == {'machine_type': 'n1-standard-8'}


@pytest.mark.parametrize('name,workers,match', [
    ('tpu-v3-8', 2, 'one TPU slice: --workers must be 1'),
    ('nvidia-t4', 0, '--workers must be >= 1'),
])
def test_impossible_worker_counts(name, workers, match):
  with pytest.raises(ValueError, match=match):
    worker_pools.vertex_worker_pool_specs(
        worker_pools.worker_pool(name), 'img', workers=workers)


@pytest.mark.parametrize('name,expected', [
    ('cpu', {'cpu_request': 4.0, 'memory_request': 15.0}),
    ('nvidia-t4x2', {'cpu_request': 8.0, 'memory_request': 30.0,
                     'accelerator': {'type': 'nvidia.com/gpu', 'count': 2}}),
    # Kubernetes counts TPU chips: a v3-8 has 4 chips of 2 cores.
    ('tpu-v3-8', {'cpu_request': 48.0, 'memory_request': 167.5,
                  'accelerator': {'type': 'google.com/tpu', 'count': 4}}),
    ('tpu-v5e-8', {'cpu_request': 112.0, 'memory_request': 192.0,
                   'accelerator': {'type': 'google.com/tpu', 'count': 8}}),
])
def test_kubeflow_resources(name, expected):
  assert worker_pools.kubeflow_resources(
      worker_pools.worker_pool(name)) == expected


def test_readme_table_names_every_value():
  readme = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__)))), 'kubeflow', 'README.md')
  with open(readme) as f:
    text = f.read()
  for name in worker_pools.ACCELERATORS:
    assert f'`{name}`' in text, name
