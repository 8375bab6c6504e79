"""The outcome of a local run, read back from MLMD and the Evaluator's output.

`read_result` gives what the console, summary.json and `--json` show:
component states and timings (MLMD's `Execution.State` names), the blessing,
the candidate's and the baseline's metrics overall and per slice (TFMA), why
an AUC is undefined, the trained and the pushed model. `cancel_running`
marks what an interruption left RUNNING, and `write_summary` keeps the
outcome beside the outputs.
"""

import dataclasses
import json
import math
import os
from typing import Any, Dict, List, Optional

from tfx_autostrategy.pipeline import atomic_io
from tfx_autostrategy.pipeline import config as config_lib
from tfx_autostrategy.pipeline import mlmd_runs


@dataclasses.dataclass
class ComponentRun:
  """One component's execution in the latest run, as MLMD recorded it."""
  component: str
  state: str  # MLMD's Execution.State name: 'COMPLETE', 'CACHED', ...
  seconds: Optional[float] = None


@dataclasses.dataclass
class RunResult:
  """What a run produced."""
  pushed_model: Optional[str]
  blessed: bool
  metrics: Dict[str, Optional[float]]
  slices: Dict[str, Dict[str, Optional[float]]]
  components: List[ComponentRun]
  model_dir: Optional[str]
  output_dir: str
  # The serving (latest blessed) model's overall metrics on the same eval
  # split; None on the first run, when there is no baseline.
  baseline_metrics: Optional[Dict[str, Optional[float]]] = None
  # Why an AUC is null: OVERALL or a slice name -> e.g. 'the eval split has
  # only label 0 (61 rows)' (see `one_class_reason`).
  auc_undefined: Dict[str, str] = dataclasses.field(default_factory=dict)

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


# The key of the whole eval split in `RunResult.auc_undefined`.
OVERALL = 'overall'


def one_class_reason(values: Dict[str, Optional[float]],
                     where: str) -> Optional[str]:
  """Why the AUC of a slice is undefined, or None if it is defined.

  AUC ranks positive rows against negative ones, so a slice whose rows all
  have one label has none; TFMA reports 0 there. The Evaluator computes each
  slice's mean label (pipeline.eval_config), from which the rows of each
  label follow.

  Args:
    values: one slice's metrics, with 'mean_label' and 'example_count'.
    where: how to name the slice, e.g. 'the eval split' or 'slice lang=ru'.

  Returns:
    E.g. 'the eval split has only label 0 (61 rows)'; None if the slice holds
    both labels or the metrics to tell are missing.
  """
  mean_label, rows = values.get('mean_label'), values.get('example_count')
  if mean_label is None or not rows:
    return None
  rows = int(round(rows))
  positives = int(round(mean_label * rows))
  if 0 < positives < rows:
    return None
  return (f'{where} has only label {1 if positives else 0} '
          f'({rows} row{"s" if rows != 1 else ""})')


def _metrics_from(evaluation_uri: str, model_name: Optional[str] = None):
  """Overall metrics, slice metrics and `auc_undefined` of one model."""
  import tensorflow_model_analysis as tfma  # pylint: disable=g-import-not-at-top
  result = tfma.load_eval_result(evaluation_uri, model_name=model_name)
  overall, slices, undefined = {}, {}, {}
  for slice_key, metrics in result.slicing_metrics:
    values = {}
    for name, value in metrics.get('', {}).get('', {}).items():
      # Candidate-minus-baseline diffs are not the candidate's own metrics.
      if name.endswith('_diff'):
        continue
      if 'doubleValue' in value:
        number = float(value['doubleValue'])
        # Undefined metrics (precision with no positive prediction) are NaN,
        # which is not JSON: report them as null.
        values[name] = number if math.isfinite(number) else None
    name = '/'.join(f'{k}={v}' for k, v in slice_key)
    reason = one_class_reason(
        values, f'slice {name}' if slice_key else 'the eval split')
    if reason and 'auc' in values:
      values['auc'] = None  # TFMA's 0 here is not a measurement.
      undefined[name or OVERALL] = reason
    if not slice_key:
      overall = values
    else:
      slices[name] = values
  return overall, slices, undefined


def read_result(config: config_lib.PipelineConfig) -> RunResult:
  """Reads the latest run's executions, blessing, metrics and push from MLMD."""
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  from tfx.utils import path_utils  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  _, executions = mlmd_runs.latest_run(config.metadata_path)
  state_names = metadata_store_pb2.Execution.State
  components, by_node = [], {}
  for record in executions:
    execution = record.execution
    seconds = None
    created = execution.create_time_since_epoch
    updated = execution.last_update_time_since_epoch
    if created and updated:
      seconds = (updated - created) / 1000.0
    components.append(ComponentRun(
        record.node, state_names.Name(execution.last_known_state), seconds))
    by_node[record.node] = record

  def artifact_of(node, type_name):
    record = by_node.get(node)
    return record.output_of_type(type_name) if record else None

  blessing = artifact_of(pipeline_lib.EVALUATOR, 'ModelBlessing')
  blessed = bool(blessing and blessing.custom_properties['blessed'].int_value)
  evaluation = artifact_of(pipeline_lib.EVALUATOR, 'ModelEvaluation')
  metrics, slices, baseline_metrics, auc_undefined = {}, {}, None, {}
  if evaluation:
    metrics, slices, baseline_metrics, auc_undefined = (
        _candidate_and_baseline(evaluation.uri))
  pushed = artifact_of(pipeline_lib.PUSHER, 'PushedModel')
  pushed_model = None
  if pushed and pushed.custom_properties['pushed'].int_value:
    pushed_model = pushed.custom_properties['pushed_destination'].string_value
  model = artifact_of(pipeline_lib.TRAINER, 'Model')
  return RunResult(
      pushed_model=pushed_model,
      blessed=blessed,
      metrics=metrics,
      slices=slices,
      components=components,
      model_dir=path_utils.serving_model_dir(model.uri) if model else None,
      output_dir=os.path.dirname(config.pipeline_root),
      baseline_metrics=baseline_metrics,
      auc_undefined=auc_undefined)


def cancel_running(config: config_lib.PipelineConfig) -> List[str]:
  """Marks the latest run's still-RUNNING executions CANCELED; their names.

  An interrupted run stops inside a component, before TFX could publish that
  execution, so MLMD would keep it RUNNING forever. CANCELED says what
  happened; a rerun ignores it either way (the cache reuses only COMPLETE or
  CACHED executions) and reruns that component.
  """
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  store, executions = mlmd_runs.latest_run(config.metadata_path)
  running = [r for r in executions if r.execution.last_known_state ==
             metadata_store_pb2.Execution.RUNNING]
  for record in running:
    record.execution.last_known_state = metadata_store_pb2.Execution.CANCELED
  if running:
    store.put_executions([r.execution for r in running])
  return [r.node for r in running]


def _candidate_and_baseline(evaluation_uri: str):
  """Candidate metrics, slices and `auc_undefined`; the baseline's metrics.

  With a baseline the Evaluator names the two models 'candidate' and
  'baseline' (TFMA's defaults); without one there is a single unnamed model.
  Both models are evaluated on the same rows, so the candidate's reasons for
  an undefined AUC hold for the baseline's too.
  """
  try:
    metrics, slices, undefined = _metrics_from(evaluation_uri, 'candidate')
    baseline, _, _ = _metrics_from(evaluation_uri, 'baseline')
  except Exception:  # pylint: disable=broad-except
    metrics, slices, undefined = {}, {}, {}
    baseline = None
  if not metrics:
    metrics, slices, undefined = _metrics_from(evaluation_uri)
    baseline = None
  return metrics, slices, baseline or None, undefined


def write_summary(result: Optional[RunResult], path: str,
                  **extra: Any) -> None:
  """Keeps the run's outcome beside its outputs, as JSON.

  Args:
    result: what the run produced, or None if nothing could be read back.
    path: the JSON file to (over)write; a failed run overwrites the summary of
      an earlier successful one, so the file always describes the latest run.
    **extra: more top-level keys, e.g. `status`, `error`, `failed_component`.
  """
  os.makedirs(os.path.dirname(path), exist_ok=True)
  summary = result.to_dict() if result else {'pushed_model': None,
                                             'blessed': False}
  summary.update(extra)
  # Serialized first, then written atomically: a failed write (a full disk)
  # keeps the previous summary instead of leaving an empty file.
  atomic_io.write_text(
      path, json.dumps(summary, indent=2, sort_keys=True, allow_nan=False))
