"""Accelerator detection and the matching `tf.distribute` strategy.

One code path for TPU, multi-worker, GPU and CPU runs: `detect` finds out what
this process can use, `strategy_for` builds the strategy, and `plan_for` turns
both into the numbers the Trainer needs (global batch, precision,
steps_per_execution). `resolve` does all three.

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

Independently of the device kind, `TF_CONFIG` (or Vertex AI's `CLUSTER_SPEC`)
with two or more training tasks (`chief` + `worker`) makes the run
multi-worker; a TPU, when present, wins over multi-worker.

Strategy per case: TPU -> `TPUStrategy`; multi-worker ->
`MultiWorkerMirroredStrategy`; >= 1 GPUs -> `MirroredStrategy` over them (one
GPU included: tf_keras 2.16's `BackupAndRestore` refuses `OneDeviceStrategy`
at the start of `fit`, and TFX's own Vertex AI tutorial uses a one-device
`MirroredStrategy`); N > 1 logical CPUs (`configure_cpu_replicas`) ->
`MirroredStrategy` over them; a CPU run on a GPU machine -> `MirroredStrategy`
over '/cpu:0'; otherwise the default strategy.

`detect` never initialises TensorFlow's runtime: MultiWorkerMirroredStrategy
must be created before that ("Collective ops must be configured at program
startup"), so a multi-worker process must not run TF ops before `resolve`.

Bounded multi-worker start-up (measured with TF 2.16.2): when a worker never
starts, the others block inside `MultiWorkerMirroredStrategy()` in the
coordination service's `WaitForAllTasks` barrier, whose deadline is hard-coded
to one hour. Neither `CommunicationOptions(timeout_seconds=...)` nor the
coordination service's `cluster_register_timeout_in_ms` (private API) shortens
it, and the call holds the GIL, so no Python thread or signal handler can
interrupt it. The bound that works is a watchdog outside the GIL:
`faulthandler.dump_traceback_later(..., exit=True)` prints every thread's
stack (naming `_exit_unless_all_workers_join`) and exits with status 1. After
start-up, `CommunicationOptions(timeout_seconds=...)` bounds every collective
op; TF's coordination service also aborts collectives when a peer's
heartbeats stop. TensorFlow catches SIGTERM in multi-worker processes
(preemption notifier), so supervisors must use SIGKILL to stop a hung worker.

Nothing here reads the environment at import time, and TensorFlow is
imported inside the functions that need it, so importing this module is cheap.
"""

import dataclasses
import faulthandler
import glob
import io
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from tfx_autostrategy.components import settings

ACCELERATORS = settings.ACCELERATORS

# Read by `configure_cpu_replicas_from_env`, which entry points call before
# anything else touches TensorFlow devices.
CPU_REPLICAS_ENV = 'AUTOSTRATEGY_CPU_REPLICAS'

PRECISIONS = ('float32', 'mixed_float16', 'mixed_bfloat16')

# Several steps per tf.function call hide host overhead; on TPU the host loop
# is the bottleneck for small models, on CPU there is nothing to hide.
TPU_STEPS_PER_EXECUTION = 32
GPU_STEPS_PER_EXECUTION = 4
CPU_STEPS_PER_EXECUTION = 1

# XLA pads each TPU core's batch dimension to a multiple of this (the Cloud
# TPU performance guide: 128 per core is ideal), and fixed feature lengths
# tile in multiples of it too.
TPU_BATCH_MULTIPLE = 8

# TPUs get no preemption notice (TF's PreemptionCheckpointHandler supports
# MultiWorkerMirroredStrategy only), so on TPU the backup is also written every
# this many steps: a preempted job loses at most that much work. Elsewhere
# BackupAndRestore saves at every epoch end.
TPU_BACKUP_EVERY_STEPS = 256

# How long a remote TPU node (TPU_CONFIG, TPU_NAME) may take to become
# reachable: a Vertex AI TPU node or a freshly created Cloud TPU accepts
# connections minutes after the job's container starts.
DEFAULT_TPU_WAIT_SECONDS = 600.0
TPU_WAIT_INTERVAL_SECONDS = 15.0

# Generous because every worker's first step waits for the slowest worker's
# tracing and compilation, and for the chief's checkpoint writes.
DEFAULT_COLLECTIVE_TIMEOUT_SECONDS = 600.0

# TF's class names for strategies whose public `tf.distribute` name differs.
_PUBLIC_STRATEGY_NAMES = {
    'TPUStrategyV2': 'TPUStrategy',
    'CollectiveAllReduceStrategy': 'MultiWorkerMirroredStrategy',
    '_DefaultDistributionStrategy': 'DefaultStrategy',
}

# Training tasks of a TF_CONFIG cluster; `evaluator` and `ps` tasks do not
# take part in the synchronous all-reduce.
_TRAINING_JOBS = ('chief', 'worker')

# Vertex AI worker pools as TF job names
# (https://cloud.google.com/vertex-ai/docs/training/distributed-training).
_VERTEX_POOL_JOBS = {
    'workerpool0': 'chief',
    'workerpool1': 'worker',
    'workerpool2': 'ps',
    'workerpool3': 'evaluator',
}

_TPU_PROBES_TEXT = (
    'probes: explicit tpu argument, TPU_NAME, KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS, '
    'TPU_CONFIG (Vertex AI), TPU VM (/dev/accel<N>, /dev/vfio/<N>, '
    'TPU_ACCELERATOR_TYPE, TPU_WORKER_ID) with TPUClusterResolver')

# TPU systems initialised in this process, keyed by resolver master ('' for a
# TPU VM's local chips). Initialising twice would wipe the TPU's memory.
_TPU_INITIALIZED = set()

# Temporary export directories handed to non-chief workers; `cleanup` only
# deletes these.
_TEMP_EXPORT_DIRS = set()


class AcceleratorNotFoundError(RuntimeError):
  """An explicitly requested accelerator is not available."""


class TPUUnreachableError(RuntimeError):
  """A TPU was named but did not become reachable within the wait."""


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
                 if _device_type(d) == device_type.upper())

  @property
  def is_multi_worker(self) -> bool:
    """Whether this process is one of several synchronous training workers."""
    return (self.kind != 'tpu' and self.num_workers > 1
            and self.task_type in _TRAINING_JOBS)


@dataclasses.dataclass(frozen=True)
class DistributionPlan:
  """How the Trainer trains: what `autostrategy detect --json` prints.

  Attributes:
    accelerator: 'tpu', 'gpu' or 'cpu'.
    strategy: public `tf.distribute` name of the strategy's class
      ('MultiWorkerMirroredStrategy', not 'CollectiveAllReduceStrategy';
      'DefaultStrategy' for `tf.distribute.get_strategy()`).
    num_replicas: `strategy.num_replicas_in_sync`.
    per_replica_batch_size: examples per replica per step.
    global_batch_size: per_replica_batch_size x num_replicas.
    precision: Keras mixed precision policy name.
    steps_per_execution: Keras steps per tf.function call.
    jit_compile: whether the train step is compiled with XLA.
    backup_every_steps: BackupAndRestore also saves every this many steps
      (0: at epoch ends only).
    adjustments: settings the plan changed to fit the machine, and why.
    is_chief: whether this process exports the model.
    num_workers: training processes in the cluster.
    devices: logical device names seen by this process.
    reason: why this accelerator was chosen.
  """
  accelerator: str
  strategy: str
  num_replicas: int
  per_replica_batch_size: int
  global_batch_size: int
  precision: str
  steps_per_execution: int
  jit_compile: bool
  backup_every_steps: int
  adjustments: Tuple[str, ...]
  is_chief: bool
  num_workers: int
  devices: Tuple[str, ...]
  reason: str

  def to_dict(self) -> Dict[str, Any]:
    """Returns the plan as JSON-serialisable primitives."""
    values = dataclasses.asdict(self)
    values['devices'] = list(self.devices)
    values['adjustments'] = list(self.adjustments)
    return values


@dataclasses.dataclass(frozen=True)
class _ClusterConfig:
  """This process's place in a TF_CONFIG / CLUSTER_SPEC cluster."""
  cluster: Dict[str, Tuple[str, ...]]
  task_type: Optional[str]
  task_id: Optional[int]
  num_workers: int
  is_chief: bool
  source: str


def _device_type(name: str) -> str:
  # '/device:CPU:0' and '/job:worker/replica:0/task:0/device:GPU:1' alike.
  return name.rsplit('/', 1)[-1].split(':')[-2].upper()


def _cluster_config(environ: Mapping[str, str]) -> _ClusterConfig:
  """Parses TF_CONFIG, or Vertex AI's CLUSTER_SPEC when TF_CONFIG is absent.

  Raises:
    ValueError: the variable is not valid JSON, or names several training
      tasks without saying which one this process is.
  """
  source = ''
  for variable in ('TF_CONFIG', 'CLUSTER_SPEC'):
    if environ.get(variable, '').strip():
      source = variable
      break
  if not source:
    return _ClusterConfig({}, None, None, 1, True, 'no TF_CONFIG/CLUSTER_SPEC')
  try:
    config = json.loads(environ[source])
  except json.JSONDecodeError as error:
    raise ValueError(f'{source} is not valid JSON: {error}') from error
  cluster = config.get('cluster') or {}
  task = config.get('task') or {}
  task_type = task.get('type')
  task_id = task.get('index')
  if source == 'CLUSTER_SPEC':
    cluster = {_VERTEX_POOL_JOBS.get(pool, pool): addresses
               for pool, addresses in cluster.items()}
    task_type = _VERTEX_POOL_JOBS.get(task_type, task_type)
  cluster = {job: tuple(addresses) for job, addresses in cluster.items()}
  task_id = None if task_id is None else int(task_id)
  num_training = sum(len(cluster.get(job, ())) for job in _TRAINING_JOBS)
  if num_training > 1 and (task_type is None or task_id is None):
    raise ValueError(
        f'{source} lists {num_training} training tasks but no task.type and '
        f'task.index for this process: {environ[source]}')
  if task_type is None:
    is_chief = True
  elif 'chief' in cluster:
    is_chief = task_type == 'chief'
  else:
    is_chief = task_type == 'worker' and task_id == 0
  num_workers = num_training if task_type in _TRAINING_JOBS else 1
  if source == 'CLUSTER_SPEC':
    source = f'CLUSTER_SPEC ({task.get("type")} -> {task_type})'
  return _ClusterConfig(cluster, task_type, task_id, max(num_workers, 1),
                        is_chief, source)


def chief_from_environ(environ: Optional[Mapping[str, str]] = None) -> bool:
  """Returns whether this process is the chief, from TF_CONFIG/CLUSTER_SPEC.

  The chief is the `chief` task, or `worker` 0 when the cluster has no chief;
  with Vertex AI's CLUSTER_SPEC it is the `workerpool0` replica. A process
  without cluster configuration is its own chief. Does not import TensorFlow.

  Args:
    environ: environment to read; defaults to `os.environ`.
  """
  environ = os.environ if environ is None else environ
  config = _cluster_config(environ)
  return config.is_chief and environ.get('TPU_WORKER_ID', '0') in ('', '0')


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
  if accelerator not in ACCELERATORS:
    raise ValueError(
        f'accelerator must be one of {ACCELERATORS}, got {accelerator!r}')
  environ = os.environ if environ is None else environ
  cluster = _cluster_config(environ)
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
        hosts = [h for h in environ.get('TPU_WORKER_HOSTNAMES', '').split(',')
                 if h]
        return info(
            'tpu', f'TPU: {probe} resolved by {type(resolver).__name__}',
            num_workers=max(len(hosts), 1),
            is_chief=chief_from_environ(environ), tpu_resolver=resolver,
            cluster=None)
    else:
      tpu_note = '; no TPU probe fired'

  gpus = [d for d in devices if _device_type(d) == 'GPU']
  if accelerator in ('auto', 'gpu') and gpus:
    capability = _gpu_compute_capability()
    return info('gpu', f'GPU: {len(gpus)} logical GPU device(s), compute '
                f'capability {capability}{tpu_note}{_cluster_note(cluster)}',
                compute_capability=capability)
  if accelerator == 'gpu':
    raise AcceleratorNotFoundError(
        f"accelerator='gpu' was requested but TensorFlow lists no GPU; "
        f'devices found: {list(devices)}; probe: '
        'tf.config.get_visible_devices(\'GPU\') (check the CUDA driver, '
        'CUDA_VISIBLE_DEVICES and that the tensorflow[and-cuda] build is '
        'installed)')
  cpus = [d for d in devices if _device_type(d) == 'CPU']
  if accelerator == 'cpu':
    why = 'CPU: requested'
  elif len(cpus) > 1:
    why = f'CPU: {len(cpus)} logical CPU devices configured'
  else:
    why = 'CPU: no TPU or GPU found'
  return info('cpu', why + tpu_note + _cluster_note(cluster))


def _cluster_note(cluster: _ClusterConfig) -> str:
  if cluster.num_workers > 1:
    return (f'; multi-worker: {cluster.source} has {cluster.num_workers} '
            f'training tasks, this is {cluster.task_type}:{cluster.task_id}')
  if cluster.task_type is not None:
    return f'; {cluster.source} task {cluster.task_type}:{cluster.task_id}'
  return ''


def _default_tpu_initializer(resolver: Any) -> Any:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # A no-op for a TPU VM's local chips (master '').
  tf.config.experimental_connect_to_cluster(resolver)
  return tf.tpu.experimental.initialize_tpu_system(resolver)


def _unreachable_errors() -> Tuple[type, ...]:
  """Errors that mean "the TPU is not reachable yet", worth waiting on."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
          ConnectionError)


def initialize_tpu(resolver: Any, *,
                   initializer: Optional[Callable[[Any], Any]] = None,
                   wait_seconds: float = DEFAULT_TPU_WAIT_SECONDS,
                   interval_seconds: float = TPU_WAIT_INTERVAL_SECONDS,
                   sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic,
                   retry_on: Optional[Tuple[type, ...]] = None) -> None:
  """Connects to and initialises the TPU system once per process.

  A remote TPU node (Vertex AI's TPU_CONFIG, a Cloud TPU named by TPU_NAME)
  often accepts connections only minutes after the job starts, so
  unreachable-TPU errors are retried every `interval_seconds` for up to
  `wait_seconds` (tensorflow/cloud waits the same way); a TPU VM's local chips
  (master '') are initialised at once. Initialising twice would wipe the
  TPU's memory, hence once per resolver master.

  Args:
    resolver: the TPU cluster resolver.
    initializer: connects and initialises; defaults to
      `experimental_connect_to_cluster` + `initialize_tpu_system`.
    wait_seconds: how long to keep retrying an unreachable TPU.
    interval_seconds: pause between attempts.
    sleep: injectable pause (tests).
    clock: injectable monotonic clock (tests).
    retry_on: exception types that mean "not reachable yet"; defaults to
      TensorFlow's Unavailable / DeadlineExceeded errors and ConnectionError.

  Raises:
    TPUUnreachableError: the TPU was still unreachable after `wait_seconds`;
      the message names the TPU, the attempts and the last error.
  """
  key = resolver.master()
  if key in _TPU_INITIALIZED:
    return
  initializer = initializer or _default_tpu_initializer
  retry_on = retry_on or _unreachable_errors()
  started = clock()
  attempts = 0
  while True:
    attempts += 1
    try:
      initializer(resolver)
      break
    except retry_on as error:
      waited = clock() - started
      if waited + interval_seconds > wait_seconds:
        raise TPUUnreachableError(
            f'TPU {key!r} did not become reachable: waited {waited:.0f} s '
            f'over {attempts} attempt(s) to connect to it and initialise the '
            f'TPU system (limit {wait_seconds:.0f} s); last error: '
            f'{type(error).__name__}: {error}. Check that the TPU node exists, '
            'is READY, and is in the job\'s network and zone.') from error
      logging.warning('TPU %r not reachable yet (%s: %s); retrying in %.0f s '
                      '(waited %.0f of %.0f s).', key, type(error).__name__,
                      error, interval_seconds, waited, wait_seconds)
      sleep(interval_seconds)
  _TPU_INITIALIZED.add(key)


def _default_strategy_factory(name: str, **kwargs) -> Any:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if name == 'default':
    return tf.distribute.get_strategy()
  return getattr(tf.distribute, name)(**kwargs)


def _exit_unless_all_workers_join(create: Callable[[], Any],
                                  timeout_seconds: float,
                                  info: AcceleratorInfo) -> Any:
  """Calls `create`, exiting the process if it blocks past the timeout.

  TF 2.16 waits one hour (hard-coded) for missing workers inside the strategy
  constructor while holding the GIL; faulthandler's watchdog runs outside the
  GIL, dumps the stacks (this function's name among them) and exits with
  status 1.
  """
  peers = {job: list(addresses)
           for job, addresses in (info.cluster or {}).items()}
  logging.info(
      'Joining the %d-worker cluster %s as %s:%s; if any worker has not '
      'started within %.0f s this process exits with status 1 '
      '(faulthandler watchdog).', info.num_workers, peers, info.task_type,
      info.task_id, timeout_seconds)
  try:
    faulthandler.dump_traceback_later(timeout_seconds, exit=True,
                                      file=sys.stderr)
  except (AttributeError, ValueError, io.UnsupportedOperation) as error:
    # No usable stderr file descriptor (embedded interpreters): run unbounded
    # rather than refuse to train.
    logging.warning('Cannot bound the wait for workers (%s); TensorFlow waits '
                    'up to one hour for missing workers.', error)
    return create()
  try:
    return create()
  finally:
    faulthandler.cancel_dump_traceback_later()


def strategy_for(info: AcceleratorInfo, *,
                 tpu_initializer: Optional[Callable[[Any], Any]] = None,
                 strategy_factory: Optional[Callable[..., Any]] = None,
                 collective_timeout_seconds: float = (
                     DEFAULT_COLLECTIVE_TIMEOUT_SECONDS),
                 tpu_wait_seconds: float = DEFAULT_TPU_WAIT_SECONDS) -> Any:
  """Builds the `tf.distribute.Strategy` for what `detect` found.

  Args:
    info: result of `detect`.
    tpu_initializer: called with the TPU resolver to connect to and
      initialise the TPU system; runs once per resolver master per process
      (`initialize_tpu`, which retries an unreachable TPU). Defaults to
      `experimental_connect_to_cluster` +
      `tf.tpu.experimental.initialize_tpu_system`.
    strategy_factory: called as `factory(name, **kwargs)` where name is a
      `tf.distribute` class name ('TPUStrategy', 'MultiWorkerMirroredStrategy',
      'MirroredStrategy') or 'default' (the default
      strategy), and kwargs are that class's constructor arguments.
    collective_timeout_seconds: multi-worker only: bounds both the wait for
      every worker to join (the process exits with status 1 past it) and each
      collective op afterwards (`CommunicationOptions.timeout_seconds`).
      0 leaves TensorFlow's own limits (one hour to join, none per op).
    tpu_wait_seconds: how long an unreachable TPU is waited for.

  Returns:
    The strategy.

  Raises:
    TPUUnreachableError: see `initialize_tpu`.
  """
  factory = strategy_factory or _default_strategy_factory
  if info.kind == 'tpu':
    initialize_tpu(info.tpu_resolver, initializer=tpu_initializer,
                   wait_seconds=tpu_wait_seconds)
    return factory('TPUStrategy', tpu_cluster_resolver=info.tpu_resolver)
  gpus = info.devices_of('GPU')
  if info.is_multi_worker:
    return _multi_worker_strategy(info, factory, len(gpus),
                                  collective_timeout_seconds)
  if info.kind == 'gpu':
    # MirroredStrategy even for one GPU: every callback the Trainer uses
    # supports it, while BackupAndRestore refuses OneDeviceStrategy.
    return factory('MirroredStrategy', devices=list(gpus))
  cpus = info.devices_of('CPU')
  if len(cpus) > 1:
    return factory('MirroredStrategy', devices=list(cpus))
  if gpus:
    # The default strategy would place ops on the GPU the caller declined.
    return factory('MirroredStrategy', devices=[cpus[0] if cpus else '/cpu:0'])
  return factory('default')


def _multi_worker_strategy(info: AcceleratorInfo, factory: Callable[..., Any],
                           num_gpus: int, timeout_seconds: float) -> Any:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cluster = {job: list(info.cluster[job]) for job in _TRAINING_JOBS
             if job in info.cluster}
  # Built from the parsed config rather than letting TF re-read TF_CONFIG, so
  # Vertex's CLUSTER_SPEC and an injected environment behave the same.
  resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec(cluster), task_type=info.task_type,
      task_id=info.task_id, num_accelerators={'GPU': num_gpus},
      rpc_layer='grpc')
  options = tf.distribute.experimental.CommunicationOptions(
      timeout_seconds=timeout_seconds or None)

  def create():
    return factory('MultiWorkerMirroredStrategy', cluster_resolver=resolver,
                   communication_options=options)

  if not timeout_seconds:
    return create()
  return _exit_unless_all_workers_join(create, timeout_seconds, info)


def default_precision(info: AcceleratorInfo) -> str:
  """Returns the mixed precision policy that suits the accelerator."""
  if info.kind == 'tpu':
    return 'mixed_bfloat16'
  # float16 tensor cores arrived with Volta (compute capability 7.0).
  if (info.kind == 'gpu' and info.compute_capability is not None
      and tuple(info.compute_capability) >= (7, 0)):
    return 'mixed_float16'
  return 'float32'


def default_jit_compile(info: AcceleratorInfo) -> bool:
  """Whether the train step is compiled with XLA by default.

  Always on TPU (TPUs run only XLA programs); on by default on GPUs, as in
  tf-models and Keras 3 (fused kernels, fewer launches); off on CPU, where
  XLA gains little and some ops lack XLA CPU kernels.
  """
  return info.kind in ('tpu', 'gpu')


def default_backup_every_steps(info: AcceleratorInfo) -> int:
  """Step interval of BackupAndRestore saves (0: at epoch ends only)."""
  return TPU_BACKUP_EVERY_STEPS if info.kind == 'tpu' else 0


def _round_up(value: int, multiple: int) -> int:
  return -(-value // multiple) * multiple


def steps_per_execution_for(kind: str) -> int:
  """Returns the Keras steps_per_execution that suits 'tpu', 'gpu' or 'cpu'."""
  return {'tpu': TPU_STEPS_PER_EXECUTION,
          'gpu': GPU_STEPS_PER_EXECUTION}.get(kind, CPU_STEPS_PER_EXECUTION)


def default_steps_per_execution(info: AcceleratorInfo) -> int:
  """Returns the Keras steps_per_execution that suits the accelerator."""
  return steps_per_execution_for(info.kind)


JIT_COMPILE_CHOICES = settings.JIT_COMPILE_CHOICES


def plan_for(info: AcceleratorInfo, strategy: Any, per_replica_batch_size: int,
             *, precision: str = '',
             steps_per_execution: int = 0,
             jit_compile: str = 'auto',
             backup_every_steps: int = -1,
             strategy_name: str = '') -> DistributionPlan:
  """Derives batch sizes, precision, steps_per_execution, XLA and backups.

  On TPU the tiling rule applies: a per-replica batch that is not a multiple
  of `TPU_BATCH_MULTIPLE` is rounded up to one (XLA would pad every core's
  batch to it anyway, wasting that share of each step), and the plan's
  `adjustments` say so; XLA cannot be turned off there.

  Args:
    info: result of `detect`.
    strategy: the strategy built for `info`.
    per_replica_batch_size: examples per replica per step.
    precision: a policy in `PRECISIONS`, or '' for `default_precision`.
    steps_per_execution: >= 1, or 0 for `default_steps_per_execution`.
    jit_compile: 'auto' (`default_jit_compile`), 'on' or 'off'.
    backup_every_steps: >= 1, 0 for epoch ends only, or -1 for
      `default_backup_every_steps`.
    strategy_name: the strategy's public name, where `strategy` stands in for
      another class (rehearsals); '' names `strategy`'s own class.

  Returns:
    The `DistributionPlan`.

  Raises:
    ValueError: a batch size below 1, an unknown precision or jit_compile
      value, a negative steps_per_execution, 'off' XLA on TPU.
  """
  if per_replica_batch_size < 1:
    raise ValueError(
        f'per_replica_batch_size must be >= 1, got {per_replica_batch_size}')
  if precision and precision not in PRECISIONS:
    raise ValueError(f'precision must be one of {PRECISIONS} or empty, got '
                     f'{precision!r}')
  if steps_per_execution < 0:
    raise ValueError(
        f'steps_per_execution must be >= 0, got {steps_per_execution}')
  if jit_compile not in JIT_COMPILE_CHOICES:
    raise ValueError(f'jit_compile must be one of {JIT_COMPILE_CHOICES}, got '
                     f'{jit_compile!r}')
  if backup_every_steps < -1:
    raise ValueError('backup_every_steps must be >= 0 (or -1 for the device '
                     f'default), got {backup_every_steps}')
  adjustments = []
  if info.kind == 'tpu':
    if jit_compile == 'off':
      raise ValueError('jit_compile=off is impossible on TPU: TPUs run only '
                       'XLA-compiled programs')
    if per_replica_batch_size % TPU_BATCH_MULTIPLE:
      rounded = _round_up(per_replica_batch_size, TPU_BATCH_MULTIPLE)
      adjustments.append(
          f'per-replica batch {per_replica_batch_size} rounded up to '
          f'{rounded}: the TPU tiles each core\'s batch in multiples of '
          f'{TPU_BATCH_MULTIPLE} (128 per core is ideal)')
      logging.warning('autostrategy: %s', adjustments[-1])
      per_replica_batch_size = rounded
  num_replicas = int(strategy.num_replicas_in_sync)
  class_name = type(strategy).__name__
  return DistributionPlan(
      accelerator=info.kind,
      strategy=strategy_name or _PUBLIC_STRATEGY_NAMES.get(class_name,
                                                           class_name),
      num_replicas=num_replicas,
      per_replica_batch_size=per_replica_batch_size,
      global_batch_size=per_replica_batch_size * num_replicas,
      precision=precision or default_precision(info),
      steps_per_execution=steps_per_execution or default_steps_per_execution(
          info),
      jit_compile=(default_jit_compile(info) if jit_compile == 'auto'
                   else jit_compile == 'on'),
      backup_every_steps=(default_backup_every_steps(info)
                          if backup_every_steps == -1
                          else backup_every_steps),
      adjustments=tuple(adjustments),
      is_chief=info.is_chief,
      num_workers=info.num_workers,
      devices=tuple(info.devices),
      reason=info.reason)


def resolve(accelerator: str = 'auto', per_replica_batch_size: int = 32, *,
            precision: str = '', steps_per_execution: int = 0,
            jit_compile: str = 'auto', backup_every_steps: int = -1,
            tpu: str = '',
            environ: Optional[Mapping[str, str]] = None,
            tpu_resolver_factory: Optional[Callable[..., Any]] = None,
            list_devices: Optional[Callable[[], Sequence[str]]] = None,
            dev_dir: str = '/dev',
            tpu_initializer: Optional[Callable[[Any], Any]] = None,
            strategy_factory: Optional[Callable[..., Any]] = None,
            collective_timeout_seconds: float = (
                DEFAULT_COLLECTIVE_TIMEOUT_SECONDS)
            ) -> Tuple[Any, DistributionPlan, AcceleratorInfo]:
  """`detect`, `strategy_for` and `plan_for` in one call.

  Does not apply the precision policy: the caller does (`apply_precision`)
  right before building the model, and resets it afterwards.

  Args:
    accelerator: see `detect`.
    per_replica_batch_size: see `plan_for`.
    precision: see `plan_for`.
    steps_per_execution: see `plan_for`.
    jit_compile: see `plan_for`.
    backup_every_steps: see `plan_for`.
    tpu: see `detect`.
    environ: see `detect`.
    tpu_resolver_factory: see `detect`.
    list_devices: see `detect`.
    dev_dir: see `detect`.
    tpu_initializer: see `strategy_for`.
    strategy_factory: see `strategy_for`.
    collective_timeout_seconds: see `strategy_for`.

  Returns:
    (strategy, plan, info).

  Raises:
    AcceleratorNotFoundError: see `detect`.
    ValueError: see `detect` and `plan_for`.
  """
  info = detect(accelerator, tpu=tpu, environ=environ,
                tpu_resolver_factory=tpu_resolver_factory,
                list_devices=list_devices, dev_dir=dev_dir)
  strategy = strategy_for(info, tpu_initializer=tpu_initializer,
                          strategy_factory=strategy_factory,
                          collective_timeout_seconds=collective_timeout_seconds)
  plan = plan_for(info, strategy, per_replica_batch_size, precision=precision,
                  steps_per_execution=steps_per_execution,
                  jit_compile=jit_compile,
                  backup_every_steps=backup_every_steps)
  return strategy, plan, info


def apply_precision(policy: str) -> None:
  """Sets the global Keras mixed precision policy.

  Args:
    policy: one of `PRECISIONS`.

  Raises:
    ValueError: unknown policy.
  """
  if policy not in PRECISIONS:
    raise ValueError(f'precision must be one of {PRECISIONS}, got {policy!r}')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.keras.mixed_precision.set_global_policy(policy)


def format_plan(plan: DistributionPlan) -> str:
  """Returns the plan as aligned lines for `autostrategy detect`."""
  rows = [
      ('accelerator', plan.accelerator),
      ('strategy', plan.strategy),
      ('replicas', plan.num_replicas),
      ('workers', plan.num_workers),
      ('per-replica batch', plan.per_replica_batch_size),
      ('global batch', plan.global_batch_size),
      ('precision', plan.precision),
      ('steps per execution', plan.steps_per_execution),
      ('XLA (jit_compile)', 'yes' if plan.jit_compile else 'no'),
      ('backup', f'every {plan.backup_every_steps} steps'
       if plan.backup_every_steps else 'each epoch'),
      ('chief', 'yes' if plan.is_chief else 'no'),
      ('devices', ', '.join(plan.devices) or '-'),
      ('reason', plan.reason),
  ]
  rows += [('adjusted', text) for text in plan.adjustments]
  width = max(len(name) for name, _ in rows) + 1
  return '\n'.join(f'{name + ":":<{width}} {value}' for name, value in rows)


def configure_cpu_replicas(n: int) -> None:
  """Splits the physical CPU into `n` logical devices (`n` replicas).

  Must run before TensorFlow initialises its devices (anything that lists
  logical devices, creates a tensor or runs an op), so launchers call it
  before importing the rest of the code.

  Args:
    n: number of logical CPU devices, >= 1.

  Raises:
    ValueError: `n` < 1.
    RuntimeError: TensorFlow already initialised its devices with a
      different number of logical CPUs.
  """
  if n < 1:
    raise ValueError(f'number of CPU replicas must be >= 1, got {n}')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # Listing physical devices does not initialise the runtime.
  cpu = tf.config.list_physical_devices('CPU')[0]
  configured = tf.config.get_logical_device_configuration(cpu)
  if len(configured or [None]) == n:
    return
  try:
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
  except RuntimeError as error:
    current = len(tf.config.list_logical_devices('CPU'))
    if current == n:
      return
    raise RuntimeError(
        f'configure_cpu_replicas({n}) must be called before TensorFlow '
        f'initialises devices (e.g. in the launcher before other imports); '
        f'TensorFlow already initialised {current} logical CPU device(s). '
        f'Alternatively set {CPU_REPLICAS_ENV}={n} for the entry point.'
    ) from error


def configure_cpu_replicas_from_env(
    environ: Optional[Mapping[str, str]] = None) -> int:
  """Applies `CPU_REPLICAS_ENV` with `configure_cpu_replicas`.

  Entry points call this before anything else touches TensorFlow devices.

  Args:
    environ: environment to read; defaults to `os.environ`.

  Returns:
    The number of logical CPUs configured, or 0 when the variable is unset.

  Raises:
    ValueError: the variable is not an integer >= 1.
    RuntimeError: see `configure_cpu_replicas`.
  """
  environ = os.environ if environ is None else environ
  text = environ.get(CPU_REPLICAS_ENV, '').strip()
  if not text:
    return 0
  try:
    n = int(text)
  except ValueError as error:
    raise ValueError(
        f'{CPU_REPLICAS_ENV} must be an integer >= 1, got {text!r}') from error
  if n < 1:
    raise ValueError(
        f'{CPU_REPLICAS_ENV} must be an integer >= 1, got {text!r}')
  configure_cpu_replicas(n)
  return n


def export_dir_for(info: AcceleratorInfo, serving_dir: str) -> str:
  """Returns where this process saves the serving model.

  Every multi-worker process must save (saving runs collective ops), but only
  the chief's copy is kept: other processes get a fresh temporary directory
  to pass to `cleanup` afterwards.

  Args:
    info: result of `detect`.
    serving_dir: the directory the chief exports to.
  """
  if info.is_chief:
    return serving_dir
  path = tempfile.mkdtemp(
      prefix=f'autostrategy-export-{info.task_type}-{info.task_id}-')
  _TEMP_EXPORT_DIRS.add(path)
  return path


def cleanup(export_dir: str) -> None:
  """Deletes a non-chief's temporary export directory from `export_dir_for`.

  Args:
    export_dir: a directory returned by `export_dir_for` on a non-chief.

  Raises:
    ValueError: `export_dir` was not created by `export_dir_for` in this
      process (so a chief's serving directory is never deleted).
  """
  if export_dir not in _TEMP_EXPORT_DIRS:
    raise ValueError(
        f'{export_dir} is not a temporary export directory from '
        'export_dir_for; refusing to delete it')
  if os.path.exists(export_dir):
    shutil.rmtree(export_dir)
  _TEMP_EXPORT_DIRS.discard(export_dir)
