"""`autostrategy`: run the pipeline locally, show the distribution plan, compile.

Exit codes (also in the README):
  0  the run finished and a model was pushed (or the command succeeded)
  1  a pipeline component failed (cause on the last lines, full log in a file),
     or a write failed (a full disk): one line names the file and the reason
  2  bad input or usage: the data or the options were rejected before running
  3  the model trained but did not reach the Evaluator threshold: not pushed
  130 / 143  stopped by Ctrl-C (SIGINT) / SIGTERM; a rerun resumes
"""

import argparse
import contextlib
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tfx_autostrategy import data_options

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_BLESSED = 3


def _add_training_options(parser: argparse.ArgumentParser) -> None:
  from tfx_autostrategy.components import settings  # pylint: disable=g-import-not-at-top
  defaults = settings.TrainerSettings()
  parser.add_argument('--accelerator', choices=settings.ACCELERATORS,
                      default=defaults.accelerator,
                      help='auto-detect, or insist on one (error if absent)')
  parser.add_argument('--cpu-replicas', type=int, default=0,
                      help='split the CPU into N logical devices: a real '
                      'MirroredStrategy with N replicas')
  parser.add_argument('--per-replica-batch-size', type=int,
                      default=defaults.per_replica_batch_size)
  parser.add_argument('--precision', default='',
                      help="mixed precision policy ('' = device default)")
  parser.add_argument('--steps-per-execution', type=int, default=0,
                      help='0 = device default')
  parser.add_argument('--jit-compile', choices=settings.JIT_COMPILE_CHOICES,
                      default=defaults.jit_compile,
                      help='XLA-compile the train step (auto: on for TPUs '
                      'and GPUs, off on CPU; TPUs refuse off)')
  parser.add_argument('--backup-every-steps', type=int,
                      default=defaults.backup_every_steps,
                      help='BackupAndRestore also saves every N steps (-1: '
                      'device default, 256 on TPU, which gets no preemption '
                      'notice; 0: only at epoch ends)')


def build_parser() -> argparse.ArgumentParser:
  """The command-line interface."""
  from tfx_autostrategy.components import conventions  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components import settings  # pylint: disable=g-import-not-at-top
  trainer_defaults = settings.TrainerSettings()
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
  run.add_argument('--epochs', type=int, default=trainer_defaults.epochs)
  run.add_argument('--model', choices=settings.MODELS,
                   default=trainer_defaults.model)
  run.add_argument('--hub-model-path', default='',
                   help='local SavedModel/TF Hub encoder for --model hub')
  run.add_argument('--learning-rate', type=float,
                   default=trainer_defaults.learning_rate)
  run.add_argument('--input-cache-mb', type=int,
                   default=trainer_defaults.input_cache_mb,
                   help='memory for keeping decoded training/eval examples '
                   'after the first epoch; 0 = read the TFRecords every epoch')
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
  _add_training_options(run)

  report = commands.add_parser(
      'report', help='(re)write OUT/report.html for an existing run')
  report.add_argument('output', help='the --output directory of a run')

  detect = commands.add_parser(
      'detect', help='show the strategy the Trainer would use here')
  detect.add_argument('--json', action='store_true')
  _add_training_options(detect)
  _add_compile_parser(commands)
  rehearse = commands.add_parser(
      'rehearse', help='train, export and serve as a Trainer machine '
      '(GPU, TPU, several workers) would, on this CPU with stand-ins')
  from tfx_autostrategy import rehearse as rehearse_lib  # pylint: disable=g-import-not-at-top
  rehearse_lib.add_arguments(rehearse)
  bench = commands.add_parser(
      'bench', help='benchmark the Trainer, input pipeline, replicas, '
      'Transform and end-to-end runs; writes a JSON report and a table')
  from tfx_autostrategy.benchmarks import suite  # pylint: disable=g-import-not-at-top
  suite.add_arguments(bench)
  return parser


def _add_compile_parser(commands) -> None:
  """`autostrategy compile`: options of kubeflow/compiler.CompileOptions."""
  from tfx_autostrategy.components import settings  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.kubeflow import compiler  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.kubeflow import worker_pools  # pylint: disable=g-import-not-at-top
  trainer_defaults = settings.TrainerSettings()
  compile_ = commands.add_parser(
      'compile', help='compile the pipeline for Kubeflow Pipelines or Vertex '
      'AI Pipelines (pipeline job JSON; .yaml writes the KFP package)')
  compile_.add_argument('--target', required=True,
                        choices=compiler.TARGETS)
  compile_.add_argument('--output', default='pipeline.json',
                        help='file to write (build output: do not commit)')
  compile_.add_argument('--pipeline-root', required=True,
                        help='remote artifact root, e.g. gs://bucket/root')
  compile_.add_argument('--image', required=True,
                        help='container image built from kubeflow/Dockerfile')
  compile_.add_argument('--data', required=True,
                        help='remote directory of CSV files, e.g. gs://...')
  compile_.add_argument('--trainer-image', default='',
                        help="the Trainer's image (default: --image), e.g. "
                        'a TF_VARIANT=gpu or tpu build')
  compile_.add_argument('--accelerator', default='cpu',
                        help='Trainer machine: ' +
                        ', '.join(worker_pools.ACCELERATORS))
  compile_.add_argument('--workers', type=int, default=1,
                        help='machines training together, chief included '
                        '(--target vertex, not TPUs)')
  compile_.add_argument('--project', default='',
                        help='Google Cloud project (vertex, dataflow)')
  compile_.add_argument('--region', default='',
                        help='Google Cloud region (vertex, dataflow)')
  compile_.add_argument('--beam-runner', default='direct',
                        choices=compiler.BEAM_RUNNERS)
  compile_.add_argument('--pipeline-name',
                        default=compiler.DEFAULT_PIPELINE_NAME,
                        help='[a-z0-9-], at most 128 characters')
  data_options.add_arguments(compile_)
  compile_.add_argument('--id-type', choices=compiler.ID_TYPES,
                        default=compiler.ID_TYPES[0],
                        help="the id column's values: int if every id is an "
                        'integer (the local run reads this from the data)')
  compile_.add_argument('--schema', default='',
                        help='a local schema.pbtxt compiled into the pipeline '
                        'as it is (default: the curated schema with the '
                        'column options above)')
  compile_.add_argument('--serving-model-dir', default='',
                        help="Pusher's destination (default: under the root)")
  compile_.add_argument('--presplit', action='store_true',
                        help='--data has train/ and eval/ subdirectories')
  compile_.add_argument('--service-account', default='',
                        help='service account of the Vertex AI training job')
  compile_.add_argument('--model', choices=settings.MODELS,
                        default=trainer_defaults.model)
  compile_.add_argument('--epochs', type=int, default=trainer_defaults.epochs)
  compile_.add_argument('--per-replica-batch-size', type=int,
                        default=trainer_defaults.per_replica_batch_size)
  compile_.add_argument('--no-cache', action='store_true',
                        help='re-run every component')
  compile_.add_argument('--spot', action='store_true',
                        help='--target vertex: train on Spot VMs (cheaper, '
                        'preemptible; else standard VMs)')
  compile_.add_argument('--restart-on-worker-restart', action='store_true',
                        help='--target vertex: restart the whole training '
                        'job when a worker restarts')
  compile_.add_argument('--job-timeout', default='',
                        help='--target vertex: stop the training job after '
                        "this long: seconds or e.g. 90m, 24h, 7d (default: "
                        "Vertex AI's, 7 days)")


@contextlib.contextmanager
def _logs_to_file(path: str):
  """Sends Python logging and the process's stdout/stderr to `path`.

  TF, Beam and pip (TFX installs the user-module wheel) write to file
  descriptors 1 and 2 directly; all of it goes to the log file. Yields
  `(stdout, stderr)` streams on the original descriptors for the user.
  """
  import logging  # pylint: disable=g-import-not-at-top
  os.makedirs(os.path.dirname(path), exist_ok=True)
  log_file = open(path, 'a', buffering=1)
  sys.stdout.flush()
  sys.stderr.flush()
  saved = {fd: os.dup(fd) for fd in (1, 2)}
  user_out = os.fdopen(os.dup(saved[1]), 'w', buffering=1)
  user_err = os.fdopen(os.dup(saved[2]), 'w', buffering=1)
  for fd in (1, 2):
    os.dup2(log_file.fileno(), fd)
  root = logging.getLogger()
  handler = logging.StreamHandler(log_file)
  handler.setFormatter(logging.Formatter(
      '%(asctime)s %(levelname)s %(name)s: %(message)s'))
  old_level = root.level
  root.addHandler(handler)
  root.setLevel(logging.INFO)
  try:
    import absl.logging  # pylint: disable=g-import-not-at-top
    absl.logging.use_python_logging(quiet=True)
    absl.logging.set_verbosity(absl.logging.INFO)
    yield user_out, user_err
  finally:
    root.removeHandler(handler)
    root.setLevel(old_level)
    for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
      _drain(stream, fd)
    for fd, saved_fd in saved.items():
      os.dup2(saved_fd, fd)
      os.close(saved_fd)
    user_out.close()
    user_err.close()
    try:
      log_file.close()
    except OSError:
      pass  # The log's disk is full; the console has the cause.


def _drain(stream, fd: int) -> None:
  """Flushes `stream` (on `fd`, the log); drops what a full log cannot take.

  Text left in the buffer after a failed flush would otherwise surface on the
  terminal once `fd` is restored.
  """
  try:
    stream.flush()
  except OSError:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    try:
      stream.flush()
    except OSError:
      pass


def _error_text(error: BaseException) -> str:
  """The innermost cause of a failure, without Beam's wrapping.

  Long messages keep their first line (what failed) and their last lines
  (usually the detail), so the cause fits on the last lines of the terminal.
  """
  while error.__cause__ is not None or error.__context__ is not None:
    error = error.__cause__ or error.__context__
  lines = [l for l in str(error).strip().splitlines() if l.strip()]
  if len(lines) > 12:
    lines = (lines[:1] + [f'  ... ({len(lines) - 11} more lines in the log)']
             + lines[-10:])
  return f'{type(error).__name__}: ' + '\n'.join(lines)


def _read_partial(local_runner, config, cancel: bool):
  """What MLMD recorded of a run that failed or was stopped (None if nothing).

  Runs inside the log redirection, so TFX's messages go to the log. With
  `cancel`, the executions left RUNNING by an interruption become CANCELED
  first.
  """
  try:
    if cancel:
      local_runner.cancel_running(config)
    return local_runner.read_result(config)
  except Exception:  # pylint: disable=broad-except
    return None  # e.g. it stopped before any execution was recorded.


def _number(value) -> str:
  return 'n/a' if value is None else f'{value:.4f}'


def _print_summary(result, out) -> None:
  print('', file=out)
  print('components:', file=out)
  from tfx_autostrategy.pipeline import local_runner  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  order = {name: i for i, name in enumerate(pipeline_lib.COMPONENT_IDS)}
  for component in sorted(result.components,
                          key=lambda c: order.get(c.component, len(order))):
    seconds = f'{component.seconds:.1f} s' if component.seconds else ''
    print(f'  {component.component:<20} {component.state.lower():<9} {seconds}',
          file=out)
  undefined = result.auc_undefined

  def shown(where, values, keys=None):
    # An AUC with a reason is undefined, not missing ('n/a').
    return ', '.join(
        f'{k}=' + ('undefined' if k == 'auc' and where in undefined
                   else _number(v))
        for k, v in sorted(values.items()) if keys is None or k in keys)
  if result.metrics:
    print('metrics (eval split): ' + shown(local_runner.OVERALL,
                                           result.metrics), file=out)
    if local_runner.OVERALL in undefined:
      print(f'  auc undefined: {undefined[local_runner.OVERALL]}', file=out)
  for name, values in sorted(result.slices.items()):
    print(f'  {name}: ' + shown(name, values, ('auc', 'binary_accuracy',
                                               'example_count')), file=out)
    if name in undefined:
      print(f'    auc undefined: {undefined[name]}', file=out)
  print(f'blessed: {result.blessed}', file=out)
  print(f'trained model: {result.model_dir}', file=out)
  print(f'pushed model: {result.pushed_model or "none (not blessed)"}',
        file=out)


# Run options that are not settings of the run (shown nowhere in the report).
_NOT_SETTINGS = ('command', 'argv', 'output', 'json', 'data')


def _run_settings(args: argparse.Namespace) -> Dict[str, Any]:
  """Every option of `run`, and the names of those not at their default."""
  defaults = vars(build_parser().parse_args(['run']))
  values = {k: v for k, v in vars(args).items() if k not in _NOT_SETTINGS}
  return {'settings': values, 'changed_settings': sorted(
      k for k, v in values.items() if k in defaults and defaults[k] != v)}


def _write_report(output_dir: str, log_path: str, out
                  ) -> Tuple[Optional[str], Optional[str]]:
  """Writes OUT/report.html (its logs to the log file).

  A report that cannot be written is a warning: the run's outcome and exit
  code stand.

  Returns:
    The report's path and the run's model_run directory (TensorBoard logs);
    None for what is not there.
  """
  from tfx_autostrategy.pipeline import report  # pylint: disable=g-import-not-at-top
  try:
    with _logs_to_file(log_path):
      path, facts = report.write_report(output_dir)
  except Exception as error:  # pylint: disable=broad-except
    print(f'warning: no report written: {_error_text(error)}', file=out)
    return None, None
  return path, facts.get('model_run')


def _print_report_lines(path: Optional[str], model_run: Optional[str],
                        out) -> None:
  if path:
    print(f'report: {path}', file=out)
  if model_run:
    print(f'tensorboard: tensorboard --logdir {model_run}', file=out)


def cmd_report(args: argparse.Namespace) -> int:
  """`autostrategy report OUT`: (re)writes OUT/report.html."""
  from tfx_autostrategy.pipeline import local_runner  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import report_data  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import run_lock  # pylint: disable=g-import-not-at-top
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
      path, model_run = _write_report(
          output_dir, local_runner.Layout(output_dir).log_path, sys.stdout)
      _print_report_lines(path, model_run, sys.stdout)
  except (OSError, run_lock.RunLockedError) as error:
    print(f'error: {error}', file=sys.stderr)
    return EXIT_BAD_INPUT
  return EXIT_OK if path else EXIT_FAILED


def cmd_run(args: argparse.Namespace) -> int:
  """`autostrategy run`.

  Checks the data, options and output directory first (exit 2, in a second or
  two: TFX is imported only after), takes the output directory's lock (exit 2
  if another run holds it), then runs the pipeline. Whatever happens, the
  cause is on the last line of stderr and summary.json under the output
  describes this run.
  """
  from tfx_autostrategy.pipeline import interrupts  # pylint: disable=g-import-not-at-top
  # A first SIGINT / SIGTERM stops the run (one line, summary, exit 130 /
  # 143); a second one exits at once. The lock is released when the run
  # returns, after summary.json is written.
  with interrupts.stop_on_signals():
    try:
      with contextlib.ExitStack() as lock:
        return _run_locked(args, lock)
    except interrupts.Interrupted as stop:
      # Outside the pipeline: during the checks, or after the run's outcome
      # was printed; nothing of the pipeline was cut short.
      print(f'interrupted by {stop.signal_name} before the pipeline ran or '
            'after it ended; a rerun of the same command resumes',
            file=sys.stderr)
      return stop.exit_code


def _write_summary(local_runner, result, path: str, **keys) -> Optional[str]:
  """`local_runner.write_summary`; None, or the error line of a failed write.

  The write is atomic, so a failure (a full disk) leaves the previous
  summary in place: the line says that it still describes an earlier run.
  """
  from tfx_autostrategy.pipeline import write_faults  # pylint: disable=g-import-not-at-top
  try:
    local_runner.write_summary(result, path, **keys)
  except OSError as error:
    fault = write_faults.describe(error)
    reason = fault.reason if fault else (error.strerror or str(error))
    return (f'error: could not write {path}: {reason}; it still describes '
            'the previous run, if there was one')
  return None


def _run_locked(args: argparse.Namespace, lock: contextlib.ExitStack) -> int:
  """`cmd_run`; the output directory's lock goes on `lock` once taken."""
  from tfx_autostrategy.components import csv_check  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components import settings  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import interrupts  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import local_runner  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import run_lock  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import write_faults  # pylint: disable=g-import-not-at-top
  out = sys.stdout
  data_root = args.data or local_runner.sample_data_dir()
  try:
    text_settings = data_options.text_settings(args)
    trainer_settings = settings.TrainerSettings(
        model=args.model, epochs=args.epochs,
        per_replica_batch_size=args.per_replica_batch_size,
        learning_rate=args.learning_rate, accelerator=args.accelerator,
        steps_per_execution=args.steps_per_execution,
        precision=args.precision, jit_compile=args.jit_compile,
        backup_every_steps=args.backup_every_steps,
        input_cache_mb=args.input_cache_mb,
        hub_model_path=os.path.abspath(args.hub_model_path)
        if args.hub_model_path else '')
    report = csv_check.check_csv_dir(
        data_root, text_column=text_settings.text_column,
        label_column=text_settings.label_column,
        id_column=text_settings.id_column,
        lang_column=text_settings.slice_column)
    # Only a forced CPU run is sure to have --cpu-replicas replicas.
    min_replicas = (args.cpu_replicas if args.accelerator == 'cpu' and
                    args.cpu_replicas else 1)
    report.warnings.extend(csv_check.check_batch_size(
        report, trainer_settings.per_replica_batch_size, min_replicas))
    local_runner.check_output_dir(args.output)
    # Before the first write to OUT (build_config renders the schema there):
    # a second run on OUT would share the MLMD store and pipeline root.
    lock.enter_context(run_lock.hold(
        args.output, command=run_lock.command_line(getattr(args, 'argv',
                                                           None))))
    config = local_runner.build_config(
        data_root, args.output, text_settings, trainer_settings, report,
        beam_pipeline_args=args.beam_arg,
        auc_threshold=args.auc_threshold,
        min_auc_gain=args.min_auc_gain,
        allow_anomalies=args.allow_anomalies,
        enable_cache=not args.no_cache)
  except (ValueError, OSError, run_lock.RunLockedError) as error:
    fault = write_faults.describe(error) if isinstance(error, OSError) else None
    if fault:  # Not bad input: the disk is full (rendering the schema).
      print(f'error: {fault.message()}', file=sys.stderr)
      return EXIT_FAILED
    print(f'error: {error}', file=sys.stderr)
    return EXIT_BAD_INPUT

  layout = local_runner.Layout(os.path.abspath(args.output))
  summary_path = os.path.join(layout.output_dir, 'summary.json')
  print(f'data: {os.path.abspath(data_root)} ({report.layout}, '
        f'{sum(report.rows.values())} rows)', file=out)
  for warning in report.warnings:
    print(f'warning: {warning}', file=out)
  print(f'output: {layout.output_dir}', file=out)
  print(f'full log: {layout.log_path}', file=out)
  started = time.monotonic()
  # What the report shows of the run's inputs and thresholds.
  report_keys = dict(data_root=os.path.abspath(data_root),
                     auc_threshold=config.auc_threshold,
                     min_auc_gain=config.min_auc_gain, **_run_settings(args))

  progress = [out]
  running: List[str] = []

  def on_epoch(epoch: int, epochs: int, values: Dict[str, float]) -> None:
    speed = values.get('examples_per_second')
    print(f'    epoch {epoch}/{epochs}: loss {_number(values.get("loss"))}, '
          f'auc {_number(values.get("auc"))}, '
          f'val_auc {_number(values.get("val_auc"))}'
          + (f', {speed:.0f} examples/s' if speed else ''),
          file=progress[0], flush=True)

  def on_event(component: str, event: str, seconds: Optional[float]) -> None:
    if event == 'started':
      running.append(component)
      print(f'  {component:<20} ...', file=progress[0], flush=True)
    else:
      if component in running:
        running.remove(component)
      print(f'  {component:<20} done in {seconds:.1f} s', file=progress[0],
            flush=True)

  failure: Optional[BaseException] = None
  stopped: Optional[interrupts.Interrupted] = None
  partial = None
  try:
    with _logs_to_file(layout.log_path) as (user_out, _):
      progress[0] = user_out
      import logging  # pylint: disable=g-import-not-at-top
      try:
        result = local_runner.run_pipeline(config, on_event=on_event,
                                           on_epoch=on_epoch)
      except interrupts.Interrupted as stop:
        stopped = stop
        logging.getLogger('autostrategy').warning(
            'the pipeline was %s', stop, exc_info=True)
      except Exception as error:  # pylint: disable=broad-except
        failure = error
        # The whole traceback goes to the log; the terminal gets the cause.
        logging.getLogger('autostrategy').exception('the pipeline failed')
      if stopped or failure:
        partial = _read_partial(local_runner, config, cancel=bool(stopped))
  except interrupts.Interrupted as stop:  # In the log's set-up or tear-down.
    stopped = stopped or stop
  except Exception as error:  # pylint: disable=broad-except
    failure = failure or error
  elapsed = time.monotonic() - started
  if stopped is not None:
    # The component that was running, named; a rerun resumes from the cache.
    where = running[-1] if running else ''
    pushed = partial.pushed_model if partial else None
    unwritten = _write_summary(
        local_runner, partial, summary_path, status='interrupted',
        interrupted_component=where or None, signal=stopped.signal_name,
        pushed_model=pushed, **report_keys)
    print(f'\npipeline {stopped} after {elapsed:.0f} s'
          f'{" in " + where if where else ""}; '
          + (f'pushed {pushed}.' if pushed else
             'no model was pushed in this run.'), file=out)
    print(f'full log: {layout.log_path}', file=out)
    if unwritten:
      print(unwritten, file=sys.stderr)
    print(f'interrupted: {where or "the pipeline"} was {stopped}; completed '
          'steps are kept and a rerun of the same command resumes',
          file=sys.stderr)
    return stopped.exit_code
  if failure is not None:
    # Whatever failed, the user gets the cause last, not buried in Beam logs.
    failed = running[-1] if running else ''
    if not failed and partial:
      failed = next((c.component for c in partial.components
                     if c.state == 'FAILED'), '')
    fault = write_faults.describe(failure, layout.output_dir)
    if fault:  # A full disk or a size limit: what, where, what to do.
      cause = fault.message(failed)
      last_line = f'error: {cause}'
    else:
      cause = _error_text(failure)
      last_line = f'error: {failed + " failed: " if failed else ""}{cause}'
    unwritten = _write_summary(
        local_runner, partial, summary_path, status='failed',
        failed_component=failed or None, error=cause, pushed_model=None,
        **report_keys)
    print(f'\npipeline failed after {elapsed:.0f} s'
          f'{" in " + failed if failed else ""}; no model was pushed in this '
          'run.', file=out)
    print(f'full log: {layout.log_path}', file=out)
    _print_report_lines(*_write_report(layout.output_dir, layout.log_path, out),
                        out)
    if unwritten:
      print(unwritten, file=sys.stderr)
    print(last_line, file=sys.stderr)
    return EXIT_FAILED

  status = 'pushed' if result.pushed_model else 'not_blessed'
  unwritten = _write_summary(local_runner, result, summary_path,
                             status=status, **report_keys)
  if unwritten:  # The outcome is printed; the file could not say it.
    _print_summary(result, out)
    print(unwritten, file=sys.stderr)
    return EXIT_FAILED
  _print_summary(result, out)
  report_path, model_run = _write_report(layout.output_dir, layout.log_path,
                                         out)
  print(f'finished in {time.monotonic() - started:.0f} s', file=out)
  _print_report_lines(report_path, model_run, out)
  if args.json:
    print(json.dumps({
        'pushed_model': result.pushed_model,
        'blessed': result.blessed,
        'metrics': result.metrics,
        'baseline_metrics': result.baseline_metrics,
        'slices': result.slices,
        'auc_undefined': result.auc_undefined,
        'model_dir': result.model_dir,
        'output_dir': result.output_dir,
        'report': report_path,
    }, sort_keys=True, allow_nan=False), file=out)
  if not result.pushed_model:
    one_class = result.auc_undefined.get(local_runner.OVERALL)
    if one_class:
      # Not a quality verdict: the eval data cannot measure AUC at all (the
      # Evaluator's mean-label threshold refuses the blessing).
      print(f'error: model not blessed: auc undefined: {one_class}; the eval '
            'data needs rows of both labels 0 and 1; nothing was pushed',
            file=sys.stderr)
      return EXIT_BAD_INPUT
    auc = result.metrics.get('auc')
    baseline_auc = (result.baseline_metrics or {}).get('auc')
    if (auc is not None and baseline_auc is not None and
        auc >= config.auc_threshold):
      # The absolute threshold held, so the change threshold failed.
      print(f'error: model not blessed: auc {auc:.4f} is below the serving '
            f"model's {baseline_auc:.4f} (min gain {config.min_auc_gain}); "
            'the serving model stays', file=sys.stderr)
    else:
      measured = f'auc {auc:.4f} is' if auc is not None else 'auc'
      print(f'error: model not blessed ({measured} below the threshold '
            f'{config.auc_threshold}); nothing was pushed', file=sys.stderr)
    return EXIT_NOT_BLESSED
  return EXIT_OK


def cmd_detect(args: argparse.Namespace) -> int:
  """`autostrategy detect`."""
  from tfx_autostrategy.components import accelerator  # pylint: disable=g-import-not-at-top
  try:
    _, plan, _ = accelerator.resolve(
        args.accelerator, args.per_replica_batch_size,
        precision=args.precision,
        steps_per_execution=args.steps_per_execution,
        jit_compile=args.jit_compile,
        backup_every_steps=args.backup_every_steps)
  except (accelerator.AcceleratorNotFoundError, ValueError) as error:
    print(f'error: {error}', file=sys.stderr)
    return EXIT_BAD_INPUT
  if args.json:
    print(json.dumps(plan.to_dict(), sort_keys=True))
  else:
    print(accelerator.format_plan(plan))
  return EXIT_OK


def cmd_compile(args: argparse.Namespace) -> int:
  """`autostrategy compile`."""
  from tfx_autostrategy.components import settings  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.kubeflow import compiler  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.kubeflow import scheduling  # pylint: disable=g-import-not-at-top
  try:
    options = compiler.CompileOptions(
        target=args.target, image=args.image,
        pipeline_root=args.pipeline_root, data_root=args.data,
        accelerator=args.accelerator, trainer_image=args.trainer_image,
        workers=args.workers,
        project=args.project, region=args.region,
        beam_runner=args.beam_runner, pipeline_name=args.pipeline_name,
        schema_file=args.schema, text=data_options.text_settings(args),
        id_type=args.id_type,
        serving_model_dir=args.serving_model_dir, presplit=args.presplit,
        service_account=args.service_account,
        trainer=settings.TrainerSettings(
            model=args.model, epochs=args.epochs,
            per_replica_batch_size=args.per_replica_batch_size),
        enable_cache=not args.no_cache, spot=args.spot,
        restart_on_worker_restart=args.restart_on_worker_restart,
        job_timeout_seconds=(scheduling.parse_duration(args.job_timeout)
                             if args.job_timeout else 0))
    compiler.compile_pipeline(options, args.output)
  except ValueError as error:
    print(f'error: {error}', file=sys.stderr)
    return EXIT_BAD_INPUT
  except OSError as error:
    print(f'error: cannot write {args.output}: {error}', file=sys.stderr)
    return EXIT_FAILED
  pool = options.worker_pool
  print(f'wrote {args.output}: target {args.target}, Trainer on '
        f'{args.workers} x {pool.name} ({pool.machine_type}), Beam '
        f'{args.beam_runner}')
  return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
  """`autostrategy bench`."""
  from tfx_autostrategy.benchmarks import suite  # pylint: disable=g-import-not-at-top
  return suite.run(args)


def cmd_rehearse(args: argparse.Namespace) -> int:
  """`autostrategy rehearse`."""
  from tfx_autostrategy import rehearse as rehearse_lib  # pylint: disable=g-import-not-at-top
  return rehearse_lib.run(args)


COMMANDS = {'run': cmd_run, 'detect': cmd_detect, 'compile': cmd_compile,
            'rehearse': cmd_rehearse, 'bench': cmd_bench,
            'report': cmd_report}


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Entry point of the `autostrategy` console script."""
  args = build_parser().parse_args(argv)
  args.argv = list(sys.argv[1:] if argv is None else argv)  # For run_lock.
  from tfx_autostrategy import tf_env  # pylint: disable=g-import-not-at-top
  tf_env.prepare(getattr(args, 'cpu_replicas', 0))
  return COMMANDS[args.command](args)


if __name__ == '__main__':
  sys.exit(main())
