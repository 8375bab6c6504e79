"""`autostrategy run`: its options, preflight, the lock, the pipeline, its ending.

`add_parser` declares the options (building them imports no TFX). The steps
of `run` live apart: `run_preflight` (options -> settings, checks before
TFX is imported), `console` (log capture, progress lines), `run_outcome`
(summary.json, report, last lines, exit code) and `failures` (exit codes,
causes).
"""

import argparse
import contextlib
import logging
import os
import sys
import time
from typing import Any, Mapping, Optional

from tfx_autostrategy.cli import console
from tfx_autostrategy.cli import data_options
from tfx_autostrategy.cli import failures
from tfx_autostrategy.cli import run_outcome
from tfx_autostrategy.cli import run_preflight
from tfx_autostrategy.cli import training_options
from tfx_autostrategy import conventions
from tfx_autostrategy.pipeline import interrupts
from tfx_autostrategy.pipeline import local_runner
from tfx_autostrategy.pipeline import run_lock


def add_parser(commands) -> None:
  """Adds `autostrategy run` to the `commands` subparsers."""
  run_ = commands.add_parser('run', help='run the whole pipeline locally')
  run_.add_argument('--data', default='',
                    help='directory of CSV files (train/ and eval/ '
                    'subdirectories are used as splits); default: the bundled '
                    'synthetic sample')
  run_.add_argument('--output', default='outputs/run',
                    help='output directory (pipeline root, MLMD, model, logs)')
  data_options.add_arguments(run_)
  training_options.add(run_, *training_options.RUN_OPTIONS)
  run_.add_argument('--auc-threshold', type=float,
                    default=conventions.DEFAULT_AUC_THRESHOLD,
                    help='Evaluator blesses (and Pusher pushes) at or above')
  run_.add_argument('--min-auc-gain', type=float, default=0.0,
                    help='required AUC gain over the serving (latest blessed) '
                    'model; 0 = not worse, negative allows a bounded '
                    'regression; the first run is judged by --auc-threshold '
                    'alone')
  run_.add_argument('--allow-anomalies', action='store_true',
                    help='go on despite ExampleValidator anomalies')
  run_.add_argument('--no-cache', action='store_true',
                    help='re-run every component')
  run_.add_argument('--beam-arg', action='append', default=[],
                    help='extra Beam pipeline argument (repeatable), e.g. '
                    '--beam-arg=--direct_running_mode=multi_processing')
  run_.add_argument('--json', action='store_true',
                    help='end with one JSON line: pushed_model, blessed, '
                    'metrics')
  training_options.add(run_, *training_options.PLAN_OPTIONS)


def default_options() -> Mapping[str, Any]:
  """The options of a bare `autostrategy run`."""
  parser = argparse.ArgumentParser()
  add_parser(parser.add_subparsers(dest='command'))
  return vars(parser.parse_args(['run']))


def run(args: argparse.Namespace) -> int:
  """`autostrategy run`.

  Checks the data, options and output directory first (exit 2, in a second or
  two: TFX is imported only after), takes the output directory's lock (exit 2
  if another run holds it), then runs the pipeline. Whatever happens, the
  cause is on the last line of stderr and summary.json under the output
  describes this run.

  Args:
    args: the parsed `run` options.
  """
  defaults = default_options()  # The report names the settings that differ.
  # A first SIGINT / SIGTERM stops the run (one line, summary, exit 130 /
  # 143); a second one exits at once. The lock is released when the run
  # returns, after summary.json is written.
  with interrupts.stop_on_signals() as stops:
    try:
      with contextlib.ExitStack() as lock:
        return _run_locked(args, defaults, lock, stops)
    except interrupts.Interrupted as stop:
      # Outside the pipeline: during the checks, or after the run's outcome
      # was printed; nothing of the pipeline was cut short.
      print(f'interrupted by {stop.signal_name} before the pipeline ran or '
            'after it ended; a rerun of the same command resumes',
            file=sys.stderr)
      return stop.exit_code


def _run_locked(args: argparse.Namespace, defaults: Mapping[str, Any],
                lock: contextlib.ExitStack, stops: interrupts.Stops) -> int:
  """`run`; the output directory's lock goes on `lock` once taken.

  `stops.check()` runs before each component starts and when the pipeline
  returns, so a signal whose exception a component's code swallowed still
  stops the run before anything else (the Pusher) runs.
  """
  out = sys.stdout
  try:
    checked = run_preflight.check(args, lock)
  except (ValueError, OSError, run_lock.RunLockedError) as error:
    return failures.input_error(error)
  config, report = checked.config, checked.report

  layout = local_runner.Layout(os.path.abspath(args.output))
  summary_path = layout.summary_path
  print(f'data: {os.path.abspath(checked.data_root)} ({report.layout}, '
        f'{sum(report.rows.values())} rows)', file=out)
  if checked.lengths.line:
    print(checked.lengths.line, file=out)
  for warning in report.warnings:
    print(f'warning: {warning}', file=out)
  print(f'output: {layout.output_dir}', file=out)
  print(f'full log: {layout.log_path}', file=out)
  started = time.monotonic()
  # What the report shows of the run's inputs and thresholds.
  report_keys = dict(data_root=os.path.abspath(checked.data_root),
                     auc_threshold=config.auc_threshold,
                     min_auc_gain=config.min_auc_gain,
                     text_lengths=checked.lengths.summary,
                     **run_preflight.run_settings(args, defaults))

  progress = console.Progress(out, before_start=stops.check)
  stops.locate = lambda: progress.current
  failure: Optional[BaseException] = None
  stopped: Optional[interrupts.Interrupted] = None
  partial = None
  try:
    with console.logs_to_file(layout.log_path) as (user_out, _):
      progress.stream = user_out
      try:
        result = local_runner.run_pipeline(config, on_event=progress.on_event,
                                           on_epoch=progress.on_epoch)
        stops.check()
      except interrupts.Interrupted as stop:
        stopped = stop
        logging.getLogger('autostrategy').warning(
            'the pipeline was %s%s; the signal came in:\n%s', stop,
            f' (its exception was lost in {stop.lost_in}, which finished)'
            if stop.lost_in else '', stops.stack, exc_info=True)
      except Exception as error:  # pylint: disable=broad-except
        failure = error
        # The whole traceback goes to the log; the terminal gets the cause.
        logging.getLogger('autostrategy').exception('the pipeline failed')
      if stopped or failure:
        partial = failures.read_partial(config, cancel=bool(stopped))
  except interrupts.Interrupted as stop:  # In the log's set-up or tear-down.
    stopped = stopped or stop
  except Exception as error:  # pylint: disable=broad-except
    failure = failure or error
  elapsed = time.monotonic() - started
  if stopped is not None:
    # A component stopped half-way leaves TensorFlow objects behind (e.g. a
    # half-restored checkpoint) whose deletion at exit warns on stderr, after
    # the line that says what happened; the full log has the run's record.
    logging.getLogger('tensorflow').setLevel(logging.ERROR)
    return run_outcome.interrupted(stopped, partial, progress.current, elapsed,
                                   layout, summary_path, report_keys, out)
  if failure is not None:
    return run_outcome.failed(failure, partial, progress.current, elapsed,
                              layout, summary_path, report_keys, out)
  return run_outcome.finished(result, config, layout, summary_path,
                              report_keys, lambda: time.monotonic() - started,
                              args.json, out)
