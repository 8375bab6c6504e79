"""The settings (tfx_autostrategy/settings.py): the one check of every value.

The plan, the Trainer and the commands take `TrainerSettings` as built, so a
value a command or a pipeline parameter gets wrong is refused here, with the
message the commands print after `error: `.
"""

import json

import pytest

from tfx_autostrategy import settings
from tfx_autostrategy.cli import training_options


@pytest.mark.parametrize('values, message', [
    ({'precision': 'fp8'},
     "precision must be one of ('float32', 'mixed_float16', 'mixed_bfloat16') "
     "or empty, got 'fp8'"),
    ({'per_replica_batch_size': 0}, 'per_replica_batch_size must be >= 1, got 0'),
    ({'steps_per_execution': -1}, 'steps_per_execution must be >= 0, got -1'),
    ({'backup_every_steps': -2},
     'backup_every_steps must be >= 0 (or -1 for the device default), got -2'),
    ({'jit_compile': 'yes'},
     "jit_compile must be one of ('auto', 'on', 'off'), got 'yes'"),
    ({'accelerator': 'nvidia-t4'},
     "accelerator must be one of ('auto', 'tpu', 'gpu', 'cpu'), got "
     "'nvidia-t4'"),
    ({'epochs': 0}, 'epochs must be >= 1, got 0'),
    ({'model': 'hub'}, 'model=hub needs hub_model_path'),
])
def test_trainer_settings_refuse_a_bad_value(values, message):
  with pytest.raises(ValueError) as raised:
    settings.TrainerSettings(**values)
  assert str(raised.value) == message


def test_every_precision_and_the_device_default_are_accepted():
  for precision in ('',) + settings.PRECISIONS:
    assert settings.TrainerSettings(precision=precision).precision == precision


def test_from_json_round_trips_and_refuses_unknown_keys():
  trainer = settings.TrainerSettings(model='transformer', precision='float32',
                                     steps_per_execution=4)
  assert settings.from_json(settings.TrainerSettings,
                            settings.to_json(trainer)) == trainer
  assert settings.from_json(settings.TrainerSettings,
                            settings.to_dict(trainer)) == trainer
  with pytest.raises(ValueError, match=r"unknown TrainerSettings keys: "
                     r"\['per_replica_batch'\]"):
    settings.from_json(settings.TrainerSettings,
                       json.dumps({'per_replica_batch': 8}))


def test_settings_from_parsed_options():
  """A command's options become settings in one place, checked there."""
  import argparse  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser()
  training_options.add(parser, *training_options.PLAN_OPTIONS)
  args = parser.parse_args(['--accelerator', 'cpu', '--cpu-replicas', '2',
                            '--per-replica-batch-size', '12',
                            '--precision', 'mixed_bfloat16'])
  trainer = training_options.settings_from(
      args, training_options.PLAN_OPTIONS, model='transformer')
  assert trainer == settings.TrainerSettings(
      accelerator='cpu', per_replica_batch_size=12, precision='mixed_bfloat16',
      model='transformer')
  args = parser.parse_args(['--steps-per-execution', '-3'])
  with pytest.raises(ValueError,
                     match='^steps_per_execution must be >= 0, got -3$'):
    training_options.settings_from(args, training_options.PLAN_OPTIONS)
