"""The one typed configuration object of a pipeline run."""

import dataclasses
import os
import re
from typing import Any, Dict, Optional, Tuple

from tfx_autostrategy import components as components_package
from tfx_autostrategy import conventions
from tfx_autostrategy import settings as settings_lib

PIPELINE_NAME_RE = re.compile(r'[a-z0-9][a-z0-9-]{0,127}')

_PACKAGE_COMPONENTS = os.path.dirname(
    os.path.abspath(components_package.__file__))
TRANSFORM_MODULE_FILE = os.path.join(_PACKAGE_COMPONENTS, 'transform',
                                     'preprocessing.py')
TRAINER_MODULE_FILE = os.path.join(_PACKAGE_COMPONENTS, 'trainer',
                                   'trainer_module.py')
# Import paths used where the code ships inside a container image.
PREPROCESSING_FN = ('tfx_autostrategy.components.transform.preprocessing.'
                    'preprocessing_fn')
RUN_FN = 'tfx_autostrategy.components.trainer.trainer_module.run_fn'


def validate_pipeline_name(name: str) -> str:
  """Returns `name` if Kubeflow/Vertex accept it, else raises ValueError."""
  if not PIPELINE_NAME_RE.fullmatch(name or ''):
    raise ValueError(
        f'invalid pipeline name {name!r}: use 1-128 characters from [a-z0-9-], '
        'starting with a letter or digit (Kubeflow and Vertex AI require it)')
  return name


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
  """Everything `create_pipeline` needs; nothing is read from the environment.

  Attributes:
    pipeline_name: [a-z0-9-] name (Kubeflow/Vertex rule, enforced everywhere).
    pipeline_root: where TFX writes artifacts (local dir or gs://).
    data_root: directory of CSV files (`train/` + `eval/` if `presplit`).
    serving_model_dir: Pusher's filesystem destination.
    schema_text: the raw-data schema (text-format Schema), the curated one
      with the run's column names (`schema_render.render_schema_text`).
    presplit: data_root has train/ and eval/ subdirectories.
    text: how Transform turns text into ids (shared with the Trainer).
    trainer: how the Trainer trains.
    train_steps: total training steps; 0 derives them from statistics.
    eval_steps: evaluation steps; 0 derives them from statistics.
    auc_threshold: Evaluator blesses the model at or above this AUC.
    min_auc_gain: the candidate's AUC minus the serving (latest blessed)
      model's must be at least this; 0 means not worse, negative allows a
      bounded regression. Ignored on the first run (no blessed model).
    slice_by_lang: add per-language slices to evaluation (needs `slice_column`).
    allow_anomalies: let the run go on despite ExampleValidator anomalies.
    beam_pipeline_args: Beam options for the Beam-based components.
    metadata_path: SQLite MLMD file ('' where the orchestrator provides MLMD).
    enable_cache: reuse outputs of unchanged components.
    use_module_files: package the module files (local runs; code edits
      invalidate caches) instead of importing them from the installed package
      (container images).
    transform_module_file: module file defining `preprocessing_fn`.
    trainer_module_file: module file defining `run_fn`.
    trainer_custom_config: extra Trainer custom_config (e.g. Vertex AI).
    trainer_executor_spec: a TFX `ExecutorClassSpec` replacing the Trainer's
      executor (None keeps ours); the Vertex compiler passes the one of the
      Vertex training executor.
  """
  pipeline_name: str
  pipeline_root: str
  data_root: str
  serving_model_dir: str
  schema_text: str
  presplit: bool = False
  text: settings_lib.TextSettings = settings_lib.TextSettings()
  trainer: settings_lib.TrainerSettings = settings_lib.TrainerSettings()
  train_steps: int = 0
  eval_steps: int = 0
  auc_threshold: float = conventions.DEFAULT_AUC_THRESHOLD
  min_auc_gain: float = 0.0
  slice_by_lang: bool = True
  allow_anomalies: bool = False
  beam_pipeline_args: Tuple[str, ...] = ()
  metadata_path: str = ''
  enable_cache: bool = True
  use_module_files: bool = True
  transform_module_file: str = TRANSFORM_MODULE_FILE
  trainer_module_file: str = TRAINER_MODULE_FILE
  trainer_custom_config: Optional[Dict[str, Any]] = None
  trainer_executor_spec: Optional[Any] = None

  def __post_init__(self):
    validate_pipeline_name(self.pipeline_name)
    if not 0.0 <= self.auc_threshold <= 1.0:
      raise ValueError(f'auc_threshold must be in [0, 1], got {self.auc_threshold}')
    if not -1.0 <= self.min_auc_gain <= 1.0:
      raise ValueError(f'min_auc_gain must be in [-1, 1], got {self.min_auc_gain}')
