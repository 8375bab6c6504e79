"""`autostrategy rehearse`: train as a Trainer machine would, on this CPU.

For one row of the worker-pool table (`kubeflow/worker_pools.py`, the table
`compile` uses too) it runs AutoStrategyTrainer's executor for real on the
Transform output of a local run, in as many processes as the machine shape
has workers, with logical CPU devices standing in for its GPUs or TPU cores
(`tfx_autostrategy/distribute/rehearsal.py` says what else is simulated), then serves the
exported model on raw text. A shape that would fail on its machine fails here
with the reason: an op without an XLA kernel, a dynamic shape, fixed lengths
that break the TPU tiling rule, a callback its strategy does not support.

This module holds the command: its options, the machine shape of a row, the
run and its report. The Transform output it trains on comes from
`rehearse_upstream`; the worker processes and serving are `rehearse_cluster`.

Exit codes as for `autostrategy run`: 0 the rehearsal trained, exported and
served; 1 it failed (the cause on the last line); 2 bad options.
"""

import argparse
import contextlib
import json
import os
import sys
import time
from typing import Any, Dict, List

from tfx_autostrategy.cli import failures

DEFAULT_OUTPUT = 'outputs/rehearse'
# Epochs of a rehearsal: two, so that every epoch-boundary callback fires and
# the second epoch starts from the state the first one left.
EPOCHS = 2


# The Trainer's options `rehearse` takes (the machine gives the rest).
_TRAINING_OPTIONS = ('model', 'hub_model_path', 'per_replica_batch_size')


def add_parser(commands) -> None:
  """Adds `autostrategy rehearse` to the `commands` subparsers."""
  from tfx_autostrategy.cli import compile_command  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.cli import training_options  # pylint: disable=g-import-not-at-top
  parser = commands.add_parser(
      'rehearse', help='train, export and serve as a Trainer machine '
      '(GPU, TPU, several workers) would, on this CPU with stand-ins')
  compile_command.add_machine_argument(parser, required=True)
  parser.add_argument('--workers', type=int, default=1,
                      help='machines training together, chief included')
  parser.add_argument('--data', default='',
                      help='CSV directory for the Transform run when OUT has '
                      'none yet (default: the bundled sample)')
  parser.add_argument('--output', default=DEFAULT_OUTPUT,
                      help='output directory; the Transform output of an '
                      'earlier run there is reused')
  parser.add_argument('--steps', type=int, default=0,
                      help='training steps (default: two epochs of one '
                      'execution of steps_per_execution steps each)')
  training_options.add(
      parser, *_TRAINING_OPTIONS,
      hub_model_path='the encoder of --model hub (default: the checkpoint '
      'whose tokenizer the reused Transform output used)')
  parser.add_argument('--json', action='store_true',
                      help='end with one JSON line describing the rehearsal')


def shape_for(accelerator: str, workers: int):
  """The `rehearsal.MachineShape` of a worker-pool row.

  Raises:
    ValueError: unknown machine (the message lists the valid ones), an
      impossible number of workers, or a shape a CPU cannot stand in for.
  """
  from tfx_autostrategy.distribute import rehearsal  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.kubeflow import worker_pools  # pylint: disable=g-import-not-at-top
  pool = worker_pools.worker_pool(accelerator)
  worker_pools.check_workers(pool, workers)
  if pool.is_multi_host:
    # One process per host of the slice.
    workers = pool.hosts
  elif workers > 1 and pool.accelerator_count > 1:
    raise ValueError(
        f'cannot rehearse {workers} x {pool.name} here: '
        'MultiWorkerMirroredStrategy uses one CPU device per worker, so '
        f'{pool.accelerator_count} GPUs per worker cannot be stood in for; '
        f'rehearse {pool.name} alone, and the multi-worker path with a '
        'one-GPU pool such as nvidia-t4')
  return rehearsal.MachineShape(
      name=pool.name, kind=pool.kind,
      accelerators_per_worker=pool.replicas_per_host, workers=workers,
      compute_capability=pool.compute_capability, tpu_type=pool.tpu_type)


def hub_model_path(args: argparse.Namespace, text_settings) -> str:
  """The encoder a `--model hub` rehearsal trains ('' for other models).

  The ids the encoder reads must come from its own tokenizer: the reused
  Transform output's checkpoint is the default, and another one is refused.

  Raises:
    ValueError: no encoder to use, or one that the Transform output was not
      tokenised for.
  """
  if args.model != 'hub':
    return ''
  tokenised_for = text_settings.pretrained_model
  path = os.path.abspath(args.hub_model_path) if args.hub_model_path else ''
  if not path and not tokenised_for:
    raise ValueError(
        '--model hub needs --hub-model-path, and a Transform output made '
        'with its tokenizer: run `autostrategy run --model hub '
        '--hub-model-path DIR --output OUT` first')
  if tokenised_for and path and (os.path.abspath(tokenised_for) != path):
    raise ValueError(
        f'--hub-model-path {path!r} is not the checkpoint the Transform '
        f'output in OUT was tokenised for ({tokenised_for!r}): its ids would '
        'not be the encoder\'s')
  return path or tokenised_for


def run(args: argparse.Namespace) -> int:
  """`autostrategy rehearse`.

  Holds the output directory's lock (`pipeline/run_lock.py`) from before its
  first write there to the end: the rehearsal reads and may extend the MLMD
  store a concurrent `autostrategy run` on OUT would be writing.
  """
  with contextlib.ExitStack() as lock:
    return _run_locked(args, lock)


def _run_locked(args: argparse.Namespace, lock: contextlib.ExitStack) -> int:
  """`run`; the output directory's lock goes on `lock` once taken."""
  from tfx_autostrategy.distribute import distribution_plan  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import local_runner  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import run_lock  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.cli import rehearse_cluster  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.cli import rehearse_upstream  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.cli import training_options  # pylint: disable=g-import-not-at-top
  out = sys.stdout
  try:
    shape = shape_for(args.accelerator, args.workers)
    if args.steps < 0:
      raise ValueError(f'--steps must be >= 0, got {args.steps}')
    local_runner.check_output_dir(args.output)
    lock.enter_context(run_lock.hold(
        args.output, command=run_lock.command_line(getattr(args, 'argv',
                                                           None))))
    upstream = rehearse_upstream.prepare_upstream(args.data, args.output, out)
    trainer_settings = training_options.settings_from(
        args, _TRAINING_OPTIONS, epochs=EPOCHS,
        accelerator=shape.kind,
        hub_model_path=hub_model_path(args, upstream['text_settings']))
  except (ValueError, OSError, run_lock.RunLockedError) as error:
    print(f'error: {error}', file=sys.stderr)
    return failures.EXIT_BAD_INPUT
  except failures.RehearsalError as error:
    print(f'error: {error}', file=sys.stderr)
    return failures.EXIT_FAILED
  steps = args.steps or EPOCHS * distribution_plan.steps_per_execution_for(
      shape.kind)
  run_dir = os.path.join(os.path.abspath(args.output), 'rehearsal',
                         f'{shape.name}-x{shape.workers}',
                         time.strftime('%Y%m%d-%H%M%S'))
  print(f'rehearsing {shape.workers} x {shape.name}: {steps} steps in '
        f'{shape.workers} process(es) (logs: {run_dir})', file=out, flush=True)
  started = time.monotonic()
  try:
    result = rehearse_cluster.run_workers(shape, upstream, trainer_settings,
                                          steps, run_dir)
    exported = os.path.join(run_dir, 'model', 'Format-Serving')
    probabilities = rehearse_cluster.serve(
        exported, upstream['text_settings'].text_column)
  except failures.RehearsalError as error:
    print(f'error: rehearsal of {shape.name} failed: {error}',
          file=sys.stderr)
    return failures.EXIT_FAILED
  summary = _summary(shape, result, steps, exported, probabilities,
                     seconds=time.monotonic() - started)
  _print_summary(summary, out)
  if args.json:
    print(json.dumps(summary, sort_keys=True), file=out)
  return failures.EXIT_OK


def _summary(shape, result: Dict[str, Any], steps: int, exported: str,
             probabilities: List[float], seconds: float) -> Dict[str, Any]:
  """What `--json` prints: the chief's plan, what trained, what served."""
  plan = result['plan']
  steps_per_epoch = max(1, steps // EPOCHS)
  return {
      'accelerator': shape.name,
      'kind': shape.kind,
      'workers': shape.workers,
      'strategy': plan['strategy'],
      'num_replicas': plan['num_replicas'],
      'per_replica_batch_size': plan['per_replica_batch_size'],
      'global_batch_size': plan['global_batch_size'],
      'precision': plan['precision'],
      'steps_per_execution': plan['steps_per_execution'],
      'jit_compile': plan['jit_compile'],
      'xla_in_fit': plan['xla_in_fit'],
      'backup_every_steps': plan['backup_every_steps'],
      'adjustments': plan['adjustments'],
      'steps_trained': len(result.get('history', [])) * steps_per_epoch,
      'exported_model': exported,
      'serves': True,
      'probabilities': probabilities,
      'stand_ins': plan['stand_ins'],
      'seconds': round(seconds, 1),
  }


def _print_summary(summary: Dict[str, Any], out) -> None:
  """The lines a rehearsal ends with (before the `--json` line)."""
  for name in ('strategy', 'num_replicas', 'global_batch_size', 'precision',
               'steps_per_execution', 'jit_compile', 'steps_trained'):
    print(f'  {name:<20} {summary[name]}', file=out)
  for note in summary['adjustments']:
    print(f'  adjusted: {note}', file=out)
  for note in summary['stand_ins']:
    print(f'  stand-in: {note}', file=out)
  probabilities = summary['probabilities']
  print(f'  served {len(probabilities)} raw texts: '
        f'{", ".join(f"{p:.3f}" for p in probabilities)}', file=out)
  print(f'rehearsal of {summary["workers"]} x {summary["accelerator"]} passed '
        f'in {summary["seconds"]:.0f} s; exported model: '
        f'{summary["exported_model"]}', file=out)
