"""The accelerator -> worker pool table (pure Python, no TFX import)."""

import os

import pytest

from tfx_autostrategy.kubeflow import worker_pools

# The values the issue asks for, at least.
REQUIRED = ('cpu', 'nvidia-t4', 'nvidia-l4', 'nvidia-a100', 'nvidia-a100x4',
            'tpu-v2-8', 'tpu-v3-8', 'tpu-v5e-8',
            # Issue 34: today's shapes.
            'nvidia-h100', 'nvidia-h100x2', 'nvidia-h100x4', 'nvidia-h100x8',
            'nvidia-h200x8', 'nvidia-a100-80gb', 'nvidia-a100-80gbx8',
            'tpu-v5e-1', 'tpu-v5e-4', 'tpu-v5e-16', 'tpu-v5p-8', 'tpu-v6e-1',
            'tpu-v6e-4', 'tpu-v6e-8')


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
  elif pool.kind == worker_pools.GPU:
    assert pool.accelerator_type and pool.accelerator_count >= 1
  else:
    # A TPU without a Vertex AI enum is refused there, and GKE has it.
    assert pool.accelerator_type or (worker_pools.vertex_refusal(pool) and
                                     pool.gke_accelerator)
    assert pool.accelerator_count >= 1
  if name.startswith('nvidia-'):
    # 'xN' in the name is the GPU count; no suffix means one.
    model = name.rsplit('-', 1)[1]  # 't4', 'a100x4'
    count = int(model.split('x')[1]) if 'x' in model else 1
    assert pool.accelerator_count == count
  if pool.kind == worker_pools.TPU:
    assert pool.tpu_chips >= 1 and not pool.multi_worker


def test_unknown_accelerator_lists_the_valid_values():
  with pytest.raises(worker_pools.UnknownAcceleratorError) as error:
    worker_pools.worker_pool('nvidia-b200')
  message = str(error.value)
  assert "unknown machine 'nvidia-b200'" in message
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


# Issue 34's rows, spelled out from the Vertex AI / Compute Engine / GKE / Cloud
# TPU pages cited beside them in worker_pools.py: machine type, accelerator
# enum and count, topology, chips per host, hosts, vCPUs, memory (GB),
# compute capability, TPU runtime, GKE label, replicas per host.
NEW_ROWS = {
    'nvidia-h100': ('a3-highgpu-1g', 'NVIDIA_H100_80GB', 1, '', 0, 1, 26, 234,
                    (9, 0), '', 'nvidia-h100-80gb', 1),
    'nvidia-h100x2': ('a3-highgpu-2g', 'NVIDIA_H100_80GB', 2, '', 0, 1, 52,
                      468, (9, 0), '', 'nvidia-h100-80gb', 2),
    'nvidia-h100x4': ('a3-highgpu-4g', 'NVIDIA_H100_80GB', 4, '', 0, 1, 104,
                      936, (9, 0), '', 'nvidia-h100-80gb', 4),
    'nvidia-h100x8': ('a3-highgpu-8g', 'NVIDIA_H100_80GB', 8, '', 0, 1, 208,
                      1872, (9, 0), '', 'nvidia-h100-80gb', 8),
    'nvidia-h200x8': ('a3-ultragpu-8g', 'NVIDIA_H200_141GB', 8, '', 0, 1, 224,
                      2952, (9, 0), '', 'nvidia-h200-141gb', 8),
    'nvidia-a100-80gb': ('a2-ultragpu-1g', 'NVIDIA_A100_80GB', 1, '', 0, 1, 12,
                         170, (8, 0), '', 'nvidia-a100-80gb', 1),
    'nvidia-a100-80gbx2': ('a2-ultragpu-2g', 'NVIDIA_A100_80GB', 2, '', 0, 1,
                           24, 340, (8, 0), '', 'nvidia-a100-80gb', 2),
    'nvidia-a100-80gbx4': ('a2-ultragpu-4g', 'NVIDIA_A100_80GB', 4, '', 0, 1,
                           48, 680, (8, 0), '', 'nvidia-a100-80gb', 4),
    'nvidia-a100-80gbx8': ('a2-ultragpu-8g', 'NVIDIA_A100_80GB', 8, '', 0, 1,
                           96, 1360, (8, 0), '', 'nvidia-a100-80gb', 8),
    'tpu-v5e-1': ('ct5lp-hightpu-1t', 'TPU_V5_LITEPOD', 1, '1x1', 1, 1, 24, 48,
                  None, 'tpu-vm-tf-2.16.1-pjrt', 'tpu-v5-lite-podslice', 1),
    'tpu-v5e-4': ('ct5lp-hightpu-4t', 'TPU_V5_LITEPOD', 4, '2x2', 4, 1, 112,
                  192, None, 'tpu-vm-tf-2.16.1-pjrt', 'tpu-v5-lite-podslice',
                  4),
    'tpu-v5e-16': ('ct5lp-hightpu-4t', 'TPU_V5_LITEPOD', 4, '4x4', 4, 4, 112,
                   192, None, 'tpu-vm-tf-2.16.1-pod-pjrt',
                   'tpu-v5-lite-podslice', 4),
    # v5p-8 names 8 TensorCores: 4 chips, one megacore device each.
    'tpu-v5p-8': ('ct5p-hightpu-4t', '', 4, '2x2x1', 4, 1, 208, 448, None,
                  'tpu-vm-tf-2.16.1-pjrt', 'tpu-v5p-slice', 4),
    'tpu-v6e-1': ('ct6e-standard-1t', '', 1, '1x1', 1, 1, 44, 176, None,
                  'tpu-vm-tf-2.18.0-pjrt', 'tpu-v6e-slice', 1),
    'tpu-v6e-4': ('ct6e-standard-4t', '', 4, '2x2', 4, 1, 180, 720, None,
                  'tpu-vm-tf-2.18.0-pjrt', 'tpu-v6e-slice', 4),
    'tpu-v6e-8': ('ct6e-standard-8t', '', 8, '2x4', 8, 1, 180, 1440, None,
                  'tpu-vm-tf-2.18.0-pjrt', 'tpu-v6e-slice', 8),
    # v2/v3: two TensorCores per chip, each a TF device.
    'tpu-v3-8': ('cloud-tpu', 'TPU_V3', 8, '', 4, 1, 96, 335, None,
                 'tpu-vm-tf-2.16.1-pjrt', '', 8),
}


@pytest.mark.parametrize('name', sorted(NEW_ROWS))
def test_new_rows_literally(name):
  pool = worker_pools.worker_pool(name)
  assert (pool.machine_type, pool.accelerator_type, pool.accelerator_count,
          pool.tpu_topology, pool.tpu_chips, pool.hosts, pool.vcpus,
          pool.memory_gb, pool.compute_capability, pool.tpu_runtime,
          pool.gke_accelerator, pool.replicas_per_host) == NEW_ROWS[name]


@pytest.mark.parametrize('name', ['tpu-v5p-8', 'tpu-v6e-1', 'tpu-v6e-4',
                                  'tpu-v6e-8'])
def test_tpus_vertex_ai_does_not_run_are_refused_there(name):
  pool = worker_pools.worker_pool(name)
  generation = name.split('-')[1]
  label = {'v5p': 'tpu-v5p-slice', 'v6e': 'tpu-v6e-slice'}[generation]
  expected = (
      f'{name}: Vertex AI custom training has no TPU {generation} (its '
      'AcceleratorType offers TPU_V2, TPU_V3, TPU_V4_POD and TPU_V5_LITEPOD '
      f'only): use --target kubeflow on a GKE cluster with {label} node '
      'pools, or a Vertex AI TPU (tpu-v2-8, tpu-v3-8, tpu-v5e-1, tpu-v5e-4, '
      'tpu-v5e-8, tpu-v5e-16)')
  with pytest.raises(ValueError) as error:
    worker_pools.vertex_worker_pool_specs(pool, 'img')
  assert str(error.value) == expected
  # GKE has them.
  assert worker_pools.kubernetes_node_selection(pool)['nodeSelector'] == {
      'labels': {'cloud.google.com/gke-tpu-accelerator': label,
                 'cloud.google.com/gke-tpu-topology': NEW_ROWS[name][3]}}


def test_multi_host_slice_is_one_vertex_pool_with_the_slice_topology():
  assert worker_pools.vertex_worker_pool_specs(
      worker_pools.worker_pool('tpu-v5e-16'), 'img') == [{
          'machine_spec': {'machine_type': 'ct5lp-hightpu-4t',
                           'accelerator_type': 'TPU_V5_LITEPOD',
                           'accelerator_count': 4, 'tpu_topology': '4x4'},
          'replica_count': 1,
          'container_spec': {'image_uri': 'img'}}]


def test_multi_host_slice_on_gke_is_refused_naming_jobset():
  pool = worker_pools.worker_pool('tpu-v5e-16')
  assert worker_pools.gke_multi_host_slice(pool) == {
      'pods': 4,
      'nodeSelector': {
          'cloud.google.com/gke-tpu-accelerator': 'tpu-v5-lite-podslice',
          'cloud.google.com/gke-tpu-topology': '4x4'},
      'limits': {'google.com/tpu': 4}}
  with pytest.raises(ValueError) as error:
    worker_pools.kubernetes_node_selection(pool)
  assert str(error.value) == (
      'tpu-v5e-16 is a multi-host TPU slice (4 hosts of 4 chips, topology '
      '4x4): GKE runs it as 4 pods scheduled together, one per host, each '
      "requesting google.com/tpu: 4 with node selector {'cloud.google.com/"
      "gke-tpu-accelerator': 'tpu-v5-lite-podslice', 'cloud.google.com/"
      "gke-tpu-topology': '4x4'}, but a Kubeflow pipeline step is one pod. "
      'Install JobSet (jobset.x-k8s.io) or LeaderWorkerSet '
      '(leaderworkerset.x-k8s.io) and run the Trainer as one of those, use '
      "--target vertex (which provisions the slice's hosts itself), or a "
      'single-host shape')


def test_multi_host_slice_is_one_worker():
  with pytest.raises(ValueError) as error:
    worker_pools.check_workers(worker_pools.worker_pool('tpu-v5e-16'), 4)
  assert str(error.value) == (
      'tpu-v5e-16 is one TPU slice of 4 hosts, which the row already counts: '
      '--workers must be 1, got 4')


@pytest.mark.parametrize('name,expected', [
    ('nvidia-h100x8', {'cpu_request': 104.0, 'memory_request': 936.0,
                       'accelerator': {'type': 'nvidia.com/gpu', 'count': 8}}),
    ('nvidia-a100-80gb', {'cpu_request': 6.0, 'memory_request': 85.0,
                          'accelerator': {'type': 'nvidia.com/gpu',
                                          'count': 1}}),
    # Kubernetes counts chips: a v5p-8 host has 4.
    ('tpu-v5p-8', {'cpu_request': 104.0, 'memory_request': 224.0,
                   'accelerator': {'type': 'google.com/tpu', 'count': 4}}),
    ('tpu-v6e-8', {'cpu_request': 90.0, 'memory_request': 720.0,
                   'accelerator': {'type': 'google.com/tpu', 'count': 8}}),
])
def test_kubeflow_resources_of_new_rows(name, expected):
  assert worker_pools.kubeflow_resources(
      worker_pools.worker_pool(name)) == expected
