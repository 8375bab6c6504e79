"""Executor of AutoStrategyTrainer: the stock generic executor plus settings.

It parses the component's two settings parameters (`spec.py`, JSON) once,
first, so that a bad setting fails the step with its cause before any
artifact is read, and hands `run_fn` the parsed settings in `custom_config`
(not re-encoded: `trainer_module.settings_from_config` takes them as they
are), derives example counts from the statistics artifact (the stock Trainer cannot size epochs from data;
tensorflow/tfx#1355, #2810), rejects labels outside {0, 1} before training,
picks a resumable backup directory, and lets non-chief workers finish without
a serving export of their own.
"""

import hashlib
import json
import os
from typing import Any, Dict, List

import absl.logging
from tfx import types
from tfx.components.statistics_gen import stats_artifact_utils
from tfx.components.trainer import executor as trainer_executor
from tfx.components.util import udf_utils
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.types import standard_component_specs as std
from tfx.utils import json_utils

from tfx_autostrategy.components.trainer import spec
from tfx_autostrategy.components.trainer import trainer_module
from tfx_autostrategy import conventions
from tfx_autostrategy.distribute import cluster
from tfx_autostrategy import settings as settings_lib

ALLOWED_LABELS = conventions.LABELS


class LabelError(ValueError):
  """Labels outside the allowed values (accelerators would turn them into NaN)."""


def _parse_settings(exec_properties: Dict[str, Any], key: str, cls):
  """A settings parameter (JSON; unset: the defaults), parsed and checked."""
  return settings_lib.from_json(cls, exec_properties.get(key) or '{}')


def example_counts(statistics: types.Artifact) -> Dict[str, int]:
  """Examples per split, from a StatisticsGen artifact."""
  counts = {}
  for split in artifact_utils.decode_split_names(statistics.split_names):
    view = stats_artifact_utils.load_statistics(statistics, split)
    counts[split] = int(view.get_default_slice().proto().num_examples)
  return counts


def check_labels(statistics: types.Artifact, label_column: str) -> None:
  """Raises LabelError when any split has labels outside ALLOWED_LABELS.

  Args:
    statistics: StatisticsGen output over the raw examples.
    label_column: raw label column name.
  """
  low, high = min(ALLOWED_LABELS), max(ALLOWED_LABELS)
  for split in artifact_utils.decode_split_names(statistics.split_names):
    dataset = stats_artifact_utils.load_statistics(
        statistics, split).get_default_slice()
    feature = dataset.get_feature(label_column)
    if feature is None:
      raise LabelError(
          f'label column {label_column!r} is missing from split {split!r}')
    proto = feature.proto()
    kind = proto.WhichOneof('stats')
    if kind == 'string_stats':
      examples = {v.value: int(v.frequency)
                  for v in proto.string_stats.top_values[:5]}
      raise LabelError(
          f'label column {label_column!r} in split {split!r} holds strings '
          f'(value: rows {examples}), expected integers in {ALLOWED_LABELS}')
    num = proto.num_stats
    if num.min < low or num.max > high:
      raise LabelError(
          f'label column {label_column!r} in split {split!r} has values '
          f'outside {ALLOWED_LABELS}: min={num.min:g}, max={num.max:g}')


def backup_dir_for(input_dict: Dict[str, List[types.Artifact]],
                   output_dict: Dict[str, List[types.Artifact]],
                   exec_properties: Dict[str, Any]) -> str:
  """A BackupAndRestore directory that a retried execution finds again.

  `model_run` is fresh for every execution, so a retry would lose its
  checkpoints there. The key is the execution's inputs and parameters: a retry
  of the same work (same run or a rerun of the pipeline) resumes, different
  work starts over. Keras deletes the backup when training finishes.
  """
  key = json.dumps({
      'inputs': {k: sorted(a.uri for a in v) for k, v in input_dict.items()},
      'properties': {k: str(v) for k, v in exec_properties.items()},
  }, sort_keys=True)
  model_uri = artifact_utils.get_single_uri(output_dict[std.MODEL_KEY])
  component_dir = os.path.dirname(os.path.dirname(model_uri))
  return os.path.join(component_dir, 'backup',
                      hashlib.sha256(key.encode()).hexdigest()[:16])


class Executor(trainer_executor.GenericExecutor):
  """Runs `run_fn` with the settings, counts and backup dir it needs."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    self._log_startup(input_dict, output_dict, exec_properties)
    # Settings first: a bad one is the step's error, not what it leads to.
    trainer_settings = _parse_settings(
        exec_properties, spec.TRAINER_SETTINGS_KEY,
        settings_lib.TrainerSettings)
    text_settings = _parse_settings(
        exec_properties, spec.TEXT_SETTINGS_KEY, settings_lib.TextSettings)
    custom_config = json_utils.loads(
        exec_properties.get(std.CUSTOM_CONFIG_KEY) or 'null') or {}
    statistics = input_dict.get(spec.STATISTICS_KEY)
    if statistics:
      check_labels(statistics[0], text_settings.label_column)
      custom_config[trainer_module.EXAMPLE_COUNTS_KEY] = example_counts(
          statistics[0])
    custom_config[trainer_module.BACKUP_DIR_KEY] = backup_dir_for(
        input_dict, output_dict, exec_properties)

    exec_properties = dict(exec_properties)
    exec_properties[std.CUSTOM_CONFIG_KEY] = json_utils.dumps(custom_config)
    fn_args = self._GetFnArgs(input_dict, output_dict, exec_properties)
    # The parsed settings, after _GetFnArgs has read custom_config's JSON.
    fn_args.custom_config[trainer_module.TRAINER_KEY] = trainer_settings
    fn_args.custom_config[trainer_module.TEXT_KEY] = text_settings
    run_fn = udf_utils.get_fn(exec_properties, 'run_fn')
    absl.logging.info('Training model with %s.', trainer_settings)
    run_fn(fn_args)

    if (cluster.chief_from_environ()
        and not fileio.exists(fn_args.serving_model_dir)):
      raise RuntimeError(
          f'run_fn did not export a model to {fn_args.serving_model_dir}')
