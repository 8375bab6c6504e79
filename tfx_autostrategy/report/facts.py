"""What a run left in its output directory, gathered for the run report.

Reads only what the run wrote: `summary.json`, the MLMD store (the latest
pipeline run's executions and artifacts), the Trainer's `history.json` and
`plan.json` in `model_run`, the Evaluator's output through TFMA (metrics and
the confusion-matrix and calibration plots), the statistics (rows per split)
and ExampleValidator's anomalies. Every part is optional: a run that failed
early has a report as far as it got, and a part that cannot be read says why.
"""

import json
import os
from typing import Any, Dict, List, Optional

from tfx_autostrategy import conventions
from tfx_autostrategy.pipeline import local_runner
from tfx_autostrategy.pipeline import mlmd_runs


def _read_json(path: str):
  with open(path) as f:
    return json.load(f)


def _tfx_artifact(mlmd_artifact, artifact_class):
  artifact = artifact_class()
  artifact.set_mlmd_artifact(mlmd_artifact)
  return artifact


def _eval_plots(evaluation_uri: str) -> Dict[str, Any]:
  """The candidate's overall ROC/PR points and calibration buckets (TFMA's)."""
  import tensorflow_model_analysis as tfma  # pylint: disable=g-import-not-at-top
  result = None
  for model_name in ('candidate', None):  # 'candidate' when there is a baseline
    try:
      result = tfma.load_eval_result(evaluation_uri, model_name=model_name)
    except Exception:  # pylint: disable=broad-except
      continue
    if result.plots:
      break
  plots = {}
  for slice_key, by_output in (result.plots if result else []):
    if slice_key or not by_output:
      continue  # The overall slice only.
    plots = by_output.get('', {}).get('', {})
  matrices = plots.get('confusionMatrixAtThresholds', {}).get('matrices', [])
  # MessageToDict leaves out zero counts.
  points = [{key: float(m.get(key, 0.0)) for key in (
      'threshold', 'truePositives', 'falsePositives', 'trueNegatives',
      'falseNegatives', 'precision', 'recall')} for m in matrices]
  buckets = [{key: float(b.get(key, {}).get('value', 0.0)
                         if isinstance(b.get(key), dict) else b.get(key, 0.0))
              for key in ('lowerThresholdInclusive', 'upperThresholdExclusive',
                          'numWeightedExamples', 'totalWeightedLabel',
                          'totalWeightedRefinedPrediction')}
             for b in plots.get('calibrationHistogramBuckets', {}).get(
                 'buckets', [])]
  return {'confusion_matrices': points, 'calibration_buckets': buckets}


def collect(output_dir: str) -> Dict[str, Any]:
  """Everything the report shows, as plain data.

  Args:
    output_dir: a run's `--output` directory.

  Returns:
    A dict with 'summary', 'components', 'rows', 'plan', 'history',
    'plots', 'anomalies', 'baseline_model', 'model_run' and 'problems'
    (part -> why it is missing); absent parts are None or empty.

  Raises:
    FileNotFoundError: `output_dir` holds neither summary.json nor an MLMD
      store: no run wrote there.
  """
  output_dir = os.path.abspath(output_dir)
  layout = local_runner.Layout(output_dir)
  summary_path, metadata_path = layout.summary_path, layout.metadata_path
  if not os.path.exists(summary_path) and not os.path.exists(metadata_path):
    raise FileNotFoundError(
        f'{output_dir}: no run found (neither '
        f'{os.path.basename(summary_path)} nor '
        f'{os.path.basename(metadata_path)}); pass the --output of an `autostrategy run`')
  facts: Dict[str, Any] = {
      'output_dir': output_dir, 'summary': {}, 'rows': {}, 'plan': None,
      'history': [], 'plots': None, 'anomalies': [], 'baseline_model': None,
      'model_run': None, 'problems': {}}
  problems: Dict[str, str] = facts['problems']

  def attempt(part: str, fn) -> None:
    try:
      fn()
    except Exception as error:  # pylint: disable=broad-except
      problems[part] = f'{type(error).__name__}: {error}'

  def summary():
    facts['summary'] = _read_json(summary_path)
  attempt('summary', summary)
  facts['components'] = facts['summary'].get('components', [])
  if not os.path.exists(metadata_path):
    problems['metadata'] = f'{metadata_path} does not exist'
    return facts
  # Component ids (pipeline.py imports TFX; so does reading MLMD).
  from tfx_autostrategy.pipeline import pipeline as p  # pylint: disable=g-import-not-at-top
  order = {name: i for i, name in enumerate(p.COMPONENT_IDS)}
  facts['components'] = sorted(
      facts['components'],
      key=lambda c: order.get(c.get('component'), len(order)))
  nodes: Dict[str, mlmd_runs.NodeExecution] = {}

  def metadata():
    try:
      _, executions = mlmd_runs.latest_run(metadata_path)
    except LookupError:  # A store the run created, but no run recorded yet.
      return
    nodes.update((record.node, record) for record in executions)
  attempt('metadata', metadata)

  def artifact(node: str, side: str, key: str):
    record = nodes.get(node)
    if record is None:
      return None
    return record.input(key) if side == 'inputs' else record.output(key)

  def rows():
    from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
    from tfx_autostrategy.components.trainer import executor  # pylint: disable=g-import-not-at-top
    stats = artifact(p.STATISTICS_GEN, 'outputs', 'statistics')
    if stats is not None:
      facts['rows'] = executor.example_counts(
          _tfx_artifact(stats, standard_artifacts.ExampleStatistics))
  attempt('rows', rows)

  def anomalies():
    from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
    from tfx_autostrategy.components.gate import component as gate  # pylint: disable=g-import-not-at-top
    found = artifact(p.EXAMPLE_VALIDATOR, 'outputs', 'anomalies')
    if found is not None:
      facts['anomalies'] = gate.describe_anomalies(
          _tfx_artifact(found, standard_artifacts.ExampleAnomalies))
  attempt('anomalies', anomalies)

  def trainer():
    model_run = artifact(p.TRAINER, 'outputs', 'model_run')
    if model_run is None:
      return
    facts['model_run'] = model_run.uri
    plan_path = os.path.join(model_run.uri, conventions.PLAN_FILE)
    history_path = os.path.join(model_run.uri, conventions.HISTORY_FILE)
    if os.path.exists(plan_path):
      facts['plan'] = _read_json(plan_path)
    if os.path.exists(history_path):
      facts['history'] = _read_json(history_path)
  attempt('trainer', trainer)

  def evaluator():
    baseline = artifact(p.EVALUATOR, 'inputs', 'baseline_model')
    facts['baseline_model'] = baseline.uri if baseline is not None else None
    candidate = artifact(p.EVALUATOR, 'inputs', 'model')
    if (baseline is None and candidate is not None and
        facts['summary'].get('baseline_metrics')):
      # MLMD keeps one input event per artifact: when the serving model is
      # the candidate itself (a cached Trainer), only 'model' is recorded.
      facts['baseline_model'] = candidate.uri
      facts['baseline_is_candidate'] = True
    evaluation = artifact(p.EVALUATOR, 'outputs', 'evaluation')
    if evaluation is not None:
      facts['plots'] = _eval_plots(evaluation.uri)
  attempt('evaluation plots', evaluator)
  return facts


def slice_trust(values: Dict[str, Optional[float]], min_rows: int,
                min_label_rows: int) -> Optional[str]:
  """Why a slice's metrics are too noisy to trust, or None.

  Args:
    values: the slice's metrics ('example_count', 'mean_label').
    min_rows: fewer rows than this are too few.
    min_label_rows: fewer rows of either label than this are too few (AUC
      ranks positives against negatives).
  """
  rows = values.get('example_count')
  if rows is None:
    return 'no example count'
  rows = int(round(rows))
  if rows < min_rows:
    return f'{rows} rows < {min_rows}'
  mean_label = values.get('mean_label')
  if mean_label is not None:
    positives = int(round(mean_label * rows))
    fewest = min(positives, rows - positives)
    if fewest < min_label_rows:
      label = 1 if positives < rows - positives else 0
      return f'{fewest} rows of label {label} < {min_label_rows}'
  return None


def changed_settings(values: Dict[str, Any],
                     defaults: Dict[str, Any]) -> List[str]:
  """Names in `values` whose value differs from `defaults`, sorted."""
  return sorted(k for k, v in values.items()
                if k in defaults and defaults[k] != v)
