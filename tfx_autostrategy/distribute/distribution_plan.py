"""The distribution plan: batch, precision, steps per execution, XLA, backups.

`plan_for` turns what `devices.detect` found and the strategy built for it
(`strategies.strategy_for`) into the numbers the Trainer uses, with each
device kind's defaults and the TPU batch rounding; `resolve` runs the three
steps in one call (the Trainer, `autostrategy detect`). `apply_precision`
sets the Keras policy the plan names, and `format_plan` prints it for
`autostrategy detect`.

Nothing here reads the environment at import time, and TensorFlow is
imported inside the functions that need it, so importing this module is cheap.
"""

import dataclasses
import logging
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from tfx_autostrategy import conventions
from tfx_autostrategy.distribute import devices
from tfx_autostrategy.distribute import strategies
from tfx_autostrategy import settings


# Several steps per tf.function call hide host overhead; on TPU the host loop
# is the bottleneck for small models, on CPU there is nothing to hide.
TPU_STEPS_PER_EXECUTION = 32
GPU_STEPS_PER_EXECUTION = 4
CPU_STEPS_PER_EXECUTION = 1

# XLA pads each TPU core's batch dimension to a multiple of
# conventions.TPU_MULTIPLE (the Cloud TPU performance guide: 128 per core is
# ideal); the fixed feature lengths tile in multiples of it too.

# TPUs get no preemption notice (TF's PreemptionCheckpointHandler supports
# MultiWorkerMirroredStrategy only), so on TPU the backup is also written every
# this many steps: a preempted job loses at most that much work. Elsewhere
# BackupAndRestore saves at every epoch end.
TPU_BACKUP_EVERY_STEPS = 256

# TF's class names for strategies whose public `tf.distribute` name differs.
_PUBLIC_STRATEGY_NAMES = {
    'TPUStrategyV2': 'TPUStrategy',
    'CollectiveAllReduceStrategy': 'MultiWorkerMirroredStrategy',
    '_DefaultDistributionStrategy': 'DefaultStrategy',
}


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


# Hopper (H100, H200) is compute capability 9.0. Its tensor cores run
# bfloat16 at float16's rate (H100 datasheet: the same dense TFLOPS for
# both), and bfloat16 keeps float32's exponent range, so Keras needs no loss
# scaling (float16's LossScaleOptimizer checks every step for overflow and
# skips the steps that overflow): bfloat16 is the better default there, as
# on TPUs. Ampere and Ada (8.x) also run bfloat16 at float16's rate; they
# keep mixed_float16 here until that is measured on them.
BFLOAT16_GPU_CAPABILITY = (9, 0)
# float16 tensor cores arrived with Volta (compute capability 7.0).
FLOAT16_GPU_CAPABILITY = (7, 0)


def default_precision(info: devices.AcceleratorInfo) -> str:
  """Returns the mixed precision policy that suits the accelerator.

  bfloat16 on every TPU generation (the MXUs multiply in bfloat16); on GPUs
  by compute capability: mixed_bfloat16 from Hopper (9.0), mixed_float16
  from Volta (7.0), float32 below.
  """
  if info.kind == 'tpu':
    return 'mixed_bfloat16'
  if info.kind == 'gpu' and info.compute_capability is not None:
    capability = tuple(info.compute_capability)
    if capability >= BFLOAT16_GPU_CAPABILITY:
      return 'mixed_bfloat16'
    if capability >= FLOAT16_GPU_CAPABILITY:
      return 'mixed_float16'
  return 'float32'


def default_jit_compile(info: devices.AcceleratorInfo) -> bool:
  """Whether the train step is compiled with XLA by default.

  Always on TPU (TPUs run only XLA programs); on by default on GPUs, as in
  tf-models and Keras 3 (fused kernels, fewer launches); off on CPU, where
  XLA gains little and some ops lack XLA CPU kernels.
  """
  return info.kind in ('tpu', 'gpu')


def default_backup_every_steps(info: devices.AcceleratorInfo) -> int:
  """Step interval of BackupAndRestore saves (0: at epoch ends only)."""
  return TPU_BACKUP_EVERY_STEPS if info.kind == 'tpu' else 0


def _round_up(value: int, multiple: int) -> int:
  return -(-value // multiple) * multiple


def steps_per_execution_for(kind: str) -> int:
  """Returns the Keras steps_per_execution that suits 'tpu', 'gpu' or 'cpu'."""
  return {'tpu': TPU_STEPS_PER_EXECUTION,
          'gpu': GPU_STEPS_PER_EXECUTION}.get(kind, CPU_STEPS_PER_EXECUTION)


def default_steps_per_execution(info: devices.AcceleratorInfo) -> int:
  """Returns the Keras steps_per_execution that suits the accelerator."""
  return steps_per_execution_for(info.kind)




def plan_for(info: devices.AcceleratorInfo, strategy: Any,
             trainer_settings: settings.TrainerSettings,
             *, strategy_name: str = '',
             num_replicas: int = 0) -> DistributionPlan:
  """Derives batch sizes, precision, steps_per_execution, XLA and backups.

  On TPU the tiling rule applies: a per-replica batch that is not a multiple
  of `conventions.TPU_MULTIPLE` is rounded up to one (XLA would pad every core's
  batch to it anyway, wasting that share of each step), and the plan's
  `adjustments` say so; XLA cannot be turned off there.

  Args:
    info: result of `detect`.
    strategy: the strategy built for `info`.
    trainer_settings: the (already validated) settings whose
      `per_replica_batch_size`, `precision`, `steps_per_execution`,
      `jit_compile` and `backup_every_steps` the plan resolves; '', 0, 'auto'
      and -1 take the device's default (`default_precision`, ...).
    strategy_name: the strategy's public name, where `strategy` stands in for
      another class (rehearsals); '' names `strategy`'s own class.
    num_replicas: the replicas of the strategy `strategy` stands in for
      (rehearsals of a multi-host TPU slice, whose stand-in has one replica
      per host); 0 takes `strategy.num_replicas_in_sync`.

  Returns:
    The `DistributionPlan`.

  Raises:
    ValueError: XLA turned off on TPU (the one setting that is valid or not
      by the device; `settings.TrainerSettings` checks the rest).
  """
  per_replica_batch_size = trainer_settings.per_replica_batch_size
  jit_compile = trainer_settings.jit_compile
  adjustments = []
  if info.kind == 'tpu':
    if jit_compile == 'off':
      raise ValueError('jit_compile=off is impossible on TPU: TPUs run only '
                       'XLA-compiled programs')
    if per_replica_batch_size % conventions.TPU_MULTIPLE:
      rounded = _round_up(per_replica_batch_size, conventions.TPU_MULTIPLE)
      adjustments.append(
          f'per-replica batch {per_replica_batch_size} rounded up to '
          f'{rounded}: the TPU tiles each core\'s batch in multiples of '
          f'{conventions.TPU_MULTIPLE} (128 per core is ideal)')
      logging.warning('autostrategy: %s', adjustments[-1])
      per_replica_batch_size = rounded
  num_replicas = num_replicas or int(strategy.num_replicas_in_sync)
  class_name = type(strategy).__name__
  return DistributionPlan(
      accelerator=info.kind,
      strategy=strategy_name or _PUBLIC_STRATEGY_NAMES.get(class_name,
                                                           class_name),
      num_replicas=num_replicas,
      per_replica_batch_size=per_replica_batch_size,
      global_batch_size=per_replica_batch_size * num_replicas,
      precision=trainer_settings.precision or default_precision(info),
      steps_per_execution=(trainer_settings.steps_per_execution
                           or default_steps_per_execution(info)),
      jit_compile=(default_jit_compile(info) if jit_compile == 'auto'
                   else jit_compile == 'on'),
      backup_every_steps=(default_backup_every_steps(info)
                          if trainer_settings.backup_every_steps == -1
                          else trainer_settings.backup_every_steps),
      adjustments=tuple(adjustments),
      is_chief=info.is_chief,
      num_workers=info.num_workers,
      devices=tuple(info.devices),
      reason=info.reason)


def resolve(trainer_settings: settings.TrainerSettings, *,
            tpu: str = '',
            environ: Optional[Mapping[str, str]] = None,
            tpu_resolver_factory: Optional[Callable[..., Any]] = None,
            list_devices: Optional[Callable[[], Sequence[str]]] = None,
            dev_dir: str = '/dev',
            tpu_initializer: Optional[Callable[[Any], Any]] = None,
            strategy_factory: Optional[Callable[..., Any]] = None,
            collective_timeout_seconds: float = (
                strategies.DEFAULT_COLLECTIVE_TIMEOUT_SECONDS)
            ) -> Tuple[Any, DistributionPlan, devices.AcceleratorInfo]:
  """`devices.detect`, `strategies.strategy_for` and `plan_for` in one call.

  Does not apply the precision policy: the caller does (`apply_precision`)
  right before building the model, and resets it afterwards.

  Args:
    trainer_settings: its `accelerator` is what `devices.detect` insists on;
      the plan's knobs: see `plan_for`.
    tpu, environ, tpu_resolver_factory, list_devices, dev_dir: see
      `devices.detect`.
    tpu_initializer, strategy_factory, collective_timeout_seconds: see
      `strategies.strategy_for`.

  Returns:
    (strategy, plan, info).

  Raises:
    devices.AcceleratorNotFoundError: see `devices.detect`.
    ValueError: see `devices.detect` and `plan_for`.
  """
  info = devices.detect(trainer_settings.accelerator, tpu=tpu, environ=environ,
                        tpu_resolver_factory=tpu_resolver_factory,
                        list_devices=list_devices, dev_dir=dev_dir)
  strategy = strategies.strategy_for(
      info, tpu_initializer=tpu_initializer, strategy_factory=strategy_factory,
      collective_timeout_seconds=collective_timeout_seconds)
  return strategy, plan_for(info, strategy, trainer_settings), info


def apply_precision(policy: str) -> None:
  """Sets the global Keras mixed precision policy.

  Args:
    policy: one of `settings.PRECISIONS` (a plan's `precision`).
  """
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
