"""`autostrategy report OUT`: (re)writes OUT/report.html for an existing run.

The page is `tfx_autostrategy/report`'s; this command finds the run, holds
its output directory's lock while reading it, and prints where the page is.
"""

import argparse
import os
import sys

from tfx_autostrategy.cli.failures import EXIT_BAD_INPUT
from tfx_autostrategy.cli.failures import EXIT_FAILED
from tfx_autostrategy.cli.failures import EXIT_OK


def add_parser(commands) -> None:
  """Adds `autostrategy report` to the `commands` subparsers."""
  report = commands.add_parser(
      'report', help='(re)write OUT/report.html for an existing run')
  report.add_argument('output', help='the --output directory of a run')


def run(args: argparse.Namespace) -> int:
  """`autostrategy report OUT`: exit 0 with a page, 1 without, 2 no run."""
  from tfx_autostrategy.cli import run_outcome  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import local_runner  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import run_lock  # pylint: disable=g-import-not-at-top
  output_dir = os.path.abspath(args.output)
  layout = local_runner.Layout(output_dir)
  if not any(os.path.exists(path) for path in (layout.summary_path,
                                                layout.metadata_path)):
    print(f'error: {output_dir}: no run found (neither '
          f'{os.path.basename(layout.summary_path)} nor '
          f'{os.path.basename(layout.metadata_path)}); pass '
          'the --output of an `autostrategy run`', file=sys.stderr)
    return EXIT_BAD_INPUT
  try:
    # A running pipeline is still writing what the report reads.
    with run_lock.hold(output_dir, command=run_lock.command_line(
        getattr(args, 'argv', None))):
      path, model_run = run_outcome.write_report(
          output_dir, layout.log_path, sys.stdout)
      run_outcome.print_report_lines(path, model_run, sys.stdout)
  except (OSError, run_lock.RunLockedError) as error:
    print(f'error: {error}', file=sys.stderr)
    return EXIT_BAD_INPUT
  return EXIT_OK if path else EXIT_FAILED
