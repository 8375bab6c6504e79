"""`create_pipeline`: the one definition every orchestrator runs.

Pure: it builds and returns a `tfx.dsl.Pipeline` from a `PipelineConfig`,
reading no files and no environment, so the local runner and the
Kubeflow/Vertex compiler run the same graph.
"""

import importlib
import inspect
from typing import Dict, List

import tensorflow_model_analysis as tfma
from tfx import v1 as tfx

from tfx_autostrategy.components.gate.component import AnomaliesGate
from tfx_autostrategy.components.inline_schema.component import InlineSchemaGen
from tfx_autostrategy.components.trainer.component import AutoStrategyTrainer
from tfx_autostrategy import conventions
from tfx_autostrategy.pipeline import code_fingerprint
from tfx_autostrategy.pipeline import config as config_lib
from tfx_autostrategy import settings as settings_lib

# Component ids, as they appear in MLMD, logs and compiled pipeline specs.
EXAMPLE_GEN = 'CsvExampleGen'
STATISTICS_GEN = 'StatisticsGen'
SCHEMA_GEN = 'ImportSchemaGen'
EXAMPLE_VALIDATOR = 'ExampleValidator'
ANOMALIES_GATE = 'AnomaliesGate'
TRANSFORM = 'Transform'
TRAINER = 'AutoStrategyTrainer'
EVALUATOR = 'Evaluator'
BASELINE_RESOLVER = 'latest_blessed_model_resolver'
PUSHER = 'Pusher'
COMPONENT_IDS = (EXAMPLE_GEN, STATISTICS_GEN, SCHEMA_GEN, EXAMPLE_VALIDATOR,
                 ANOMALIES_GATE, TRANSFORM, TRAINER, BASELINE_RESOLVER, EVALUATOR,
                 PUSHER)


def _input_config(presplit: bool) -> tfx.proto.Input:
  return tfx.proto.Input(splits=[
      tfx.proto.Input.Split(name=name, pattern=pattern)
      for name, pattern in conventions.input_patterns(presplit).items()])


def _output_config(presplit: bool) -> tfx.proto.Output:
  if presplit:
    return tfx.proto.Output()
  # Hashing the serialized example makes the split stable across runs.
  return tfx.proto.Output(split_config=tfx.proto.SplitConfig(splits=[
      tfx.proto.SplitConfig.Split(name=name, hash_buckets=buckets)
      for name, buckets in conventions.HASH_BUCKETS.items()]))


# Thresholds are inclusive; a mean label within this of 0 or 1 means fewer
# than one row in 10^9 has the other label, i.e. none.
_ONE_CLASS_MARGIN = 1e-9


def _both_labels_threshold() -> tfma.MetricThreshold:
  """Passes only if the eval rows hold both labels (0 < mean label < 1)."""
  return tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(
      lower_bound={'value': _ONE_CLASS_MARGIN},
      upper_bound={'value': 1.0 - _ONE_CLASS_MARGIN}))


def eval_config(config: config_lib.PipelineConfig) -> tfma.EvalConfig:
  """AUC (the blessing threshold), accuracy and friends, overall and by lang.

  The AUC threshold gates the overall slice only: a plain `threshold` would
  apply to every language slice too, and a few dozen eval rows of one
  language are too noisy to veto a model. Per-language AUCs are reported.

  The mean label of each slice is computed too: a slice whose rows all have
  one label has no AUC, yet TFMA reports 0 there (and a model would pass
  `--auc-threshold 0`). So the overall mean label must lie strictly between
  0 and 1 for a blessing, and the local runner reports such AUCs as
  undefined (`run_result.one_class_reason`).

  The confusion-matrix and calibration plots feed the run report
  (`tfx_autostrategy/report/render.py`).
  """
  slicing_specs = [tfma.SlicingSpec()]
  if config.slice_by_lang and config.text.slice_column:
    slicing_specs.append(
        tfma.SlicingSpec(feature_keys=[config.text.slice_column]))
  auc_threshold = tfma.MetricThreshold(
      value_threshold=tfma.GenericValueThreshold(
          lower_bound={'value': config.auc_threshold}),
      # Compared with the baseline (the latest blessed model) when the
      # Resolver finds one; TFMA skips it on the first run.
      change_threshold=tfma.GenericChangeThreshold(
          direction=tfma.MetricDirection.HIGHER_IS_BETTER,
          absolute={'value': config.min_auc_gain}))
  return tfma.EvalConfig(
      model_specs=[
          tfma.ModelSpec(
              signature_name=conventions.SERVING_SIGNATURE,
              label_key=config.text.label_column,
              prediction_key=conventions.PROBABILITIES)
      ],
      slicing_specs=slicing_specs,
      metrics_specs=[
          tfma.MetricsSpec(metrics=[
              tfma.MetricConfig(class_name='ExampleCount'),
              tfma.MetricConfig(
                  class_name='AUC',
                  per_slice_thresholds=[
                      tfma.PerSliceMetricThreshold(
                          slicing_specs=[tfma.SlicingSpec()],
                          threshold=auc_threshold)
                  ]),
              tfma.MetricConfig(
                  class_name='MeanLabel',
                  per_slice_thresholds=[
                      tfma.PerSliceMetricThreshold(
                          slicing_specs=[tfma.SlicingSpec()],
                          threshold=_both_labels_threshold())
                  ]),
              tfma.MetricConfig(class_name='BinaryAccuracy'),
              tfma.MetricConfig(class_name='Precision'),
              tfma.MetricConfig(class_name='Recall'),
              # The run report's ROC, precision-recall and calibration
              # curves come from these (TFMA's thresholds, not recomputed).
              tfma.MetricConfig(class_name='ConfusionMatrixPlot'),
              tfma.MetricConfig(class_name='CalibrationPlot'),
          ])
      ])


def _module_of(dotted_path: str) -> str:
  """The source file of the module holding `dotted_path`'s last name."""
  return importlib.import_module(dotted_path.rsplit('.', 1)[0]).__file__


def code_fingerprints(config: config_lib.PipelineConfig) -> Dict[str, str]:
  """{'transform': hash, 'trainer': hash} of the code each component runs.

  The Trainer runs its executor (AutoStrategyTrainer's own or the one of
  `trainer_executor_spec`) and `run_fn` with what they import; Transform
  runs `preprocessing_fn` with what it imports.
  """
  if config.use_module_files:
    transform_entry = config.transform_module_file
    trainer_entry = config.trainer_module_file
  else:
    transform_entry = _module_of(config_lib.PREPROCESSING_FN)
    trainer_entry = _module_of(config_lib.RUN_FN)
  executor_module = inspect.getsourcefile(
      (config.trainer_executor_spec or AutoStrategyTrainer.EXECUTOR_SPEC)
      .executor_class)
  return {
      'transform': code_fingerprint.fingerprint([transform_entry]),
      'trainer': code_fingerprint.fingerprint([trainer_entry, executor_module]),
  }


def create_components(config: config_lib.PipelineConfig) -> List:
  """The pipeline's components, in dependency order."""
  example_gen = tfx.components.CsvExampleGen(
      input_base=config.data_root,
      input_config=_input_config(config.presplit),
      output_config=_output_config(config.presplit))
  # The id stays ImportSchemaGen's: MLMD histories, logs and the tests know
  # the step by it, and it does that component's job from text instead.
  schema_gen = InlineSchemaGen(schema_text=config.schema_text).with_id(
      SCHEMA_GEN)
  statistics_gen = tfx.components.StatisticsGen(
      examples=example_gen.outputs['examples'],
      schema=schema_gen.outputs['schema'])
  example_validator = tfx.components.ExampleValidator(
      statistics=statistics_gen.outputs['statistics'],
      schema=schema_gen.outputs['schema'])
  gate = AnomaliesGate(
      anomalies=example_validator.outputs['anomalies'],
      allow_anomalies=config.allow_anomalies)

  if config.use_module_files:
    transform_code = {'module_file': config.transform_module_file}
    trainer_code = {'module_file': config.trainer_module_file}
  else:
    transform_code = {'preprocessing_fn': config_lib.PREPROCESSING_FN}
    trainer_code = {'run_fn': config_lib.RUN_FN}
  # TFX's cache key covers the module file's directory only; these cover all
  # the code each component runs (see code_fingerprint).
  fingerprints = code_fingerprints(config)
  fingerprint_key = code_fingerprint.CODE_FINGERPRINT_KEY

  transform = tfx.components.Transform(
      examples=example_gen.outputs['examples'],
      schema=schema_gen.outputs['schema'],
      custom_config={'text': settings_lib.to_dict(config.text),
                     fingerprint_key: fingerprints['transform']},
      # Statistics of the transformed ids are not used and cost a Beam pass.
      disable_statistics=True,
      **transform_code)
  # Anomalies stop the run before any data is transformed.
  transform.add_upstream_node(gate)

  trainer = AutoStrategyTrainer(
      examples=transform.outputs['transformed_examples'],
      transform_graph=transform.outputs['transform_graph'],
      schema=schema_gen.outputs['schema'],
      statistics=statistics_gen.outputs['statistics'],
      text_settings=config.text,
      trainer_settings=config.trainer,
      train_args=tfx.proto.TrainArgs(num_steps=config.train_steps),
      eval_args=tfx.proto.EvalArgs(num_steps=config.eval_steps),
      custom_config={**(config.trainer_custom_config or {}),
                     fingerprint_key: fingerprints['trainer']},
      custom_executor_spec=config.trainer_executor_spec,
      **trainer_code).with_id(TRAINER)

  # The serving model: the latest model the Evaluator blessed (none at first).
  baseline_resolver = tfx.dsl.Resolver(
      strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
      model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
      model_blessing=tfx.dsl.Channel(
          type=tfx.types.standard_artifacts.ModelBlessing)).with_id(
              BASELINE_RESOLVER)
  evaluator = tfx.components.Evaluator(
      examples=example_gen.outputs['examples'],
      model=trainer.outputs['model'],
      baseline_model=baseline_resolver.outputs['model'],
      eval_config=eval_config(config))
  pusher = tfx.components.Pusher(
      model=trainer.outputs['model'],
      model_blessing=evaluator.outputs['blessing'],
      push_destination=tfx.proto.PushDestination(
          filesystem=tfx.proto.PushDestination.Filesystem(
              base_directory=config.serving_model_dir)))
  return [example_gen, schema_gen, statistics_gen, example_validator, gate,
          transform, trainer, baseline_resolver, evaluator, pusher]


def create_pipeline(config: config_lib.PipelineConfig,
                    until: str = '') -> tfx.dsl.Pipeline:
  """Builds the text-classification pipeline described by `config`.

  Args:
    config: the pipeline's configuration.
    until: a component id: leave out every component after it (e.g. up to
      Transform for `autostrategy rehearse`); '' keeps the whole pipeline.
  """
  components = create_components(config)
  if until:
    ids = [c.id for c in components]
    components = components[:ids.index(until) + 1]
  metadata = (
      tfx.orchestration.metadata.sqlite_metadata_connection_config(
          config.metadata_path) if config.metadata_path else None)
  return tfx.dsl.Pipeline(
      pipeline_name=config.pipeline_name,
      pipeline_root=config.pipeline_root,
      components=components,
      enable_cache=config.enable_cache,
      metadata_connection_config=metadata,
      beam_pipeline_args=list(config.beam_pipeline_args))
