"""What each `--machine` value means: the one table of Trainer machines.

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
class TPUGeneration:
  """What a TPU generation means for the Trainer and for each target.

  Attributes:
    name: 'v2', 'v3', 'v5e', 'v5p', 'v6e'.
    replicas_per_chip: TPU devices TensorFlow lists per chip, i.e. replicas of
      TPUStrategy: v2/v3 chips have two TensorCores, each its own device; a
      v4/v5p chip's two TensorCores form one megacore device; v5e and v6e
      chips have one TensorCore (Cloud TPU system architecture pages).
    vertex_accelerator: Vertex AI `AcceleratorType` enum name; '' where the
      enum has none (then Vertex AI custom training cannot run it).
    gke_accelerator: `cloud.google.com/gke-tpu-accelerator` value; '' where
      GKE has no node pools of it.
    tf_runtime: TPU software version of a single-host TPU VM for this
      project's TensorFlow line; multi-host slices use its `-pod` variant.
  """
  name: str
  replicas_per_chip: int
  vertex_accelerator: str
  gke_accelerator: str
  tf_runtime: str


# Sources: Cloud TPU system architecture / "TPU v5e", "TPU v5p", "TPU v6e"
# pages (TensorCores per chip); Vertex AI API `AcceleratorType` reference
# (https://cloud.google.com/ruby/docs/reference/google-cloud-ai_platform-v1/
# latest/Google-Cloud-AIPlatform-V1-AcceleratorType, read 2026-12: TPU_V2,
# TPU_V3, TPU_V4_POD, TPU_V5_LITEPOD and no v5p or v6e value); GKE "Plan TPUs"
# (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus: v4 and
# later only); "TPU software versions"
# (https://cloud.google.com/tpu/docs/runtimes: tpu-vm-tf-x.y.z[-pod][-pjrt]).
# tpu-vm-tf-2.16.1-pjrt / -pod-pjrt run v3, v5e and v5p (public scripts
# create v3-8, v5litepod-16 and v5p-8 with them); for v6e the earliest TF runtime seen is
# 2.18.0 (tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6): not confirmed for 2.16,
# which this image carries.
TPU_GENERATIONS: Dict[str, TPUGeneration] = {
    'v2': TPUGeneration('v2', 2, 'TPU_V2', '', 'tpu-vm-tf-2.16.1-pjrt'),
    'v3': TPUGeneration('v3', 2, 'TPU_V3', '', 'tpu-vm-tf-2.16.1-pjrt'),
    'v5e': TPUGeneration('v5e', 1, 'TPU_V5_LITEPOD', 'tpu-v5-lite-podslice',
                         'tpu-vm-tf-2.16.1-pjrt'),
    'v5p': TPUGeneration('v5p', 1, '', 'tpu-v5p-slice',
                         'tpu-vm-tf-2.16.1-pjrt'),
    'v6e': TPUGeneration('v6e', 1, '', 'tpu-v6e-slice',
                         'tpu-vm-tf-2.18.0-pjrt'),
}


@dataclasses.dataclass(frozen=True)
class WorkerPool:
  """One Trainer machine shape.

  Attributes:
    name: the `--machine` value.
    kind: CPU, GPU or TPU (becomes TrainerSettings.accelerator).
    machine_type: Compute Engine / Vertex AI machine type (of one host, for
      a multi-host TPU slice).
    accelerator_type: Vertex AI `AcceleratorType` enum name ('' for none).
    accelerator_count: accelerators (GPUs, TPU cores or chips) per machine,
      as Vertex AI's `machine_spec.accelerator_count` counts them.
    tpu_topology: TPU slice topology (the whole slice's), where Vertex AI and
      GKE ask for one.
    tpu_chips: TPU chips per machine (per host of a slice; Kubernetes counts
      TPUs in chips: a v3-8 has 4 chips of 2 cores).
    vcpus: vCPUs of the machine.
    memory_gb: memory of the machine in GB.
    multi_worker: whether several machines of this shape can train together
      (MultiWorkerMirroredStrategy); a TPU slice is one `--workers`, however
      many hosts it has.
    compute_capability: CUDA compute capability of the GPU (decides the
      mixed precision policy), None for CPUs and TPUs.
    tpu_type: accelerator type as the TPU VM runtime names it
      (TPU_ACCELERATOR_TYPE), '' for CPUs and GPUs.
    gke_accelerator: the GKE node label value of the accelerator
      (`cloud.google.com/gke-accelerator` for GPUs,
      `cloud.google.com/gke-tpu-accelerator` for TPUs); '' for CPUs and for
      TPUs that GKE has no node pools of.
    tpu_generation: a TPU_GENERATIONS key, '' for CPUs and GPUs.
    hosts: TPU VMs of the slice (1 but for multi-host slices).
  """
  name: str
  kind: str
  machine_type: str
  accelerator_type: str = ''
  accelerator_count: int = 0
  tpu_topology: str = ''
  tpu_chips: int = 0
  vcpus: int = 0
  memory_gb: float = 0
  multi_worker: bool = True
  compute_capability: Optional[Tuple[int, int]] = None
  tpu_type: str = ''
  gke_accelerator: str = ''
  tpu_generation: str = ''
  hosts: int = 1

  @property
  def generation(self) -> Optional[TPUGeneration]:
    return TPU_GENERATIONS.get(self.tpu_generation)

  @property
  def is_multi_host(self) -> bool:
    return self.hosts > 1

  @property
  def replicas_per_host(self) -> int:
    """Replicas one machine (one host of a slice) trains: GPUs, TPU devices."""
    if self.kind == TPU:
      return self.tpu_chips * self.generation.replicas_per_chip
    return self.accelerator_count

  @property
  def tpu_runtime(self) -> str:
    """The TPU software version a TPU VM of this shape runs TF with."""
    if self.kind != TPU:
      return ''
    runtime = self.generation.tf_runtime
    if self.is_multi_host:
      # tpu-vm-tf-x.y.z[-pod][-pjrt]: '-pod' for multi-host slices.
      base, pjrt = (runtime[:-len('-pjrt')], '-pjrt') if runtime.endswith(
          '-pjrt') else (runtime, '')
      runtime = f'{base}-pod{pjrt}'
    return runtime


def _gpu(name, machine_type, accelerator_type, count, capability, vcpus,
         memory_gb, gke_accelerator):
  return WorkerPool(name, GPU, machine_type, accelerator_type, count,
                    compute_capability=capability, vcpus=vcpus,
                    memory_gb=memory_gb, gke_accelerator=gke_accelerator)


def _tpu(name, generation, machine_type, chips, topology, tpu_type, vcpus,
         memory_gb, hosts=1, accelerator_count=0):
  gen = TPU_GENERATIONS[generation]
  return WorkerPool(name, TPU, machine_type, gen.vertex_accelerator,
                    accelerator_count or chips, tpu_topology=topology,
                    tpu_chips=chips, tpu_type=tpu_type, vcpus=vcpus,
                    memory_gb=memory_gb, multi_worker=False,
                    gke_accelerator=gen.gke_accelerator,
                    tpu_generation=generation, hosts=hosts)


_POOLS: Tuple[WorkerPool, ...] = (
    WorkerPool('cpu', CPU, 'n1-standard-8', vcpus=8, memory_gb=30),
    _gpu('nvidia-t4', 'n1-standard-8', 'NVIDIA_TESLA_T4', 1, (7, 5), 8, 30,
         'nvidia-tesla-t4'),
    _gpu('nvidia-t4x2', 'n1-standard-16', 'NVIDIA_TESLA_T4', 2, (7, 5), 16, 60,
         'nvidia-tesla-t4'),
    _gpu('nvidia-t4x4', 'n1-standard-32', 'NVIDIA_TESLA_T4', 4, (7, 5), 32,
         120, 'nvidia-tesla-t4'),
    # G2, A2 and A3 machine types come with their GPUs: the count follows the
    # type.
    _gpu('nvidia-l4', 'g2-standard-8', 'NVIDIA_L4', 1, (8, 9), 8, 32,
         'nvidia-l4'),
    _gpu('nvidia-l4x2', 'g2-standard-24', 'NVIDIA_L4', 2, (8, 9), 24, 96,
         'nvidia-l4'),
    _gpu('nvidia-l4x4', 'g2-standard-48', 'NVIDIA_L4', 4, (8, 9), 48, 192,
         'nvidia-l4'),
    _gpu('nvidia-l4x8', 'g2-standard-96', 'NVIDIA_L4', 8, (8, 9), 96, 384,
         'nvidia-l4'),
    _gpu('nvidia-a100', 'a2-highgpu-1g', 'NVIDIA_TESLA_A100', 1, (8, 0), 12,
         85, 'nvidia-tesla-a100'),
    _gpu('nvidia-a100x2', 'a2-highgpu-2g', 'NVIDIA_TESLA_A100', 2, (8, 0), 24,
         170, 'nvidia-tesla-a100'),
    _gpu('nvidia-a100x4', 'a2-highgpu-4g', 'NVIDIA_TESLA_A100', 4, (8, 0), 48,
         340, 'nvidia-tesla-a100'),
    _gpu('nvidia-a100x8', 'a2-highgpu-8g', 'NVIDIA_TESLA_A100', 8, (8, 0), 96,
         680, 'nvidia-tesla-a100'),
    # A2 Ultra: A100 80 GB. Vertex AI "Configure compute resources for custom
    # training" (https://cloud.google.com/vertex-ai/docs/training/
    # configure-compute) lists a2-ultragpu-{1,2,4,8}g with NVIDIA_A100_80GB;
    # vCPUs and memory from the Compute Engine GPU machine types page
    # (https://cloud.google.com/compute/docs/gpus#a100-gpus); GKE label from
    # https://cloud.google.com/kubernetes-engine/docs/how-to/gpus.
    _gpu('nvidia-a100-80gb', 'a2-ultragpu-1g', 'NVIDIA_A100_80GB', 1, (8, 0),
         12, 170, 'nvidia-a100-80gb'),
    _gpu('nvidia-a100-80gbx2', 'a2-ultragpu-2g', 'NVIDIA_A100_80GB', 2, (8, 0),
         24, 340, 'nvidia-a100-80gb'),
    _gpu('nvidia-a100-80gbx4', 'a2-ultragpu-4g', 'NVIDIA_A100_80GB', 4, (8, 0),
         48, 680, 'nvidia-a100-80gb'),
    _gpu('nvidia-a100-80gbx8', 'a2-ultragpu-8g', 'NVIDIA_A100_80GB', 8, (8, 0),
         96, 1360, 'nvidia-a100-80gb'),
    # A3 High: H100 80 GB (Hopper, compute capability 9.0). Same pages: Vertex
    # AI lists a3-highgpu-{1,2,4,8}g with NVIDIA_H100_80GB; Compute Engine
    # gives 26 vCPUs and 234 GB per GPU; GKE label nvidia-h100-80gb. The 1g,
    # 2g and 4g types are offered only as Spot / flex-start capacity on
    # Compute Engine (not checked here: Vertex AI schedules them itself).
    _gpu('nvidia-h100', 'a3-highgpu-1g', 'NVIDIA_H100_80GB', 1, (9, 0), 26,
         234, 'nvidia-h100-80gb'),
    _gpu('nvidia-h100x2', 'a3-highgpu-2g', 'NVIDIA_H100_80GB', 2, (9, 0), 52,
         468, 'nvidia-h100-80gb'),
    _gpu('nvidia-h100x4', 'a3-highgpu-4g', 'NVIDIA_H100_80GB', 4, (9, 0), 104,
         936, 'nvidia-h100-80gb'),
    _gpu('nvidia-h100x8', 'a3-highgpu-8g', 'NVIDIA_H100_80GB', 8, (9, 0), 208,
         1872, 'nvidia-h100-80gb'),
    # A3 Ultra: 8 x H200 141 GB, 224 vCPUs, 2952 GB (Compute Engine
    # accelerator-optimized machines page); Vertex AI's AcceleratorType has
    # NVIDIA_H200_141GB and the configure-compute page lists a3-ultragpu-8g;
    # GKE label nvidia-h200-141gb.
    _gpu('nvidia-h200x8', 'a3-ultragpu-8g', 'NVIDIA_H200_141GB', 8, (9, 0),
         224, 2952, 'nvidia-h200-141gb'),
    # Vertex AI runs v2/v3 as TPU VMs on the `cloud-tpu` machine type (8
    # cores); later generations name their host type and need the topology.
    _tpu('tpu-v2-8', 'v2', 'cloud-tpu', 4, '', 'v2-8', 96, 335,
         accelerator_count=8),
    _tpu('tpu-v3-8', 'v3', 'cloud-tpu', 4, '', 'v3-8', 96, 335,
         accelerator_count=8),
    # TPU v5e ("TPU v5e" page, https://cloud.google.com/tpu/docs/v5e, and
    # GKE "Plan TPUs"): hosts of 1, 4 or 8 chips, ct5lp-hightpu-{1,4,8}t with
    # 24/112/224 vCPUs and 48/192/384 GB; 2D topologies 1x1, 2x2, 2x4 on one
    # host; 4x4 and up are multi-host slices of ct5lp-hightpu-4t hosts.
    _tpu('tpu-v5e-1', 'v5e', 'ct5lp-hightpu-1t', 1, '1x1', 'v5litepod-1', 24,
         48),
    _tpu('tpu-v5e-4', 'v5e', 'ct5lp-hightpu-4t', 4, '2x2', 'v5litepod-4', 112,
         192),
    _tpu('tpu-v5e-8', 'v5e', 'ct5lp-hightpu-8t', 8, '2x4', 'v5litepod-8', 224,
         384),
    _tpu('tpu-v5e-16', 'v5e', 'ct5lp-hightpu-4t', 4, '4x4', 'v5litepod-16',
         112, 192, hosts=4),
    # TPU v5p ("TPU v5p" page, https://cloud.google.com/tpu/docs/v5p, and GKE
    # "Plan TPUs"): named by TensorCores (v5p-8 = 4 chips), one megacore
    # device per chip, 3D topologies; ct5p-hightpu-4t hosts of 4 chips, 208
    # vCPUs, 448 GB. GKE only (Vertex AI's AcceleratorType has no v5p), so
    # no multi-host v5p row: GKE runs a multi-host slice only as a JobSet.
    _tpu('tpu-v5p-8', 'v5p', 'ct5p-hightpu-4t', 4, '2x2x1', 'v5p-8', 208,
         448),
    # TPU v6e / Trillium ("TPU v6e" page, https://cloud.google.com/tpu/docs/
    # v6e, and GKE "Plan TPUs"): one TensorCore per chip; ct6e-standard-1t
    # (44 vCPUs, 176 GB), -4t (180 vCPUs, 720 GB), -8t (180 vCPUs, 1440 GB);
    # 4x4 and up are multi-host slices of ct6e-standard-4t hosts. GKE only
    # (Vertex AI's AcceleratorType has no v6e), single-host for that reason.
    _tpu('tpu-v6e-1', 'v6e', 'ct6e-standard-1t', 1, '1x1', 'v6e-1', 44, 176),
    _tpu('tpu-v6e-4', 'v6e', 'ct6e-standard-4t', 4, '2x2', 'v6e-4', 180, 720),
    _tpu('tpu-v6e-8', 'v6e', 'ct6e-standard-8t', 8, '2x4', 'v6e-8', 180, 1440),
)

WORKER_POOLS: Dict[str, WorkerPool] = {pool.name: pool for pool in _POOLS}
ACCELERATORS: Tuple[str, ...] = tuple(WORKER_POOLS)


class UnknownAcceleratorError(ValueError):
  """A `--machine` value that is not in the table."""


def worker_pool(name: str) -> WorkerPool:
  """The worker pool of a `--machine` value.

  Raises:
    UnknownAcceleratorError: `name` is not in the table; the message lists the
      valid values.
  """
  try:
    return WORKER_POOLS[name]
  except KeyError:
    raise UnknownAcceleratorError(
        f'unknown machine {name!r}; valid values: '
        f'{", ".join(ACCELERATORS)}') from None


def check_workers(pool: WorkerPool, workers: int) -> None:
  """Raises ValueError unless `workers` machines of `pool` can train as one."""
  if workers < 1:
    raise ValueError(f'--workers must be >= 1, got {workers}')
  if workers > 1 and not pool.multi_worker:
    hosts = (f' of {pool.hosts} hosts, which the row already counts'
             if pool.is_multi_host else '')
    raise ValueError(
        f'{pool.name} is one TPU slice{hosts}: --workers must be 1, got '
        f'{workers}')


def vertex_refusal(pool: WorkerPool) -> str:
  """Why Vertex AI custom training cannot run `pool` ('' when it can)."""
  if pool.kind == TPU and not pool.accelerator_type:
    others = ', '.join(name for name, p in WORKER_POOLS.items()
                       if p.kind == TPU and p.accelerator_type)
    return (f'{pool.name}: Vertex AI custom training has no TPU '
            f'{pool.tpu_generation} (its AcceleratorType offers TPU_V2, '
            'TPU_V3, TPU_V4_POD and TPU_V5_LITEPOD only): use --target '
            f'kubeflow on a GKE cluster with {pool.gke_accelerator} node '
            f'pools, or a Vertex AI TPU ({others})')
  return ''


def gke_refusal(pool: WorkerPool) -> str:
  """Why a Kubeflow pipeline step on GKE cannot run `pool` ('' when it can)."""
  if pool.kind != CPU and not pool.gke_accelerator:
    return (f'{pool.name} has no GKE node pools (GKE offers TPU v4 and '
            'later), so a Kubeflow pipeline step cannot get one: use --target '
            'vertex, or --machine tpu-v5e-8')
  if pool.is_multi_host:
    slice_spec = gke_multi_host_slice(pool)
    return (
        f'{pool.name} is a multi-host TPU slice ({pool.hosts} hosts of '
        f'{pool.tpu_chips} chips, topology {pool.tpu_topology}): GKE runs it '
        f'as {pool.hosts} pods scheduled together, one per host, each '
        f'requesting google.com/tpu: {pool.tpu_chips} with node selector '
        f'{slice_spec["nodeSelector"]}, but a Kubeflow pipeline step is one '
        'pod. Install JobSet (jobset.x-k8s.io) or LeaderWorkerSet '
        '(leaderworkerset.x-k8s.io) and run the Trainer as one of those, '
        'use --target vertex (which provisions the slice\'s hosts itself), or '
        'a single-host shape')
  return ''


def gke_multi_host_slice(pool: WorkerPool) -> Dict[str, Any]:
  """What GKE needs for a multi-host TPU slice: one pod per host.

  GKE "Deploy TPU workloads" (multi-host): every host's pod selects the
  slice's node pool by accelerator and topology and requests all of its
  host's chips; the pods must be created together (a JobSet, or a
  LeaderWorkerSet) so that the slice starts as one.

  Returns:
    `{'pods', 'nodeSelector', 'limits'}`: pods per slice, the node selector
    labels and the per-pod resource limit.
  """
  return {
      'pods': pool.hosts,
      'nodeSelector': {GKE_TPU_ACCELERATOR_LABEL: pool.gke_accelerator,
                       GKE_TPU_TOPOLOGY_LABEL: pool.tpu_topology},
      'limits': {_K8S_ACCELERATOR_RESOURCE[TPU]: pool.tpu_chips},
  }


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
  MultiWorkerMirroredStrategy reads. A TPU slice is one pool of one replica,
  multi-host or not: its machine type is one host's and `tpu_topology` the
  whole slice's, from which Vertex AI provisions the hosts (the Vertex AI
  pages read here show TPU pools with `replica_count` 1 and do not say more
  for multi-host v5e slices; a real submission is the check). The container command is left out: the
  TFX training client sets it to run our executor.

  Args:
    pool: the machine shape.
    image: container image carrying this package.
    workers: machines in total (chief included).

  Returns:
    One pool spec (chief) or two (chief, workers), as JSON-able dicts.

  Raises:
    ValueError: `workers` is not possible for `pool`, or Vertex AI has no
      such TPU (`vertex_refusal`).
  """
  check_workers(pool, workers)
  refusal = vertex_refusal(pool)
  if refusal:
    raise ValueError(refusal)

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
    ValueError: a TPU that GKE has no node pools of (v2, v3), or a
      multi-host slice (`gke_refusal`).
  """
  if pool.kind == CPU:
    return {}
  refusal = gke_refusal(pool)
  if refusal:
    raise ValueError(refusal)
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
