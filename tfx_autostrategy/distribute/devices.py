"""Which accelerator this process should train on: TPU probes and device lists.

Decision order in `detect('auto')`:

1. TPU, if a TPU probe fires and `TPUClusterResolver` accepts it. Probes, in
   order: the explicit `tpu` argument; `TPU_NAME`;
   `KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS` (GKE); `TPU_CONFIG` (Vertex AI TPU node:
   name, project, zone); a TPU VM, resolved as `tpu='local'` and recognised
   by `/dev/accel<N>` (v2-v4), `/dev/vfio/<N>` (v5e and later), or the
   `TPU_ACCELERATOR_TYPE` / `TPU_WORKER_ID` variables the TPU VM runtime
   sets. The resolver's `ValueError` means "no TPU here" and is the normal
   path on other machines.
2. GPU, if TensorFlow sees GPU devices.
3. CPU otherwise.

Independently of the device kind, `TF_CONFIG` (or Vertex AI's `CLUSTER_SPEC`,
parsed by `cluster`) with two or more training tasks (`chief` + `worker`)
makes the run multi-worker; a TPU, when present, wins over multi-worker.

`detect` never initialises TensorFlow's runtime: MultiWorkerMirroredStrategy
must be created before that ("Collective ops must be configured at program
startup"), so a multi-worker process must not run TF ops before the strategy
is built (`strategies.strategy_for`). The TPU resolver and the device list are
injectable: tests and rehearsals pass their own.
"""

import dataclasses
import glob
import json
import os
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from tfx_autostrategy.distribute import cluster as cluster_lib
from tfx_autostrategy import settings


_TPU_PROBES_TEXT = (
    'probes: explicit tpu argument, TPU_NAME, KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS, '
    'TPU_CONFIG (Vertex AI), TPU VM (/dev/accel<N>, /dev/vfio/<N>, '
    'TPU_ACCELERATOR_TYPE, TPU_WORKER_ID) with TPUClusterResolver')


class AcceleratorNotFoundError(RuntimeError):
  """An explicitly requested accelerator is not available."""


@dataclasses.dataclass(frozen=True)
class AcceleratorInfo:
  """What `detect` found.

  Attributes:
    kind: 'tpu', 'gpu' or 'cpu'.
    devices: logical device names TensorFlow listed in this process.
    num_workers: training processes in the cluster (1 unless multi-worker or
      a multi-host TPU).
    is_chief: whether this process writes the model and summaries.
    task_type: TF job name of this process ('chief', 'worker', ...) or None.
    task_id: index of this process within its job, or None.
    reason: which probe decided and why, for humans.
    compute_capability: lowest (major, minor) of the local GPUs, or None.
    tpu_resolver: the TPU cluster resolver when kind is 'tpu'.
    cluster: training cluster as {job: [address, ...]} when multi-worker.
  """
  kind: str
  devices: Tuple[str, ...]
  num_workers: int
  is_chief: bool
  task_type: Optional[str]
  task_id: Optional[int]
  reason: str
  compute_capability: Optional[Tuple[int, int]]
  tpu_resolver: Any = dataclasses.field(default=None, compare=False,
                                        repr=False)
  cluster: Optional[Mapping[str, Tuple[str, ...]]] = dataclasses.field(
      default=None, compare=False)

  def devices_of(self, device_type: str) -> Tuple[str, ...]:
    """Returns the names in `devices` of one type ('CPU', 'GPU', 'TPU')."""
    return tuple(d for d in self.devices
                 if device_type_of(d) == device_type.upper())

  @property
  def is_multi_worker(self) -> bool:
    """Whether this process is one of several synchronous training workers."""
    return (self.kind != 'tpu' and self.num_workers > 1
            and self.task_type in cluster_lib.TRAINING_JOBS)


def device_type_of(name: str) -> str:
  """'CPU', 'GPU' or 'TPU' for a device name such as '/device:GPU:1'."""
  # '/device:CPU:0' and '/job:worker/replica:0/task:0/device:GPU:1' alike.
  return name.rsplit('/', 1)[-1].split(':')[-2].upper()


def tpu_slice_host(environ: Optional[Mapping[str, str]] = None
                  ) -> Tuple[int, int]:
  """(this host's index, hosts) of a TPU VM slice; (0, 1) elsewhere.

  From the variables the TPU VM runtime sets on every host of a slice:
  `TPU_WORKER_ID` and the comma-separated `TPU_WORKER_HOSTNAMES`.

  Raises:
    ValueError: TPU_WORKER_ID is not an index into TPU_WORKER_HOSTNAMES.
  """
  environ = os.environ if environ is None else environ
  hosts = [h for h in environ.get('TPU_WORKER_HOSTNAMES', '').split(',') if h]
  text = environ.get('TPU_WORKER_ID', '').strip() or '0'
  if len(hosts) <= 1:
    return 0, 1
  if not text.isdigit() or int(text) >= len(hosts):
    raise ValueError(f'TPU_WORKER_ID={text!r} is not a host of the '
                     f'{len(hosts)}-host slice TPU_WORKER_HOSTNAMES='
                     f'{environ["TPU_WORKER_HOSTNAMES"]!r}')
  return int(text), len(hosts)


def _tpu_vm_evidence(environ: Mapping[str, str], dev_dir: str) -> str:
  """Returns why this looks like a Cloud TPU VM, or '' if it does not."""
  # v2-v4 TPU VMs expose /dev/accel<N>; v5e and later bind the chips to VFIO.
  # /dev/vfio/vfio alone is the VFIO control node present on any VFIO host,
  # so only numbered groups count.
  accel = sorted(glob.glob(os.path.join(dev_dir, 'accel[0-9]*')))
  if accel:
    return f'TPU VM device {accel[0]}'
  vfio = sorted(glob.glob(os.path.join(dev_dir, 'vfio', '[0-9]*')))
  if vfio:
    return f'TPU VM device {vfio[0]}'
  for variable in ('TPU_ACCELERATOR_TYPE', 'TPU_WORKER_ID'):
    if environ.get(variable, ''):
      return f'TPU VM variable {variable}={environ[variable]!r}'
  return ''


def _tpu_request(tpu: str, environ: Mapping[str, str],
                 dev_dir: str) -> Tuple[Optional[Dict[str, Any]], str]:
  """Returns (resolver kwargs, probe text), or (None, '') if no probe fired."""
  if tpu:
    return {'tpu': tpu}, f'tpu argument {tpu!r}'
  for variable in ('TPU_NAME', 'KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS'):
    if environ.get(variable, ''):
      return {'tpu': environ[variable]}, f'{variable}={environ[variable]!r}'
  if environ.get('TPU_CONFIG', ''):
    try:
      node = json.loads(environ['TPU_CONFIG'])
    except json.JSONDecodeError as error:
      raise ValueError(f'TPU_CONFIG is not valid JSON: {error}') from error
    kwargs = {'tpu': node.get('tpu_node_name')}
    for key in ('project', 'zone'):
      if node.get(key):
        kwargs[key] = node[key]
    return kwargs, f'TPU_CONFIG node {kwargs["tpu"]!r}'
  evidence = _tpu_vm_evidence(environ, dev_dir)
  if evidence:
    return {'tpu': 'local'}, evidence
  return None, ''


def _default_list_devices() -> Sequence[str]:
  """Names the logical devices TensorFlow will create, without creating them.

  `tf.config.list_logical_devices()` would initialise the runtime, after
  which MultiWorkerMirroredStrategy can no longer configure collective ops
  ("Collective ops must be configured at program startup"). Visible physical
  devices and their logical configuration are known before that.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  names = []
  for device_type in ('CPU', 'GPU', 'TPU'):
    index = 0
    for physical in tf.config.get_visible_devices(device_type):
      logical = tf.config.get_logical_device_configuration(physical)
      for _ in logical or [None]:
        names.append(f'/device:{device_type}:{index}')
        index += 1
  return names


def _gpu_compute_capability() -> Optional[Tuple[int, int]]:
  """Returns the lowest compute capability of the physical GPUs, or None."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  capabilities = []
  for gpu in tf.config.list_physical_devices('GPU'):
    capability = tf.config.experimental.get_device_details(gpu).get(
        'compute_capability')
    if capability:
      capabilities.append(tuple(capability))
  return min(capabilities) if capabilities else None


def _default_tpu_resolver_factory(**kwargs) -> Any:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.distribute.cluster_resolver.TPUClusterResolver(**kwargs)


def detect(accelerator: str = 'auto', *, tpu: str = '',
           environ: Optional[Mapping[str, str]] = None,
           tpu_resolver_factory: Optional[Callable[..., Any]] = None,
           list_devices: Optional[Callable[[], Sequence[str]]] = None,
           dev_dir: str = '/dev') -> AcceleratorInfo:
  """Finds the accelerator this process should train on.

  Does not initialise TensorFlow's runtime (a multi-worker strategy must be
  created before that), so `configure_cpu_replicas` still works afterwards.

  Args:
    accelerator: 'auto', or 'tpu' / 'gpu' / 'cpu' to insist on one.
    tpu: TPU name or grpc:// address; '' lets the probes decide.
    environ: environment to read; defaults to `os.environ`.
    tpu_resolver_factory: called with `TPUClusterResolver` keyword arguments
      (`tpu`, and `project`/`zone` from TPU_CONFIG); raises ValueError when
      there is no such TPU. Defaults to `TPUClusterResolver`.
    list_devices: returns the logical device names of this process. Defaults
      to the visible physical devices expanded by their logical configuration
      (what `tf.config.list_logical_devices()` will return, without
      initialising the runtime).
    dev_dir: where TPU VM device nodes are looked for.

  Returns:
    The `AcceleratorInfo`.

  Raises:
    AcceleratorNotFoundError: `accelerator` is 'tpu' or 'gpu' and there is none.
    ValueError: unknown `accelerator`, or malformed TF_CONFIG / CLUSTER_SPEC /
      TPU_CONFIG.
  """
  if accelerator not in settings.ACCELERATORS:
    raise ValueError(
        f'accelerator must be one of {settings.ACCELERATORS}, got '
        f'{accelerator!r}')
  environ = os.environ if environ is None else environ
  cluster = cluster_lib.cluster_config(environ)
  devices = tuple(list_devices() if list_devices else _default_list_devices())

  def info(kind, reason, **overrides):
    values = dict(
        kind=kind, devices=devices, num_workers=cluster.num_workers,
        is_chief=cluster.is_chief, task_type=cluster.task_type,
        task_id=cluster.task_id, reason=reason, compute_capability=None,
        cluster=cluster.cluster if cluster.num_workers > 1 else None)
    values.update(overrides)
    return AcceleratorInfo(**values)

  tpu_note = ''
  if accelerator in ('auto', 'tpu'):
    kwargs, probe = _tpu_request(tpu, environ, dev_dir)
    if kwargs is None and accelerator == 'tpu':
      # Let the resolver try its own discovery; its error names what it read.
      kwargs, probe = {'tpu': None}, 'TPUClusterResolver default discovery'
    if kwargs is not None:
      factory = tpu_resolver_factory or _default_tpu_resolver_factory
      try:
        resolver = factory(**kwargs)
      except ValueError as error:
        if accelerator == 'tpu':
          raise AcceleratorNotFoundError(
              f"accelerator='tpu' was requested but no TPU was found: {probe} "
              f'-> {error}; devices found: {list(devices)}; '
              f'{_TPU_PROBES_TEXT}') from error
        tpu_note = f'; TPU probe {probe} rejected by the resolver: {error}'
      else:
        _, hosts = tpu_slice_host(environ)
        slice_note = (f'; host of a {hosts}-host slice (TPU_WORKER_HOSTNAMES)'
                      if hosts > 1 else '')
        return info(
            'tpu', f'TPU: {probe} resolved by {type(resolver).__name__}'
            f'{slice_note}',
            num_workers=hosts,
            is_chief=cluster_lib.chief_from_environ(environ),
            tpu_resolver=resolver,
            cluster=None)
    else:
      tpu_note = '; no TPU probe fired'

  gpus = [d for d in devices if device_type_of(d) == 'GPU']
  if accelerator in ('auto', 'gpu') and gpus:
    capability = _gpu_compute_capability()
    return info('gpu', f'GPU: {len(gpus)} logical GPU device(s), compute '
                f'capability {capability}{tpu_note}'
                f'{cluster_lib.cluster_note(cluster)}',
                compute_capability=capability)
  if accelerator == 'gpu':
    raise AcceleratorNotFoundError(
        f"accelerator='gpu' was requested but TensorFlow lists no GPU; "
        f'devices found: {list(devices)}; probe: '
        'tf.config.get_visible_devices(\'GPU\') (check the CUDA driver, '
        'CUDA_VISIBLE_DEVICES and that the tensorflow[and-cuda] build is '
        'installed)')
  cpus = [d for d in devices if device_type_of(d) == 'CPU']
  if accelerator == 'cpu':
    why = 'CPU: requested'
  elif len(cpus) > 1:
    why = f'CPU: {len(cpus)} logical CPU devices configured'
  else:
    why = 'CPU: no TPU or GPU found'
  return info('cpu', why + tpu_note + cluster_lib.cluster_note(cluster))
