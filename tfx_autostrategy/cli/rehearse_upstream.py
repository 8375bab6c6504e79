"""What an `autostrategy rehearse` trains on: the Transform output of a run.

The latest finished Transform, StatisticsGen and schema outputs recorded in
the output directory's MLMD store, or, when it has none, a local run of the
pipeline up to Transform on `--data` (or the bundled sample) to make them.
"""

import json
import os
import time
from typing import Any, Dict, Optional

from tfx_autostrategy.cli import failures


def _upstream_from_mlmd(metadata_path: str) -> Optional[Dict[str, Any]]:
  """The latest finished Transform, statistics and schema outputs in MLMD."""
  if not os.path.exists(metadata_path):
    return None
  from tfx_autostrategy.pipeline import mlmd_runs  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy import settings  # pylint: disable=g-import-not-at-top

  def described(record, key: str) -> Optional[Dict[str, Any]]:
    """The artifact on output `key` as the Trainer's input dict names it."""
    if record is None or not record.outputs.get(key):
      return None
    type_name, artifact = record.outputs[key][-1]
    splits = artifact.properties.get('split_names')
    return {'type': type_name, 'uri': artifact.uri,
            'splits': json.loads(splits.string_value) if splits else None}

  latest = mlmd_runs.latest_finished(
      metadata_path, (pipeline_lib.TRANSFORM, pipeline_lib.STATISTICS_GEN,
                      pipeline_lib.SCHEMA_GEN))
  transform = latest[pipeline_lib.TRANSFORM]
  inputs = {
      'examples': described(transform, 'transformed_examples'),
      'transform_graph': described(transform, 'transform_graph'),
      'statistics': described(latest[pipeline_lib.STATISTICS_GEN],
                              'statistics'),
      'schema': described(latest[pipeline_lib.SCHEMA_GEN], 'schema'),
  }
  if not all(inputs.values()):
    return None
  custom_config = json.loads(
      transform.execution.custom_properties['custom_config'].string_value)
  return {
      'inputs': {key: [value] for key, value in inputs.items()},
      'text_settings': settings.from_json(settings.TextSettings,
                                          custom_config['text']),
  }


def prepare_upstream(data: str, output_dir: str, out) -> Dict[str, Any]:
  """Transform output to train on: the latest in OUT, or a new local run.

  Args:
    data: CSV directory for a new run ('' = the bundled sample).
    output_dir: the rehearsal's output directory (OUT).
    out: where the progress lines go.

  Returns:
    `{'inputs': the Trainer's input artifacts (type, URI, splits),
    'text_settings': the TextSettings Transform ran with}`.

  Raises:
    ValueError, OSError: bad data or output directory (the CSV preflight).
    failures.RehearsalError: the pipeline up to Transform failed.
  """
  from tfx_autostrategy.pipeline import local_runner  # pylint: disable=g-import-not-at-top
  layout = local_runner.Layout(os.path.abspath(output_dir))
  upstream = _upstream_from_mlmd(layout.metadata_path)
  if upstream:
    print(f'transform output: reused from {layout.pipeline_root}', file=out)
    return upstream
  from tfx_autostrategy.cli import console  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.preflight import csv_check  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy import settings  # pylint: disable=g-import-not-at-top
  data_root = data or local_runner.sample_data_dir()
  text_settings = settings.TextSettings()
  report = csv_check.check_csv_dir(
      data_root, text_column=text_settings.text_column,
      label_column=text_settings.label_column,
      id_column=text_settings.id_column,
      lang_column=text_settings.slice_column)
  local_runner.check_output_dir(output_dir)
  config = local_runner.build_config(data_root, output_dir, text_settings,
                                     settings.TrainerSettings(), report)
  print(f'transform output: none in {layout.output_dir} yet; running the '
        f'pipeline up to Transform on {os.path.abspath(data_root)} '
        f'(log: {layout.log_path})', file=out)
  started = time.monotonic()
  try:
    with console.logs_to_file(layout.log_path):
      local_runner.run_pipeline(config, until=pipeline_lib.TRANSFORM)
  except Exception as error:  # pylint: disable=broad-except
    raise failures.RehearsalError(
        f'the pipeline up to Transform failed: {failures.error_text(error)}'
    ) from error
  print(f'transform output: ready in {time.monotonic() - started:.0f} s',
        file=out)
  return _upstream_from_mlmd(layout.metadata_path)
