"""Accelerator detection and the matching strategy: the front door.

One code path for TPU, multi-worker, GPU and CPU runs: `detect` finds out what
this process can use, `strategy_for` builds the strategy, and `plan_for` turns
both into the numbers the Trainer needs (global batch, precision,
steps_per_execution). `resolve` does all three.

The work is done by one module per responsibility; this module names their
public API in one place, so callers (the Trainer, the CLI, rehearsals, the
compiler) import one name:

- `cluster`: TF_CONFIG / Vertex AI CLUSTER_SPEC parsing, which process is chief;
- `devices`: TPU probes, device lists, `detect` and its decision order;
- `strategies`: strategy construction, the bounded wait for a remote TPU and
  the multi-worker start-up watchdog;
- `distribution_plan`: `DistributionPlan`, the per-device defaults (precision,
  steps per execution, XLA, backups) and TPU batch rounding;
- `cpu_replicas`: logical CPU devices as replicas.

The Trainer's export directories (`export_dir_for`, `cleanup`) live with the
Trainer (`components/trainer/export.py`).

Nothing here reads the environment at import time, and TensorFlow is
imported inside the functions that need it, so importing this module is cheap.
"""

from typing import Any, Callable, Mapping, Optional, Sequence, Tuple

from tfx_autostrategy.components import cluster
from tfx_autostrategy.components import cpu_replicas
from tfx_autostrategy.components import devices
from tfx_autostrategy.components import distribution_plan
from tfx_autostrategy.components import strategies

# The public API, re-exported under the names callers have always used.
ACCELERATORS = devices.ACCELERATORS
AcceleratorInfo = devices.AcceleratorInfo
AcceleratorNotFoundError = devices.AcceleratorNotFoundError
detect = devices.detect

chief_from_environ = cluster.chief_from_environ

TPUUnreachableError = strategies.TPUUnreachableError
DEFAULT_TPU_WAIT_SECONDS = strategies.DEFAULT_TPU_WAIT_SECONDS
TPU_WAIT_INTERVAL_SECONDS = strategies.TPU_WAIT_INTERVAL_SECONDS
DEFAULT_COLLECTIVE_TIMEOUT_SECONDS = (
    strategies.DEFAULT_COLLECTIVE_TIMEOUT_SECONDS)
initialize_tpu = strategies.initialize_tpu
strategy_for = strategies.strategy_for

PRECISIONS = distribution_plan.PRECISIONS
JIT_COMPILE_CHOICES = distribution_plan.JIT_COMPILE_CHOICES
TPU_STEPS_PER_EXECUTION = distribution_plan.TPU_STEPS_PER_EXECUTION
GPU_STEPS_PER_EXECUTION = distribution_plan.GPU_STEPS_PER_EXECUTION
CPU_STEPS_PER_EXECUTION = distribution_plan.CPU_STEPS_PER_EXECUTION
TPU_BATCH_MULTIPLE = distribution_plan.TPU_BATCH_MULTIPLE
TPU_BACKUP_EVERY_STEPS = distribution_plan.TPU_BACKUP_EVERY_STEPS
DistributionPlan = distribution_plan.DistributionPlan
default_precision = distribution_plan.default_precision
default_jit_compile = distribution_plan.default_jit_compile
default_backup_every_steps = distribution_plan.default_backup_every_steps
default_steps_per_execution = distribution_plan.default_steps_per_execution
steps_per_execution_for = distribution_plan.steps_per_execution_for
plan_for = distribution_plan.plan_for
apply_precision = distribution_plan.apply_precision
format_plan = distribution_plan.format_plan

CPU_REPLICAS_ENV = cpu_replicas.CPU_REPLICAS_ENV
configure_cpu_replicas = cpu_replicas.configure_cpu_replicas
configure_cpu_replicas_from_env = cpu_replicas.configure_cpu_replicas_from_env


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
