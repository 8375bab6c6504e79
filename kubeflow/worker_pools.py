"""What each `--accelerator` value means: the one table of Trainer machines.

Every value names one machine shape, used two ways:

- on Vertex AI, the worker pools of the custom job the Trainer runs as
  (`vertex_worker_pool_specs`, the `CustomJobSpec.worker_pool_specs` dicts);
- on plain Kubeflow Pipelines, the resource request of the Trainer's own
  container (`kubeflow_resources`, turned into a KFP `ResourceSpec` by the
  compiler) and the GKE node it must land on (`kubernetes_node_selection`,
  the Kubernetes platform section of the compiled package).

Pure Python with no TFX import, so the CLI rejects a bad value at once.
"""

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

# What the Trainer must find on the machine (TrainerSettings.accelerator):
# insisting on it makes a mis-provisioned job fail at once instead of training
# on the host CPU.
CPU = 'cpu'
GPU = 'gpu'
TPU = 'tpu'

# Kubernetes extended-resource names that device plugins advertise; the KFP
# backend turns a ResourceSpec accelerator type into a container limit of that
# name verbatim.
_K8S_ACCELERATOR_RESOURCE = {GPU: 'nvidia.com/gpu', TPU: 'google.com/tpu'}

# GKE node labels that name a node's accelerator: the scheduler only places a
# pod on a GPU or TPU node whose labels match its node selector.
GKE_ACCELERATOR_LABEL = 'cloud.google.com/gke-accelerator'
GKE_TPU_ACCELERATOR_LABEL = 'cloud.google.com/gke-tpu-accelerator'
GKE_TPU_TOPOLOGY_LABEL = 'cloud.google.com/gke-tpu-topology'


@dataclasses.dataclass(frozen=True)
class WorkerPool:
  """One Trainer machine shape.

  Attributes:
    name: the `--accelerator` value.
    kind: CPU, GPU or TPU (becomes TrainerSettings.accelerator).
    machine_type: Compute Engine / Vertex AI machine type.
    accelerator_type: Vertex AI `AcceleratorType` enum name ('' for none).
    accelerator_count: accelerators (GPUs, TPU cores or chips) per machine.
    tpu_topology: TPU slice topology, where Vertex AI asks for one.
    tpu_chips: TPU chips per machine (Kubernetes counts TPUs in chips; a v3-8
      has 4 chips of 2 cores).
    vcpus: vCPUs of the machine.
    memory_gb: memory of the machine in GB.
    multi_worker: whether several machines of this shape can train together
      (MultiWorkerMirroredStrategy); a TPU slice is one machine here.
    compute_capability: CUDA compute capability of the GPU (decides
      mixed_float16), None for CPUs and TPUs.
    tpu_type: accelerator type as the TPU VM runtime names it
      (TPU_ACCELERATOR_TYPE), '' for CPUs and GPUs.
    gke_accelerator: the GKE node label value of the accelerator
      (`cloud.google.com/gke-accelerator` for GPUs,
      `cloud.google.com/gke-tpu-accelerator` for TPUs); '' for CPUs and for
      TPUs that GKE has no node pools of.
  """
  name: str
  kind: str
  machine_type: str
  accelerator_type: str = ''
  accelerator_count: int = 0
  tpu_topology: str = ''
  tpu_chips: int = 0
  vcpus: int = 0
  memory_gb: int = 0
  multi_worker: bool = True
  compute_capability: Optional[Tuple[int, int]] = None
  tpu_type: str = ''
  gke_accelerator: str = ''


_POOLS: Tuple[WorkerPool, ...] = (
    WorkerPool('cpu', CPU, 'n1-standard-8', vcpus=8, memory_gb=30),
    WorkerPool('nvidia-t4', GPU, 'n1-standard-8', 'NVIDIA_TESLA_T4', 1,
               compute_capability=(7, 5), vcpus=8, memory_gb=30,
               gke_accelerator='nvidia-tesla-t4'),
    WorkerPool('nvidia-t4x2', GPU, 'n1-standard-16', 'NVIDIA_TESLA_T4', 2,
               compute_capability=(7, 5), vcpus=16, memory_gb=60,
               gke_accelerator='nvidia-tesla-t4'),
    WorkerPool('nvidia-t4x4', GPU, 'n1-standard-32', 'NVIDIA_TESLA_T4', 4,
               compute_capability=(7, 5), vcpus=32, memory_gb=120,
               gke_accelerator='nvidia-tesla-t4'),
    # G2 and A2 machine types come with their GPUs: the count follows the type.
    WorkerPool('nvidia-l4', GPU, 'g2-standard-8', 'NVIDIA_L4', 1,
               compute_capability=(8, 9), vcpus=8, memory_gb=32,
               gke_accelerator='nvidia-l4'),
    WorkerPool('nvidia-l4x2', GPU, 'g2-standard-24', 'NVIDIA_L4', 2,
               compute_capability=(8, 9), vcpus=24, memory_gb=96,
               gke_accelerator='nvidia-l4'),
    WorkerPool('nvidia-l4x4', GPU, 'g2-standard-48', 'NVIDIA_L4', 4,
               compute_capability=(8, 9), vcpus=48, memory_gb=192,
               gke_accelerator='nvidia-l4'),
    WorkerPool('nvidia-l4x8', GPU, 'g2-standard-96', 'NVIDIA_L4', 8,
               compute_capability=(8, 9), vcpus=96, memory_gb=384,
               gke_accelerator='nvidia-l4'),
    WorkerPool('nvidia-a100', GPU, 'a2-highgpu-1g', 'NVIDIA_TESLA_A100', 1,
               compute_capability=(8, 0), vcpus=12, memory_gb=85,
               gke_accelerator='nvidia-tesla-a100'),
    WorkerPool('nvidia-a100x2', GPU, 'a2-highgpu-2g', 'NVIDIA_TESLA_A100', 2,
               compute_capability=(8, 0), vcpus=24, memory_gb=170,
               gke_accelerator='nvidia-tesla-a100'),
    WorkerPool('nvidia-a100x4', GPU, 'a2-highgpu-4g', 'NVIDIA_TESLA_A100', 4,
               compute_capability=(8, 0), vcpus=48, memory_gb=340,
               gke_accelerator='nvidia-tesla-a100'),
    WorkerPool('nvidia-a100x8', GPU, 'a2-highgpu-8g', 'NVIDIA_TESLA_A100', 8,
               compute_capability=(8, 0), vcpus=96, memory_gb=680,
               gke_accelerator='nvidia-tesla-a100'),
    # Vertex AI runs v2/v3 as TPU VMs on the `cloud-tpu` machine type (8 cores);
    # v5e names its host type and needs the slice topology.
    WorkerPool('tpu-v2-8', TPU, 'cloud-tpu', 'TPU_V2', 8, tpu_chips=4,
               tpu_type='v2-8', vcpus=96, memory_gb=335, multi_worker=False),
    WorkerPool('tpu-v3-8', TPU, 'cloud-tpu', 'TPU_V3', 8, tpu_chips=4,
               tpu_type='v3-8', vcpus=96, memory_gb=335, multi_worker=False),
    WorkerPool('tpu-v5e-8', TPU, 'ct5lp-hightpu-8t', 'TPU_V5_LITEPOD', 8,
               tpu_topology='2x4', tpu_chips=8, tpu_type='v5litepod-8',
               vcpus=224, memory_gb=384, multi_worker=False,
               gke_accelerator='tpu-v5-lite-podslice'),
)

WORKER_POOLS: Dict[str, WorkerPool] = {pool.name: pool for pool in _POOLS}
ACCELERATORS: Tuple[str, ...] = tuple(WORKER_POOLS)


class UnknownAcceleratorError(ValueError):
  """An `--accelerator` value that is not in the table."""


def worker_pool(name: str) -> WorkerPool:
  """The worker pool of an `--accelerator` value.

  Raises:
    UnknownAcceleratorError: `name` is not in the table; the message lists the
      valid values.
  """
  try:
    return WORKER_POOLS[name]
  except KeyError:
    raise UnknownAcceleratorError(
        f'unknown accelerator {name!r}; valid values: '
        f'{", ".join(ACCELERATORS)}') from None


def check_workers(pool: WorkerPool, workers: int) -> None:
  """Raises ValueError unless `workers` machines of `pool` can train as one."""
  if workers < 1:
    raise ValueError(f'--workers must be >= 1, got {workers}')
  if workers > 1 and not pool.multi_worker:
    raise ValueError(
        f'{pool.name} is one TPU slice: --workers must be 1, got {workers}')


def _machine_spec(pool: WorkerPool) -> Dict[str, Any]:
  spec: Dict[str, Any] = {'machine_type': pool.machine_type}
  if pool.accelerator_type:
    spec['accelerator_type'] = pool.accelerator_type
    spec['accelerator_count'] = pool.accelerator_count
  if pool.tpu_topology:
    spec['tpu_topology'] = pool.tpu_topology
  return spec


def vertex_worker_pool_specs(pool: WorkerPool, image: str,
                             workers: int = 1) -> List[Dict[str, Any]]:
  """`CustomJobSpec.worker_pool_specs` for `workers` machines of `pool`.

  Vertex AI makes the first pool the chief (one replica) and the second the
  other workers, and writes TF_CONFIG accordingly, which is the cluster
  MultiWorkerMirroredStrategy reads. The container command is left out: the
  TFX training client sets it to run our executor.

  Args:
    pool: the machine shape.
    image: container image carrying this package.
    workers: machines in total (chief included).

  Returns:
    One pool spec (chief) or two (chief, workers), as JSON-able dicts.

  Raises:
    ValueError: `workers` is not possible for `pool`.
  """
  check_workers(pool, workers)

  def pool_spec(replicas: int) -> Dict[str, Any]:
    return {
        'machine_spec': _machine_spec(pool),
        'replica_count': replicas,
        'container_spec': {'image_uri': image},
    }

  specs = [pool_spec(1)]
  if workers > 1:
    specs.append(pool_spec(workers - 1))
  return specs


def kubernetes_node_selection(pool: WorkerPool) -> Dict[str, Any]:
  """Where the Trainer's pod must run on GKE, in kfp-kubernetes' format.

  A resource request alone does not place a pod on an accelerator node: GKE
  labels GPU and TPU nodes with their accelerator (and TPU slices with their
  topology) and taints them with the accelerator's resource name, so the pod
  needs a node selector on those labels and a toleration of that taint. (Many
  clusters add the toleration themselves for pods that request the resource;
  it is written anyway so that the package does not depend on that.)

  Returns:
    A `KubernetesExecutorConfig` as JSON (`nodeSelector`, `tolerations`), the
    value KFP's Kubernetes platform spec holds per executor; empty for CPUs.

  Raises:
    ValueError: a TPU that GKE has no node pools of (v2, v3).
  """
  if pool.kind == CPU:
    return {}
  if not pool.gke_accelerator:
    raise ValueError(
        f'{pool.name} has no GKE node pools (GKE offers TPU v4 and later), so '
        'a Kubeflow pipeline step cannot get one: use --target vertex, or '
        '--accelerator tpu-v5e-8')
  if pool.kind == TPU:
    labels = {GKE_TPU_ACCELERATOR_LABEL: pool.gke_accelerator,
              GKE_TPU_TOPOLOGY_LABEL: pool.tpu_topology}
  else:
    labels = {GKE_ACCELERATOR_LABEL: pool.gke_accelerator}
  return {
      'nodeSelector': {'labels': labels},
      'tolerations': [{'key': _K8S_ACCELERATOR_RESOURCE[pool.kind],
                       'operator': 'Exists', 'effect': 'NoSchedule'}],
  }


def kubeflow_resources(pool: WorkerPool) -> Dict[str, Any]:
  """The Trainer container's request on plain Kubeflow Pipelines.

  The accelerator is requested by its Kubernetes resource name. CPU and memory
  requests are half the machine's, so that the pod still fits on a node of
  that shape after the system's and the daemons' reservations.

  Returns:
    Keyword arguments of KFP's `ResourceSpec`: `cpu_request`,
    `memory_request` (GB) and, for GPUs and TPUs, `accelerator`
    (`{'type': ..., 'count': ...}`).
  """
  resources: Dict[str, Any] = {
      'cpu_request': pool.vcpus / 2,
      'memory_request': pool.memory_gb / 2,
  }
  if pool.kind in _K8S_ACCELERATOR_RESOURCE:
    resources['accelerator'] = {
        'type': _K8S_ACCELERATOR_RESOURCE[pool.kind],
        'count': pool.tpu_chips if pool.kind == TPU else pool.accelerator_count,
    }
  return resources
