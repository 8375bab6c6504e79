"""How `autostrategy run` ends: summary.json, the report, the last lines.

Whatever happened (pushed, not blessed, a component failed, a signal), the
user gets the outcome on stdout, the cause on the last line of stderr, and
summary.json describing this run; each ending returns the exit code.
"""

import json
import sys
from typing import Any, Dict, Optional, TextIO, Tuple

from tfx_autostrategy.cli import console
from tfx_autostrategy.cli import failures


def print_summary(result, out: TextIO) -> None:
  """Component states and timings, metrics overall and per slice, the push."""
  print('', file=out)
  print('components:', file=out)
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import run_result  # pylint: disable=g-import-not-at-top
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
                   else console.number(v))
        for k, v in sorted(values.items()) if keys is None or k in keys)
  if result.metrics:
    print('metrics (eval split): ' + shown(run_result.OVERALL,
                                           result.metrics), file=out)
    if run_result.OVERALL in undefined:
      print(f'  auc undefined: {undefined[run_result.OVERALL]}', file=out)
  for name, values in sorted(result.slices.items()):
    print(f'  {name}: ' + shown(name, values, ('auc', 'binary_accuracy',
                                               'example_count')), file=out)
    if name in undefined:
      print(f'    auc undefined: {undefined[name]}', file=out)
  print(f'blessed: {result.blessed}', file=out)
  print(f'trained model: {result.model_dir}', file=out)
  print(f'pushed model: {result.pushed_model or "none (not blessed)"}',
        file=out)


def write_report(output_dir: str, log_path: str, out: TextIO
                 ) -> Tuple[Optional[str], Optional[str]]:
  """Writes OUT/report.html (its logs to the log file).

  A report that cannot be written is a warning: the run's outcome and exit
  code stand.

  Returns:
    The report's path and the run's model_run directory (TensorBoard logs);
    None for what is not there.
  """
  from tfx_autostrategy.report import render  # pylint: disable=g-import-not-at-top
  try:
    with console.logs_to_file(log_path):
      path, facts = render.write_report(output_dir)
  except Exception as error:  # pylint: disable=broad-except
    print(f'warning: no report written: {failures.error_text(error)}',
          file=out)
    return None, None
  return path, facts.get('model_run')


def print_report_lines(path: Optional[str], model_run: Optional[str],
                       out: TextIO) -> None:
  if path:
    print(f'report: {path}', file=out)
  if model_run:
    print(f'tensorboard: tensorboard --logdir {model_run}', file=out)


def interrupted(stopped, partial, where: str, elapsed: float, layout,
                summary_path: str, report_keys: Dict[str, Any],
                out: TextIO) -> int:
  """A signal stopped the pipeline in `where`; a rerun resumes from cache.

  When the signal's exception was lost in a component's code, that component
  (`stopped.lost_in`) finished and the run stopped before the next one: the
  last line says so, not that it was stopped.
  """
  where = stopped.lost_in or where
  pushed = partial.pushed_model if partial else None
  unwritten = failures.write_summary(
      partial, summary_path, status='interrupted',
      interrupted_component=where or None, signal=stopped.signal_name,
      pushed_model=pushed, **report_keys)
  print(f'\npipeline {stopped} after {elapsed:.0f} s'
        f'{" in " + where if where else ""}; '
        + (f'pushed {pushed}.' if pushed else
           'no model was pushed in this run.'), file=out)
  print(f'full log: {layout.log_path}', file=out)
  if unwritten:
    print(unwritten, file=sys.stderr)
  if stopped.lost_in:
    what = (f'{where} finished despite {stopped.signal_name} (its exception '
            'was lost in that step\'s code) and the run stopped before the '
            'next step')
  else:
    what = f'{where or "the pipeline"} was {stopped}'
  print(f'interrupted: {what}; completed steps are kept and a rerun of the '
        'same command resumes', file=sys.stderr)
  return stopped.exit_code


def failed(failure: BaseException, partial, running: str, elapsed: float,
           layout, summary_path: str, report_keys: Dict[str, Any],
           out: TextIO) -> int:
  """The pipeline raised; the cause goes last, not buried in Beam logs."""
  from tfx_autostrategy.pipeline import write_faults  # pylint: disable=g-import-not-at-top
  failed_component = running
  if not failed_component and partial:
    failed_component = next((c.component for c in partial.components
                             if c.state == 'FAILED'), '')
  fault = write_faults.describe(failure, layout.output_dir)
  if fault:  # A full disk or a size limit: what, where, what to do.
    cause = fault.message(failed_component)
    last_line = f'error: {cause}'
  else:
    cause = failures.error_text(failure)
    where = f'{failed_component} failed: ' if failed_component else ''
    last_line = f'error: {where}{cause}'
  unwritten = failures.write_summary(
      partial, summary_path, status='failed',
      failed_component=failed_component or None, error=cause,
      pushed_model=None, **report_keys)
  print(f'\npipeline failed after {elapsed:.0f} s'
        f'{" in " + failed_component if failed_component else ""}; no model '
        'was pushed in this run.', file=out)
  print(f'full log: {layout.log_path}', file=out)
  print_report_lines(*write_report(layout.output_dir, layout.log_path, out),
                     out)
  if unwritten:
    print(unwritten, file=sys.stderr)
  print(last_line, file=sys.stderr)
  return failures.EXIT_FAILED


def finished(result, config, layout, summary_path: str,
             report_keys: Dict[str, Any], elapsed, as_json: bool,
             out: TextIO) -> int:
  """The pipeline ran to the end: pushed (0), or why not (2 or 3).

  Args:
    elapsed: a callable returning the seconds since the run started (read
      after the report is written, as the console line says).
  """
  from tfx_autostrategy.pipeline import run_result  # pylint: disable=g-import-not-at-top
  status = 'pushed' if result.pushed_model else 'not_blessed'
  unwritten = failures.write_summary(result, summary_path, status=status,
                                     **report_keys)
  if unwritten:  # The outcome is printed; the file could not say it.
    print_summary(result, out)
    print(unwritten, file=sys.stderr)
    return failures.EXIT_FAILED
  print_summary(result, out)
  report_path, model_run = write_report(layout.output_dir, layout.log_path,
                                        out)
  print(f'finished in {elapsed():.0f} s', file=out)
  print_report_lines(report_path, model_run, out)
  if as_json:
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
        'text_lengths': {'sequence_length': config.text.sequence_length,
                         'char_ngram_length': config.text.char_ngram_length},
    }, sort_keys=True, allow_nan=False), file=out)
  if result.pushed_model:
    return failures.EXIT_OK
  one_class = result.auc_undefined.get(run_result.OVERALL)
  if one_class:
    # Not a quality verdict: the eval data cannot measure AUC at all (the
    # Evaluator's mean-label threshold refuses the blessing).
    print(f'error: model not blessed: auc undefined: {one_class}; the eval '
          'data needs rows of both labels 0 and 1; nothing was pushed',
          file=sys.stderr)
    return failures.EXIT_BAD_INPUT
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
  return failures.EXIT_NOT_BLESSED
