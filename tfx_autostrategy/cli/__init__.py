"""`autostrategy`: one module per command, and the parser that joins them.

  run       run_command.py       the whole pipeline locally; its steps:
                                 run_preflight (options -> settings, checks
                                 before TFX loads), console (log capture,
                                 progress), run_outcome (summary, report,
                                 last lines)
  detect    detect_command.py    the strategy and plan the Trainer would use
  report    report_command.py    (re)write OUT/report.html
  compile   compile_command.py   the Kubeflow / Vertex AI pipeline file
  rehearse  rehearse_command.py  a Trainer machine on CPU stand-ins; its
                                 steps: rehearse_upstream (the Transform
                                 output), rehearse_cluster and
                                 rehearse_worker (the worker processes)

Each command module has `add_parser(commands)` and `run(args) -> exit code`.
The options several commands share are declared once: `training_options`
(the Trainer's), `data_options` (the CSV columns and lengths); `failures`
holds the exit codes and how a failure is told. Building the parser imports
no TFX, TensorFlow or benchmark code.

May import anything in the package; nothing imports it but the console
script (setup.py) and `python -m tfx_autostrategy.cli`.
"""

import argparse
import importlib
import sys
from typing import Optional, Sequence

from tfx_autostrategy.cli.failures import EXIT_BAD_INPUT

# `autostrategy <command>` -> its module, in the order `--help` lists them.
COMMANDS = {
    'run': 'run_command',
    'report': 'report_command',
    'detect': 'detect_command',
    'compile': 'compile_command',
    'rehearse': 'rehearse_command',
}


def _module(command: str):
  return importlib.import_module(f'{__name__}.{COMMANDS[command]}')


def build_parser() -> argparse.ArgumentParser:
  """The command-line interface."""
  parser = argparse.ArgumentParser(
      prog='autostrategy',
      description='Accelerator-aware TFX text classification pipeline.')
  commands = parser.add_subparsers(dest='command', required=True)
  for command in COMMANDS:
    _module(command).add_parser(commands)
  # The benchmarks are not installed (bench/ in a checkout); the command
  # stays so that `autostrategy bench ...` says where they went.
  commands.add_parser(
      'bench', help='not installed: run `make bench` in a checkout')
  return parser


def _bench(args: argparse.Namespace) -> int:
  """`autostrategy bench`."""
  del args  # Whatever the options, the suite is not here.
  print('error: the benchmarks are not part of the installed package; run '
        '`make bench` (or `python -m bench.suite --help`) in a checkout',
        file=sys.stderr)
  return EXIT_BAD_INPUT


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Entry point of the `autostrategy` console script."""
  parser = build_parser()
  args, unknown = parser.parse_known_args(argv)
  if unknown and args.command != 'bench':  # `bench` takes the suite's options.
    parser.error(f'unrecognized arguments: {" ".join(unknown)}')
  args.argv = list(sys.argv[1:] if argv is None else argv)  # For run_lock.
  from tfx_autostrategy import tf_env  # pylint: disable=g-import-not-at-top
  tf_env.prepare(getattr(args, 'cpu_replicas', 0))
  if args.command == 'bench':
    return _bench(args)
  return _module(args.command).run(args)
