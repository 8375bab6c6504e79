"""`autostrategy run`'s options as settings, and the checks before the run.

Everything here runs before TFX or TensorFlow is imported, so that bad data,
bad options or an unwritable output directory are rejected in a second or
two (tests/pipeline/test_bad_input.py asserts that neither was imported).
"""

import argparse
import contextlib
import dataclasses
import os
from typing import Any, Dict, Mapping

from tfx_autostrategy.cli import data_options
from tfx_autostrategy.pipeline import config as config_lib
from tfx_autostrategy.pipeline import local_runner
from tfx_autostrategy.pipeline import run_lock
from tfx_autostrategy.preflight import csv_check
from tfx_autostrategy.preflight import csv_layout
from tfx_autostrategy.preflight import csv_report
from tfx_autostrategy import settings
from tfx_autostrategy.cli import training_options

# Run options that are not settings of the run (shown nowhere in the report).
_NOT_SETTINGS = ('command', 'argv', 'output', 'json', 'data')


def trainer_settings(args: argparse.Namespace) -> settings.TrainerSettings:
  """The Trainer's settings from `run`'s options (validated there)."""
  return training_options.settings_from(
      args, training_options.RUN_OPTIONS + training_options.PLAN_OPTIONS,
      hub_model_path=os.path.abspath(args.hub_model_path)
      if args.hub_model_path else '')


def run_settings(args: argparse.Namespace,
                 defaults: Mapping[str, Any]) -> Dict[str, Any]:
  """Every option of `run`, and the names of those not at their default.

  Args:
    args: the parsed `run` options.
    defaults: the options of a bare `autostrategy run`.
  """
  values = {k: v for k, v in vars(args).items() if k not in _NOT_SETTINGS}
  return {'settings': values, 'changed_settings': sorted(
      k for k, v in values.items() if k in defaults and defaults[k] != v)}


@dataclasses.dataclass
class Checked:
  """What the preflight found and decided."""
  data_root: str
  report: csv_report.CsvReport
  config: config_lib.PipelineConfig
  lengths: data_options.Lengths


def check(args: argparse.Namespace, lock: contextlib.ExitStack) -> Checked:
  """Checks data, options and output directory; takes the lock; the config.

  The output directory's lock goes on `lock` once taken: before the first
  write to OUT (`build_config` renders the schema there), since a second run
  on OUT would share the MLMD store and pipeline root.

  Raises:
    ValueError: bad data or options (the message names the cause).
    OSError: the output directory cannot be written, or the disk is full.
    run_lock.RunLockedError: another run holds the output directory.
  """
  data_root = args.data or local_runner.sample_data_dir()
  # Options are checked before the data is read; `auto` lengths are
  # counted in the same pass as the CSV check.
  text = data_options.text_settings(
      args, data_options.placeholder_lengths(args))
  trainer = trainer_settings(args)
  counter = data_options.length_counter(text, args)
  report = csv_check.check_csv_dir(
      data_root, text_column=text.text_column,
      label_column=text.label_column, id_column=text.id_column,
      lang_column=text.slice_column, lengths=counter)
  lengths = data_options.resolve_lengths(
      args, counter, training_only=report.layout == csv_layout.PRESPLIT)
  text = dataclasses.replace(text, **lengths.values)
  # Only a forced CPU run is sure to have --cpu-replicas replicas.
  min_replicas = (args.cpu_replicas if args.accelerator == 'cpu' and
                  args.cpu_replicas else 1)
  report.warnings.extend(csv_report.check_batch_size(
      report, trainer.per_replica_batch_size, min_replicas))
  local_runner.check_output_dir(args.output)
  lock.enter_context(run_lock.hold(
      args.output, command=run_lock.command_line(getattr(args, 'argv',
                                                         None))))
  config = local_runner.build_config(
      data_root, args.output, text, trainer, report,
      beam_pipeline_args=args.beam_arg,
      auc_threshold=args.auc_threshold,
      min_auc_gain=args.min_auc_gain,
      allow_anomalies=args.allow_anomalies,
      enable_cache=not args.no_cache)
  return Checked(data_root, report, config, lengths)
