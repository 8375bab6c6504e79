"""Spec of AutoStrategyTrainer: the stock Trainer's contract plus our settings."""

from tfx.proto import trainer_pb2
from tfx.types import component_spec
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs as std

STATISTICS_KEY = 'statistics'
PER_REPLICA_BATCH_SIZE_KEY = 'per_replica_batch_size'
EPOCHS_KEY = 'epochs'
ACCELERATOR_KEY = 'accelerator'
MODEL_NAME_KEY = 'model_name'
LEARNING_RATE_KEY = 'learning_rate'
STEPS_PER_EXECUTION_KEY = 'steps_per_execution'
PRECISION_KEY = 'precision'
HUB_MODEL_PATH_KEY = 'hub_model_path'
INPUT_CACHE_MB_KEY = 'input_cache_mb'
JIT_COMPILE_KEY = 'jit_compile'
BACKUP_EVERY_STEPS_KEY = 'backup_every_steps'
TEXT_SETTINGS_KEY = 'text_settings'

# Execution parameter name -> TrainerSettings field.
TRAINER_SETTING_KEYS = {
    PER_REPLICA_BATCH_SIZE_KEY: 'per_replica_batch_size',
    EPOCHS_KEY: 'epochs',
    ACCELERATOR_KEY: 'accelerator',
    MODEL_NAME_KEY: 'model',
    LEARNING_RATE_KEY: 'learning_rate',
    STEPS_PER_EXECUTION_KEY: 'steps_per_execution',
    PRECISION_KEY: 'precision',
    HUB_MODEL_PATH_KEY: 'hub_model_path',
    INPUT_CACHE_MB_KEY: 'input_cache_mb',
    JIT_COMPILE_KEY: 'jit_compile',
    BACKUP_EVERY_STEPS_KEY: 'backup_every_steps',
}


class AutoStrategyTrainerSpec(component_spec.ComponentSpec):
  """Inputs, outputs and primitive parameters of AutoStrategyTrainer.

  Keys shared with the stock Trainer keep their names, so the stock executor
  machinery (FnArgs, user-module packaging, the Vertex training extension)
  works unchanged.
  """

  PARAMETERS = {
      std.TRAIN_ARGS_KEY: component_spec.ExecutionParameter(
          type=trainer_pb2.TrainArgs),
      std.EVAL_ARGS_KEY: component_spec.ExecutionParameter(
          type=trainer_pb2.EvalArgs),
      std.MODULE_FILE_KEY: component_spec.ExecutionParameter(
          type=str, optional=True),
      std.MODULE_PATH_KEY: component_spec.ExecutionParameter(
          type=str, optional=True),
      std.RUN_FN_KEY: component_spec.ExecutionParameter(
          type=str, optional=True),
      std.CUSTOM_CONFIG_KEY: component_spec.ExecutionParameter(
          type=str, optional=True),
      PER_REPLICA_BATCH_SIZE_KEY: component_spec.ExecutionParameter(type=int),
      EPOCHS_KEY: component_spec.ExecutionParameter(type=int),
      ACCELERATOR_KEY: component_spec.ExecutionParameter(type=str),
      MODEL_NAME_KEY: component_spec.ExecutionParameter(type=str),
      LEARNING_RATE_KEY: component_spec.ExecutionParameter(type=float),
      STEPS_PER_EXECUTION_KEY: component_spec.ExecutionParameter(type=int),
      PRECISION_KEY: component_spec.ExecutionParameter(type=str),
      HUB_MODEL_PATH_KEY: component_spec.ExecutionParameter(type=str),
      INPUT_CACHE_MB_KEY: component_spec.ExecutionParameter(
          type=int, optional=True),
      JIT_COMPILE_KEY: component_spec.ExecutionParameter(
          type=str, optional=True),
      BACKUP_EVERY_STEPS_KEY: component_spec.ExecutionParameter(
          type=int, optional=True),
      # TextSettings JSON (settings.to_json): the model's input sizes.
      TEXT_SETTINGS_KEY: component_spec.ExecutionParameter(type=str),
  }
  INPUTS = {
      std.EXAMPLES_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.Examples),
      std.TRANSFORM_GRAPH_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.TransformGraph),
      std.SCHEMA_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.Schema, optional=True),
      STATISTICS_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.ExampleStatistics, optional=True),
      std.BASE_MODEL_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.Model, optional=True),
      std.HYPERPARAMETERS_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.HyperParameters, optional=True),
  }
  OUTPUTS = {
      std.MODEL_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.Model),
      std.MODEL_RUN_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.ModelRun),
  }
