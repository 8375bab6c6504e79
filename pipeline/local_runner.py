"""Runs the pipeline on this machine: LocalDagRunner, SQLite MLMD, Beam Direct.

Thin by design: it lays out the output directory, supplies paths and Beam
arguments to `create_pipeline` and runs it. Reading the outcome back from
MLMD is `run_result`; turning log records into progress is `progress_log`.
"""

import dataclasses
import importlib.resources
import logging
import os
import tempfile
from typing import Any, Callable, Dict, Optional, Sequence

from tfx_autostrategy import conventions
from tfx_autostrategy.pipeline import atomic_io
from tfx_autostrategy.pipeline import config as config_lib
from tfx_autostrategy.pipeline import progress_log
from tfx_autostrategy.pipeline import run_result
from tfx_autostrategy.pipeline import schema_render
from tfx_autostrategy.preflight import csv_report
from tfx_autostrategy import settings as settings_lib
# `pipeline` imports TFX and TFMA (10-30 s); it is imported where a run needs
# it, so that the CLI rejects bad input in a second or two.



def sample_data_dir() -> str:
  """The bundled synthetic sample (see README)."""
  return str(importlib.resources.files('tfx_autostrategy') / 'sample')


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
  def summary_path(self) -> str:
    return os.path.join(self.output_dir, 'summary.json')

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
                 report: 'csv_report.CsvReport',
                 *,
                 pipeline_name: str = conventions.DEFAULT_PIPELINE_NAME,
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


def run_pipeline(config: config_lib.PipelineConfig,
                 on_event: Optional[Callable[[str, str, Optional[float]], None]] = None,
                 until: str = '',
                 on_epoch: Optional[Callable[[int, int, Dict[str, float]],
                                             None]] = None
                 ) -> run_result.RunResult:
  """Runs `create_pipeline(config, until)` with LocalDagRunner; reads the outcome."""
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  handler = (progress_log.ProgressHandler(on_event, on_epoch) if on_event
             else None)
  if handler:
    logging.getLogger().addHandler(handler)
  try:
    tfx.orchestration.LocalDagRunner().run(
        pipeline_lib.create_pipeline(config, until=until))
  finally:
    if handler:
      logging.getLogger().removeHandler(handler)
  return run_result.read_result(config)
