"""AutoStrategyTrainer: a TFX Trainer that picks its tf.distribute strategy."""

from typing import Any, Dict, Optional

from tfx import types
from tfx.components.util import udf_utils
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs as std
from tfx.utils import json_utils

from tfx_autostrategy.components.trainer import executor
from tfx_autostrategy.components.trainer import spec
from tfx_autostrategy import settings as settings_lib


class AutoStrategyTrainer(base_component.BaseComponent):
  """Trains a text classifier on TPU, GPUs, several workers or a CPU.

  Inputs are those of the stock Trainer plus the optional `statistics`
  (StatisticsGen output) from which steps per epoch are derived when
  `train_args.num_steps` is not set.
  """

  SPEC_CLASS = spec.AutoStrategyTrainerSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(
      self,
      examples: types.BaseChannel,
      transform_graph: types.BaseChannel,
      text_settings: settings_lib.TextSettings,
      trainer_settings: settings_lib.TrainerSettings,
      module_file: Optional[str] = None,
      run_fn: Optional[str] = None,
      schema: Optional[types.BaseChannel] = None,
      statistics: Optional[types.BaseChannel] = None,
      base_model: Optional[types.BaseChannel] = None,
      hyperparameters: Optional[types.BaseChannel] = None,
      train_args: Optional[trainer_pb2.TrainArgs] = None,
      eval_args: Optional[trainer_pb2.EvalArgs] = None,
      custom_config: Optional[Dict[str, Any]] = None,
      custom_executor_spec: Optional[executor_spec.ExecutorSpec] = None):
    """Constructs an AutoStrategyTrainer.

    Args:
      examples: transformed examples (Transform's `transformed_examples`).
      transform_graph: Transform's `transform_graph`.
      text_settings: the settings Transform used (model input sizes).
      trainer_settings: model, batch, epochs, accelerator, precision.
      module_file: file defining `run_fn` (packaged by TFX, so that editing it
        invalidates the cache). Exactly one of this and `run_fn`.
      run_fn: import path of `run_fn` (for container images that carry the
        code).
      schema: optional Schema artifact.
      statistics: optional ExampleStatistics; gives example counts per split
        and the label range checked before training.
      base_model: optional Model to warm-start from.
      hyperparameters: optional HyperParameters artifact.
      train_args: TrainArgs; `num_steps` unset means "from statistics".
      eval_args: EvalArgs; `num_steps` unset means "from statistics".
      custom_config: extra JSON-able dict passed through to `run_fn` (e.g. the
        Vertex AI training arguments).
      custom_executor_spec: replaces the executor, e.g. by the Vertex AI
        training executor that runs ours remotely.

    Raises:
      ValueError: not exactly one of `module_file` and `run_fn`.
    """
    if bool(module_file) == bool(run_fn):
      raise ValueError("Exactly one of 'module_file' or 'run_fn' is needed.")
    component_spec = spec.AutoStrategyTrainerSpec(
        examples=examples,
        transform_graph=transform_graph,
        schema=schema,
        statistics=statistics,
        base_model=base_model,
        hyperparameters=hyperparameters,
        train_args=train_args or trainer_pb2.TrainArgs(),
        eval_args=eval_args or trainer_pb2.EvalArgs(),
        module_file=module_file,
        run_fn=run_fn,
        custom_config=json_utils.dumps(custom_config or {}),
        **spec.settings_parameters(trainer_settings, text_settings),
        model=types.Channel(type=standard_artifacts.Model),
        model_run=types.Channel(type=standard_artifacts.ModelRun))
    super().__init__(spec=component_spec,
                     custom_executor_spec=custom_executor_spec)
    if module_file and udf_utils.should_package_user_modules():
      # TFX packages the module's directory into a wheel whose hash keys the
      # cache; MODULE_PATH then replaces MODULE_FILE.
      udf_utils.add_user_module_dependency(self, std.MODULE_FILE_KEY,
                                           std.MODULE_PATH_KEY)
