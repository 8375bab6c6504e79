"""Spec of AutoStrategyTrainer: the stock Trainer's spec plus our settings.

It extends `standard_component_specs.TrainerSpec`, so every stock key (and the
stock executor machinery that reads them: FnArgs, user-module packaging, the
Vertex training extension) stays as TFX defines it. Our additions are the
statistics input and two parameters, each one `settings.to_json` string: the
`TrainerSettings` and the `TextSettings`. One parameter per settings class
rather than one per field, because a field named `model` cannot be a
parameter beside the stock `model` output (ComponentSpec names are unique).
"""

from typing import Dict

from tfx.types import component_spec
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs as std

from tfx_autostrategy import settings as settings_lib

STATISTICS_KEY = 'statistics'
# `settings.to_json(TrainerSettings)`: model, batch, epochs, accelerator, ...
TRAINER_SETTINGS_KEY = 'trainer_settings'
# `settings.to_json(TextSettings)`: the model's input sizes.
TEXT_SETTINGS_KEY = 'text_settings'


class AutoStrategyTrainerSpec(std.TrainerSpec):
  """Inputs, outputs and primitive parameters of AutoStrategyTrainer."""

  PARAMETERS = {
      **std.TrainerSpec.PARAMETERS,
      TRAINER_SETTINGS_KEY: component_spec.ExecutionParameter(type=str),
      TEXT_SETTINGS_KEY: component_spec.ExecutionParameter(type=str),
  }
  INPUTS = {
      **std.TrainerSpec.INPUTS,
      # The stock Trainer may run without Transform; this one reads its
      # fixed-length output.
      std.TRANSFORM_GRAPH_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.TransformGraph),
      STATISTICS_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.ExampleStatistics, optional=True),
  }
  OUTPUTS = std.TrainerSpec.OUTPUTS


def settings_parameters(trainer_settings: settings_lib.TrainerSettings,
                        text_settings: settings_lib.TextSettings
                       ) -> Dict[str, str]:
  """The two settings parameters, as the component and rehearsals set them."""
  return {TRAINER_SETTINGS_KEY: settings_lib.to_json(trainer_settings),
          TEXT_SETTINGS_KEY: settings_lib.to_json(text_settings)}

