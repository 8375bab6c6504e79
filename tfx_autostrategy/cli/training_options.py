"""The training options, each declared once.

`run` and `detect` (the accelerator family and the plan's knobs), `compile`
and `rehearse` add the options they take from this one table, in the order
they list them, so a flag means the same thing, with the same default and
help, in every command. Values are checked once, by `settings.TrainerSettings`.
"""

import argparse
import dataclasses
from typing import Any, Callable, Dict, Sequence, Tuple

from tfx_autostrategy import settings

_Option = Callable[[settings.TrainerSettings], Tuple[str, Dict[str, Any]]]

_OPTIONS: Dict[str, _Option] = {
    'accelerator': lambda d: ('--accelerator', dict(
        choices=settings.ACCELERATORS, default=d.accelerator,
        help='auto-detect, or insist on one (error if absent)')),
    'cpu_replicas': lambda d: ('--cpu-replicas', dict(
        type=int, default=0,
        help='split the CPU into N logical devices: a real '
        'MirroredStrategy with N replicas')),
    'per_replica_batch_size': lambda d: ('--per-replica-batch-size', dict(
        type=int, default=d.per_replica_batch_size)),
    'precision': lambda d: ('--precision', dict(
        default='', help="mixed precision policy ('' = device default)")),
    'steps_per_execution': lambda d: ('--steps-per-execution', dict(
        type=int, default=0, help='0 = device default')),
    'jit_compile': lambda d: ('--jit-compile', dict(
        choices=settings.JIT_COMPILE_CHOICES, default=d.jit_compile,
        help='XLA-compile the train step (auto: on for TPUs and GPUs, off on '
        'CPU; TPUs refuse off)')),
    'backup_every_steps': lambda d: ('--backup-every-steps', dict(
        type=int, default=d.backup_every_steps,
        help='BackupAndRestore also saves every N steps (-1: device default, '
        '256 on TPU, which gets no preemption notice; 0: only at epoch ends)')),
    'epochs': lambda d: ('--epochs', dict(type=int, default=d.epochs)),
    'model': lambda d: ('--model', dict(choices=settings.MODELS,
                                        default=d.model)),
    'hub_model_path': lambda d: ('--hub-model-path', dict(
        default='', help='local SavedModel/TF Hub encoder for --model hub')),
    'learning_rate': lambda d: ('--learning-rate', dict(
        type=float, default=d.learning_rate,
        help="peak learning rate; 0 (default) = the model's own: 2e-3, or "
        '3e-5 to fine-tune a pretrained encoder (hub)')),
    'input_cache_mb': lambda d: ('--input-cache-mb', dict(
        type=int, default=d.input_cache_mb,
        help='memory for keeping decoded training/eval examples after the '
        'first epoch; 0 = read the TFRecords every epoch')),
}


# What `run` and `detect` take to pick the accelerator and plan the training.
PLAN_OPTIONS = ('accelerator', 'cpu_replicas', 'per_replica_batch_size',
                'precision', 'steps_per_execution', 'jit_compile',
                'backup_every_steps')
# What `run` takes besides: the model and how it trains.
RUN_OPTIONS = ('epochs', 'model', 'hub_model_path', 'learning_rate',
               'input_cache_mb')


def add(parser: argparse.ArgumentParser, *names: str,
        **helps: str) -> None:
  """Adds the named training options to `parser`, in that order.

  Args:
    parser: a command's parser.
    *names: keys of the table (the `TrainerSettings` field names).
    **helps: a command's own help text for an option, by name (e.g. what
      `rehearse --hub-model-path` defaults to).
  """
  defaults = settings.TrainerSettings()
  for name in names:
    flag, kwargs = _OPTIONS[name](defaults)
    if name in helps:
      kwargs['help'] = helps[name]
    parser.add_argument(flag, **kwargs)


def settings_from(args: argparse.Namespace, names: Sequence[str],
                  **overrides: Any) -> settings.TrainerSettings:
  """The `TrainerSettings` of the options `names` a command parsed.

  The one place a command's options become settings, and so the one check
  of their values (`settings.TrainerSettings` raises ValueError, which the
  commands print as `error: ...`).

  Args:
    args: the parsed options.
    names: keys of the table the command added (`add`); those that are not
      `TrainerSettings` fields (`cpu_replicas`: how this process splits its
      CPU, `tf_env.prepare`) are skipped.
    **overrides: settings the command sets itself (e.g. `rehearse`'s epochs
      and accelerator, an absolute `hub_model_path`).
  """
  fields = {f.name for f in dataclasses.fields(settings.TrainerSettings)}
  values = {name: getattr(args, name) for name in names if name in fields}
  values.update(overrides)
  return settings.TrainerSettings(**values)
