"""Runs the pipeline on this machine: LocalDagRunner, SQLite MLMD, Beam Direct.

Thin by design: it checks the CSVs, lays out the output directory, supplies
paths and Beam arguments to `create_pipeline`, runs it, and reads the outcome
back from MLMD.
"""

import dataclasses
import json
import logging
import math
import os
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from tfx_autostrategy.components import csv_check
from tfx_autostrategy.components import conventions
from tfx_autostrategy.components import settings as settings_lib
from tfx_autostrategy.pipeline import atomic_io
from tfx_autostrategy.pipeline import config as config_lib
from tfx_autostrategy.pipeline import schema_render
# `pipeline` imports TFX and TFMA (10-30 s); it is imported where a run needs
# it, so that the CLI rejects bad input in a second or two.

DEFAULT_PIPELINE_NAME = conventions.DEFAULT_PIPELINE_NAME


def sample_data_dir() -> str:
  """The bundled synthetic sample (see README)."""
  import tfx_autostrategy  # pylint: disable=g-import-not-at-top
  return os.path.join(os.path.dirname(tfx_autostrategy.__file__), 'sample')


@dataclasses.dataclass
class Layout:
  """Where a run writes what, under one output directory."""
  output_dir: str

  @property
  def pipeline_root(self) -> str:
    return os.path.join(self.output_dir, 'pipeline_root')

  @property
  def metadata_path(self) -> str:
    return os.path.join(self.output_dir, 'metadata.sqlite')

  @property
  def serving_model_dir(self) -> str:
    return os.path.join(self.output_dir, 'serving_model')

  @property
  def schema_path(self) -> str:
    return os.path.join(self.output_dir, 'schema', 'schema.pbtxt')

  @property
  def log_path(self) -> str:
    return os.path.join(self.output_dir, 'logs', 'pipeline.log')


class OutputDirError(OSError):
  """The output directory cannot be created or written."""


def check_output_dir(output_dir: str) -> str:
  """Creates `output_dir` if needed and proves it writable; returns it.

  Runs before the pipeline so that an unwritable output fails in a second,
  naming the directory, instead of minutes later inside a component.

  Raises:
    OutputDirError: the directory cannot be created or written.
  """
  output_dir = os.path.abspath(output_dir)
  try:
    os.makedirs(output_dir, exist_ok=True)
    with tempfile.TemporaryFile(dir=output_dir):
      pass
  except OSError as error:
    reason = error.strerror or str(error)
    if error.filename and os.path.abspath(error.filename) != output_dir:
      reason += f': {error.filename}'
    raise OutputDirError(
        f'{output_dir}: output directory is not writable ({reason}); pass a '
        'writable --output') from None
  return output_dir


def render_schema(text_settings: settings_lib.TextSettings, id_is_int: bool,
                  destination: str) -> str:
  """Writes the schema the run uses (`schema_render`) to `destination`.

  Returns:
    The schema's text, which the pipeline carries (see `schema_render`).
  """
  text = schema_render.render_schema_text(text_settings, id_is_int)
  os.makedirs(os.path.dirname(destination), exist_ok=True)
  atomic_io.write_text(destination, text)
  return text


def build_config(data_root: str, output_dir: str,
                 text_settings: settings_lib.TextSettings,
                 trainer_settings: settings_lib.TrainerSettings,
                 report: 'csv_check.CsvReport',
                 *,
                 pipeline_name: str = DEFAULT_PIPELINE_NAME,
                 beam_pipeline_args: Sequence[str] = (),
                 **overrides: Any) -> config_lib.PipelineConfig:
  """The PipelineConfig of a local run (writes the rendered schema)."""
  layout = Layout(os.path.abspath(output_dir))
  schema_text = render_schema(text_settings, report.id_is_int,
                              layout.schema_path)
  if not beam_pipeline_args:
    beam_pipeline_args = ('--direct_running_mode=in_memory',
                          '--direct_num_workers=1')
  return config_lib.PipelineConfig(
      pipeline_name=pipeline_name,
      pipeline_root=layout.pipeline_root,
      data_root=os.path.abspath(data_root),
      serving_model_dir=layout.serving_model_dir,
      schema_text=schema_text,
      presplit=report.layout == 'presplit',
      text=text_settings,
      trainer=trainer_settings,
      slice_by_lang=report.has_lang,
      beam_pipeline_args=tuple(beam_pipeline_args),
      metadata_path=layout.metadata_path,
      **overrides)


@dataclasses.dataclass
class ComponentRun:
  """One component's execution in the latest run, as MLMD recorded it."""
  component: str
  state: str  # 'COMPLETE', 'CACHED', 'FAILED', ...
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


# The Trainer's epoch-end log record (trainer_module.EpochLog): epoch, epochs
# and the epoch's values as JSON.
EPOCH_FINISHED_MESSAGE = 'autostrategy: epoch %d/%d finished %s'


class ProgressHandler(logging.Handler):
  """Turns LocalDagRunner's 'Component X is running/finished' logs into events.

  With `on_epoch`, the Trainer's epoch-end records become
  `on_epoch(epoch, epochs, values)` calls (values: loss, auc, val_auc,
  examples_per_second, ...), for a console line per epoch.
  """

  def __init__(self, on_event: Callable[[str, str, Optional[float]], None],
               on_epoch: Optional[Callable[[int, int, Dict[str, float]],
                                           None]] = None):
    super().__init__(level=logging.INFO)
    self._on_event = on_event
    self._on_epoch = on_epoch
    self._started: Dict[str, float] = {}

  def emit(self, record: logging.LogRecord) -> None:
    if record.msg == EPOCH_FINISHED_MESSAGE:
      if self._on_epoch:
        epoch, epochs, values = record.args
        self._on_epoch(epoch, epochs, json.loads(values))
      return
    if record.msg not in ('Component %s is running.',
                          'Component %s is finished.'):
      return
    component = record.args[0]
    if record.msg.endswith('running.'):
      self._started[component] = time.monotonic()
      self._on_event(component, 'started', None)
    else:
      elapsed = time.monotonic() - self._started.get(component, time.monotonic())
      self._on_event(component, 'finished', elapsed)


def run_pipeline(config: config_lib.PipelineConfig,
                 on_event: Optional[Callable[[str, str, Optional[float]], None]] = None,
                 until: str = '',
                 on_epoch: Optional[Callable[[int, int, Dict[str, float]],
                                             None]] = None) -> RunResult:
  """Runs `create_pipeline(config, until)` with LocalDagRunner; reads the outcome."""
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  handler = ProgressHandler(on_event, on_epoch) if on_event else None
  if handler:
    logging.getLogger().addHandler(handler)
  try:
    tfx.orchestration.LocalDagRunner().run(
        pipeline_lib.create_pipeline(config, until=until))
  finally:
    if handler:
      logging.getLogger().removeHandler(handler)
  return read_result(config)


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


def _latest_run(config: config_lib.PipelineConfig):
  """MLMD's store, the latest pipeline run's executions, node names by id."""
  import ml_metadata as mlmd  # pylint: disable=g-import-not-at-top
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  store = mlmd.MetadataStore(
      tfx.orchestration.metadata.sqlite_metadata_connection_config(
          config.metadata_path))
  runs = store.get_contexts_by_type('pipeline_run')
  if not runs:
    raise LookupError(f'{config.metadata_path}: no pipeline run recorded')
  latest = max(runs, key=lambda c: (c.create_time_since_epoch, c.id))
  node_contexts = {c.id: c.name.split('.')[-1]
                   for c in store.get_contexts_by_type('node')}
  return store, store.get_executions_by_context(latest.id), node_contexts


def read_result(config: config_lib.PipelineConfig) -> RunResult:
  """Reads the latest run's executions, blessing, metrics and push from MLMD."""
  import ml_metadata as mlmd  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  store, executions, node_contexts = _latest_run(config)
  states = {0: 'UNKNOWN', 1: 'NEW', 2: 'RUNNING', 3: 'COMPLETE', 4: 'FAILED',
            5: 'CACHED', 6: 'CANCELED'}
  components, outputs = [], {}
  for execution in executions:
    node = next((node_contexts[c.id]
                 for c in store.get_contexts_by_execution(execution.id)
                 if c.id in node_contexts), str(execution.id))
    seconds = None
    if execution.last_update_time_since_epoch and execution.create_time_since_epoch:
      seconds = (execution.last_update_time_since_epoch -
                 execution.create_time_since_epoch) / 1000.0
    components.append(ComponentRun(node, states.get(
        execution.last_known_state, str(execution.last_known_state)), seconds))
    events = store.get_events_by_execution_ids([execution.id])
    output_ids = [e.artifact_id for e in events
                  if e.type == mlmd.proto.Event.OUTPUT]
    outputs[node] = store.get_artifacts_by_id(output_ids)

  def artifact_of(node, type_name):
    type_ids = {t.id for t in store.get_artifact_types() if t.name == type_name}
    found = [a for a in outputs.get(node, []) if a.type_id in type_ids]
    return found[-1] if found else None

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
      model_dir=os.path.join(model.uri, 'Format-Serving') if model else None,
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
  import ml_metadata as mlmd  # pylint: disable=g-import-not-at-top
  store, executions, node_contexts = _latest_run(config)
  running = [e for e in executions
             if e.last_known_state == mlmd.proto.Execution.RUNNING]
  names = []
  for execution in running:
    execution.last_known_state = mlmd.proto.Execution.CANCELED
    names.extend(node_contexts[c.id]
                 for c in store.get_contexts_by_execution(execution.id)
                 if c.id in node_contexts)
  if running:
    store.put_executions(running)
  return names


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
