"""`autostrategy`: the argument parser and the commands it dispatches to.

Only the parser and the short commands live here; `autostrategy run` is
`run_command.run` (with `run_preflight`, `console`, `run_outcome`),
`autostrategy compile` is `compile_command.run` (its options in
`compile_command_parser`), and the
exit codes and how failures are told are in `failures` (also in the README).
Building the parser imports no TFX, TensorFlow or benchmark code.
"""

import argparse
import json
import os
import sys
from typing import Optional, Sequence

from tfx_autostrategy import compile_command_parser
from tfx_autostrategy import data_options
from tfx_autostrategy import training_options
from tfx_autostrategy.failures import EXIT_BAD_INPUT
from tfx_autostrategy.failures import EXIT_FAILED
from tfx_autostrategy.failures import EXIT_OK


def build_parser() -> argparse.ArgumentParser:
  """The command-line interface."""
  from tfx_autostrategy import conventions  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser(
      prog='autostrategy',
      description='Accelerator-aware TFX text classification pipeline.')
  commands = parser.add_subparsers(dest='command', required=True)

  run = commands.add_parser('run', help='run the whole pipeline locally')
  run.add_argument('--data', default='',
                   help='directory of CSV files (train/ and eval/ '
                   'subdirectories are used as splits); default: the bundled '
                   'synthetic sample')
  run.add_argument('--output', default='outputs/run',
                   help='output directory (pipeline root, MLMD, model, logs)')
  data_options.add_arguments(run)
  training_options.add(run, *training_options.RUN_OPTIONS)
  run.add_argument('--auc-threshold', type=float,
                   default=conventions.DEFAULT_AUC_THRESHOLD,
                   help='Evaluator blesses (and Pusher pushes) at or above')
  run.add_argument('--min-auc-gain', type=float, default=0.0,
                   help='required AUC gain over the serving (latest blessed) '
                   'model; 0 = not worse, negative allows a bounded '
                   'regression; the first run is judged by --auc-threshold '
                   'alone')
  run.add_argument('--allow-anomalies', action='store_true',
                   help='go on despite ExampleValidator anomalies')
  run.add_argument('--no-cache', action='store_true',
                   help='re-run every component')
  run.add_argument('--beam-arg', action='append', default=[],
                   help='extra Beam pipeline argument (repeatable), e.g. '
                   '--beam-arg=--direct_running_mode=multi_processing')
  run.add_argument('--json', action='store_true',
                   help='end with one JSON line: pushed_model, blessed, metrics')
  training_options.add(run, *training_options.PLAN_OPTIONS)

  report = commands.add_parser(
      'report', help='(re)write OUT/report.html for an existing run')
  report.add_argument('output', help='the --output directory of a run')

  detect = commands.add_parser(
      'detect', help='show the strategy the Trainer would use here')
  detect.add_argument('--json', action='store_true')
  training_options.add(detect, *training_options.PLAN_OPTIONS)
  compile_command_parser.add_parser(commands)
  rehearse = commands.add_parser(
      'rehearse', help='train, export and serve as a Trainer machine '
      '(GPU, TPU, several workers) would, on this CPU with stand-ins')
  from tfx_autostrategy import rehearse as rehearse_lib  # pylint: disable=g-import-not-at-top
  rehearse_lib.add_arguments(rehearse)
  # The benchmarks are not installed (bench/ in a checkout); the command
  # stays so that `autostrategy bench ...` says where they went.
  commands.add_parser(
      'bench', help='not installed: run `make bench` in a checkout')
  return parser


def cmd_run(args: argparse.Namespace) -> int:
  """`autostrategy run`: see `run_command.run`."""
  from tfx_autostrategy import run_command  # pylint: disable=g-import-not-at-top
  defaults = vars(build_parser().parse_args(['run']))
  return run_command.run(args, defaults=defaults)


def cmd_report(args: argparse.Namespace) -> int:
  """`autostrategy report OUT`: (re)writes OUT/report.html."""
  from tfx_autostrategy.pipeline import local_runner  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import report_data  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import run_lock  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy import run_outcome  # pylint: disable=g-import-not-at-top
  output_dir = os.path.abspath(args.output)
  if not any(os.path.exists(os.path.join(output_dir, name)) for name in (
      report_data.SUMMARY_FILE, report_data.METADATA_FILE)):
    print(f'error: {output_dir}: no run found (neither '
          f'{report_data.SUMMARY_FILE} nor {report_data.METADATA_FILE}); pass '
          'the --output of an `autostrategy run`', file=sys.stderr)
    return EXIT_BAD_INPUT
  try:
    # A running pipeline is still writing what the report reads.
    with run_lock.hold(output_dir, command=run_lock.command_line(
        getattr(args, 'argv', None))):
      path, model_run = run_outcome.write_report(
          output_dir, local_runner.Layout(output_dir).log_path, sys.stdout)
      run_outcome.print_report_lines(path, model_run, sys.stdout)
  except (OSError, run_lock.RunLockedError) as error:
    print(f'error: {error}', file=sys.stderr)
    return EXIT_BAD_INPUT
  return EXIT_OK if path else EXIT_FAILED


def cmd_detect(args: argparse.Namespace) -> int:
  """`autostrategy detect`."""
  from tfx_autostrategy.distribute import devices  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.distribute import distribution_plan  # pylint: disable=g-import-not-at-top
  try:
    _, plan, _ = distribution_plan.resolve(
        training_options.settings_from(args, training_options.PLAN_OPTIONS))
  except (devices.AcceleratorNotFoundError, ValueError) as error:
    print(f'error: {error}', file=sys.stderr)
    return EXIT_BAD_INPUT
  if args.json:
    print(json.dumps(plan.to_dict(), sort_keys=True))
  else:
    print(distribution_plan.format_plan(plan))
  return EXIT_OK


def cmd_compile(args: argparse.Namespace) -> int:
  """`autostrategy compile`: see `compile_command.run`."""
  from tfx_autostrategy import compile_command  # pylint: disable=g-import-not-at-top
  return compile_command.run(args)


def cmd_bench(args: argparse.Namespace) -> int:
  """`autostrategy bench`."""
  del args  # Whatever the options, the suite is not here.
  print('error: the benchmarks are not part of the installed package; run '
        '`make bench` (or `python -m bench.suite --help`) in a checkout',
        file=sys.stderr)
  return EXIT_BAD_INPUT


def cmd_rehearse(args: argparse.Namespace) -> int:
  """`autostrategy rehearse`."""
  from tfx_autostrategy import rehearse as rehearse_lib  # pylint: disable=g-import-not-at-top
  return rehearse_lib.run(args)


COMMANDS = {'run': cmd_run, 'detect': cmd_detect, 'compile': cmd_compile,
            'rehearse': cmd_rehearse, 'bench': cmd_bench,
            'report': cmd_report}


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Entry point of the `autostrategy` console script."""
  parser = build_parser()
  args, unknown = parser.parse_known_args(argv)
  if unknown and args.command != 'bench':  # `bench` takes the suite's options.
    parser.error(f'unrecognized arguments: {" ".join(unknown)}')
  args.argv = list(sys.argv[1:] if argv is None else argv)  # For run_lock.
  from tfx_autostrategy import tf_env  # pylint: disable=g-import-not-at-top
  tf_env.prepare(getattr(args, 'cpu_replicas', 0))
  return COMMANDS[args.command](args)


if __name__ == '__main__':
  sys.exit(main())
