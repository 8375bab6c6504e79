"""Stand-ins that let `run_fn` rehearse another machine shape on this CPU.

A rehearsal fakes only what a CPU host cannot have, and says so:

- device discovery: the device list the machine would show (its GPUs), and
  for TPUs the variable a Cloud TPU VM's runtime sets, so that `detect` takes
  its TPU branch;
- the TPU runtime: a resolver for the VM's local chips and a TPU system
  initialiser that does nothing;
- a strategy class that cannot exist without its devices, replaced by the
  nearest class that can: `TPUStrategy` and `MirroredStrategy` over GPUs
  become `MirroredStrategy` over as many logical CPU devices as the machine
  has cores or GPUs (the launcher splits the CPU before TensorFlow starts);
  `MultiWorkerMirroredStrategy` stays itself, over local processes, with one
  CPU device per worker instead of its GPUs; a multi-host TPU slice becomes
  `MultiWorkerMirroredStrategy` over one local process per host, each
  replica taking its host's whole batch, so that the global batch and the
  per-host input shards are the slice's (`StandInStrategies`).

Everything after that is the Trainer's own code: the plan (global batch,
precision, steps per execution, XLA, backup interval), the callbacks, `fit`,
`BackupAndRestore`, the export. Two limits of a CPU are handled explicitly:
XLA on CPU cannot compile a step whose variables sit on several logical CPU
devices ("Trying to access resource ... located in device CPU:1 from device
CPU:0"), so with several stand-in replicas the train step is XLA-compiled and
run separately on one device at the per-replica batch
(`check_xla_train_step`); and a callback's supported-strategy list is checked
against the class the machine would really build (`check_callbacks`), since
the stand-in class may be accepted where the real one is not.

This module imports TensorFlow only inside functions.
"""

import dataclasses
import logging
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tfx_autostrategy.distribute import devices as devices_lib
from tfx_autostrategy.distribute import distribution_plan
from tfx_autostrategy.distribute import strategies
from tfx_autostrategy import settings

# Cloud TPU VM runtimes set this; `detect` reads it as a TPU VM probe.
_TPU_VM_VARIABLE = 'TPU_ACCELERATOR_TYPE'


@dataclasses.dataclass(frozen=True)
class MachineShape:
  """The machine a rehearsal stands in for (one row of the worker pools).

  Attributes:
    name: the `--machine` value (`kubeflow/worker_pools.py`).
    kind: 'cpu', 'gpu' or 'tpu'.
    accelerators_per_worker: GPUs or TPU devices (replicas) of one machine
      (one host of a TPU slice), 0 for CPU.
    workers: machines training together (for a TPU, the slice's hosts).
    compute_capability: GPU compute capability, e.g. (7, 5) for a T4.
    tpu_type: TPU accelerator type as the TPU VM runtime names it ('v3-8').
  """
  name: str
  kind: str
  accelerators_per_worker: int = 0
  workers: int = 1
  compute_capability: Optional[Tuple[int, int]] = None
  tpu_type: str = ''

  @property
  def is_multi_host_tpu(self) -> bool:
    """A TPU slice of several hosts (`workers` counts its hosts)."""
    return self.kind == 'tpu' and self.workers > 1

  @property
  def replicas_per_worker(self) -> int:
    """Replicas one process trains (logical CPU devices it needs)."""
    if self.workers > 1:
      # MultiWorkerMirroredStrategy uses one CPU device per worker.
      return 1
    return max(self.accelerators_per_worker, 1)

  def to_dict(self) -> Dict[str, Any]:
    values = dataclasses.asdict(self)
    if self.compute_capability is not None:
      values['compute_capability'] = list(self.compute_capability)
    return values

  @classmethod
  def from_dict(cls, values: Dict[str, Any]) -> 'MachineShape':
    values = dict(values)
    if values.get('compute_capability') is not None:
      values['compute_capability'] = tuple(values['compute_capability'])
    return cls(**values)


class StandInTPUResolver:
  """A TPU VM's local-chip resolver (master ''), for `detect` and `strategy_for`."""

  def __init__(self, cores: int):
    self._cores = cores

  def master(self) -> str:
    return ''

  def num_accelerators(self) -> Dict[str, int]:
    return {'TPU': self._cores}


def _cpu_devices(count: int) -> List[str]:
  return [f'/device:CPU:{i}' for i in range(count)]


class StandInStrategies:
  """`strategy_factory` for `strategies.strategy_for` that builds stand-ins.

  Records the class and arguments the machine would build (`intended`), and
  builds the nearest class that exists on this CPU.
  """

  def __init__(self, shape: MachineShape):
    self.shape = shape
    self.intended: Tuple[str, Dict[str, Any]] = ('', {})
    self.notes: List[str] = []
    self.xla_in_fit = True

  def __call__(self, name: str, **kwargs) -> Any:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    self.intended = (name, dict(kwargs))
    replicas = self.shape.replicas_per_worker
    if name == 'TPUStrategy' and self.shape.workers > 1:
      return self._multi_host_tpu(tf, kwargs)
    if name == 'TPUStrategy':
      self.notes.append(
          f'TPUStrategy over {replicas} TPU cores -> MirroredStrategy over '
          f'{replicas} logical CPU devices')
      self.xla_in_fit = replicas == 1
      return tf.distribute.MirroredStrategy(devices=_cpu_devices(replicas))
    if name == 'MirroredStrategy':
      devices = list(kwargs.get('devices') or [])
      if any('GPU' in d.upper() for d in devices):
        self.notes.append(
            f'MirroredStrategy over {len(devices)} GPU(s) -> MirroredStrategy '
            f'over {len(devices)} logical CPU device(s)')
        devices = _cpu_devices(len(devices))
      self.xla_in_fit = len(devices) == 1
      return tf.distribute.MirroredStrategy(devices=devices)
    if name == 'MultiWorkerMirroredStrategy':
      resolver = kwargs['cluster_resolver']
      gpus = resolver.num_accelerators().get('GPU', 0)
      if gpus:
        self.notes.append(
            f'MultiWorkerMirroredStrategy with {gpus} GPU(s) per worker -> '
            'the same strategy with one CPU device per worker')
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            resolver.cluster_spec(), task_type=resolver.task_type,
            task_id=resolver.task_id, num_accelerators={'GPU': 0},
            rpc_layer=resolver.rpc_layer)
      self.notes.append(
          f'{self.shape.workers} Vertex AI machines -> {self.shape.workers} '
          'local processes with the CLUSTER_SPEC Vertex AI writes, on '
          'localhost ports')
      # XLA cannot compile the cross-worker collectives for CPU devices
      # (no CollectiveGatherV2 kernel for XLA_CPU_JIT); on GPUs it can.
      self.xla_in_fit = False
      return tf.distribute.MultiWorkerMirroredStrategy(
          cluster_resolver=resolver,
          communication_options=kwargs.get('communication_options'))
    return tf.distribute.get_strategy()

  def _multi_host_tpu(self, tf, kwargs) -> Any:
    """A multi-host slice: one MultiWorkerMirroredStrategy process per host."""
    del kwargs  # The TPU resolver; the processes' TF_CONFIG names the hosts.
    hosts, per_host = self.shape.workers, self.shape.accelerators_per_worker
    self.notes.append(
        f'TPUStrategy over {hosts} hosts x {per_host} TPU devices -> '
        f'MultiWorkerMirroredStrategy over {hosts} local processes, one per '
        'host, with one CPU replica each (it takes no logical CPU devices), '
        f'whose batch is the host\'s whole share ({per_host} x the '
        'per-replica batch): the global batch and each host\'s input shard '
        'are the slice\'s')
    self.notes.append(
        'the client: TensorFlow drives a slice from host 0 alone (its '
        'TPUStrategy runs one input pipeline per host through the pod '
        'runtime, and host 0 exports); here every host process runs the '
        'Trainer, and only host 0\'s export is kept')
    self.xla_in_fit = False
    return tf.distribute.MultiWorkerMirroredStrategy(
        cluster_resolver=tf.distribute.cluster_resolver
        .TFConfigClusterResolver(),
        communication_options=tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=strategies.DEFAULT_COLLECTIVE_TIMEOUT_SECONDS))

  def check_callbacks(self, callbacks: Sequence[Any]) -> None:
    """Raises as `fit` would on the machine for an unsupported strategy.

    Keras callbacks that support only some strategies list them in
    `_supported_strategies` (tf_keras's `BackupAndRestore` does) and check
    the model's strategy at the start of `fit`; the stand-in may pass where
    the intended class would not, so check the intended class here.

    Raises:
      NotImplementedError: a callback does not support the intended class.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    name = self.intended[0]
    if name in ('', 'default'):
      return
    intended = getattr(tf.distribute, name)
    for callback in callbacks:
      supported = getattr(callback, '_supported_strategies', None)
      if supported and not issubclass(intended, tuple(supported)):
        raise NotImplementedError(
            f'{type(callback).__name__} does not support {name}, which '
            f'{self.shape.name} would use: `fit` would fail there with the '
            'same error')


def environ_for(shape: MachineShape) -> Dict[str, str]:
  """The environment `detect` reads on that machine (TPU VM variable)."""
  return {_TPU_VM_VARIABLE: shape.tpu_type} if shape.kind == 'tpu' else {}


def devices_for(shape: MachineShape) -> List[str]:
  """The device names TensorFlow would list on one machine of `shape`."""
  devices = ['/device:CPU:0']
  if shape.kind == 'gpu':
    devices += [f'/device:GPU:{i}'
                for i in range(shape.accelerators_per_worker)]
  return devices


def stand_in_notes(shape: MachineShape) -> List[str]:
  """What is simulated for `shape` beyond the strategy class, in words."""
  notes = []
  if shape.kind == 'gpu':
    notes.append(
        f'device discovery: {shape.accelerators_per_worker} GPU(s) of '
        f'compute capability {".".join(map(str, shape.compute_capability))} '
        'listed without CUDA')
  if shape.kind == 'tpu':
    notes.append(f'device discovery: a {shape.tpu_type} TPU VM '
                 f'({_TPU_VM_VARIABLE}={shape.tpu_type})')
    notes.append('TPU runtime: the local-chip resolver and TPU system '
                 'initialisation do nothing')
  if shape.kind in ('gpu', 'tpu'):
    notes.append('arithmetic: the mixed precision policy runs on CPU kernels')
  return notes


def resolve(shape: MachineShape, trainer_settings: settings.TrainerSettings
           ) -> Tuple[Any, distribution_plan.DistributionPlan,
                      devices_lib.AcceleratorInfo, StandInStrategies]:
  """`distribution_plan.resolve` as it runs on `shape`, with stand-ins.

  The current process must have `shape.replicas_per_worker` logical CPU
  devices (`cpu_replicas.configure_cpu_replicas`), and for several workers
  the CLUSTER_SPEC or TF_CONFIG of its task.

  Returns:
    (strategy, plan, info, stand-ins); the plan names the class the machine
    would build, and carries the machine's precision, steps per execution,
    XLA and backup defaults.
  """
  import os  # pylint: disable=g-import-not-at-top
  stand_ins = StandInStrategies(shape)
  environ = {**os.environ, **environ_for(shape)}
  info = devices_lib.detect(
      shape.kind, environ=environ, list_devices=lambda: devices_for(shape),
      tpu_resolver_factory=lambda **_: StandInTPUResolver(
          shape.accelerators_per_worker),
      dev_dir='/nonexistent')
  if info.kind == 'gpu':
    info = dataclasses.replace(
        info, compute_capability=shape.compute_capability,
        reason=info.reason.replace(
            'compute capability None',
            f'compute capability {shape.compute_capability}'))
  strategy = strategies.strategy_for(
      info, tpu_initializer=lambda resolver: None,
      strategy_factory=stand_ins)
  intended = stand_ins.intended[0]
  plan = distribution_plan.plan_for(
      info, strategy, trainer_settings,
      strategy_name='DefaultStrategy' if intended in ('', 'default')
      else intended,
      num_replicas=(shape.accelerators_per_worker * shape.workers
                    if shape.is_multi_host_tpu else 0))
  logging.info('autostrategy: rehearsing %s; stand-ins: %s', shape.name,
               stand_in_notes(shape) + stand_ins.notes)
  return strategy, plan, info, stand_ins


def check_xla_train_step(build_and_compile, dataset, steps: int) -> None:
  """Compiles the train step with XLA on one device and runs `steps` steps.

  For stand-ins whose replicas are logical CPU devices, where XLA cannot
  span the devices: the same model, settings and precision policy, at the
  per-replica batch, under the default strategy.

  Args:
    build_and_compile: `f(jit_compile) -> compiled model`, the Trainer's own
      model construction and compile.
    dataset: batches of the per-replica size.
    steps: steps to run (at least one execution).

  Raises:
    Whatever XLA raises for an op without an XLA kernel or a dynamic shape.
  """
  model = build_and_compile(True)
  model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0)
