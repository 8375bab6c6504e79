"""create_pipeline's pure parts: evaluation config and the component graph."""

import json

import pytest
import tensorflow_model_analysis as tfma

from tfx_autostrategy.pipeline import config as config_lib
from tfx_autostrategy.pipeline import pipeline as pipeline_lib
from tfx_autostrategy.pipeline import run_result


def _config(**overrides):
  return config_lib.PipelineConfig(
      pipeline_name='unit-test', pipeline_root='/tmp/root',
      data_root='/tmp/data', serving_model_dir='/tmp/serving',
      schema_text='', **overrides)


def test_auc_threshold_gates_the_overall_slice_only():
  eval_config = pipeline_lib.eval_config(_config(auc_threshold=0.75))
  slices = [list(s.feature_keys) for s in eval_config.slicing_specs]
  assert slices == [[], ['lang']]
  metrics = {m.class_name: m for m in eval_config.metrics_specs[0].metrics}
  auc = metrics['AUC']
  assert not auc.HasField('threshold')
  [per_slice] = auc.per_slice_thresholds
  assert [list(s.feature_keys) for s in per_slice.slicing_specs] == [[]]
  assert per_slice.threshold.value_threshold.lower_bound.value == 0.75


def test_min_auc_gain_is_a_change_threshold_against_the_baseline():
  eval_config = pipeline_lib.eval_config(_config(min_auc_gain=-0.02))
  metrics = {m.class_name: m for m in eval_config.metrics_specs[0].metrics}
  [per_slice] = metrics['AUC'].per_slice_thresholds
  change = per_slice.threshold.change_threshold
  assert change.absolute.value == pytest.approx(-0.02)
  assert change.direction == tfma.MetricDirection.HIGHER_IS_BETTER
  assert eval_config.model_specs[0].label_key == 'toxic'
  assert eval_config.model_specs[0].prediction_key == 'probabilities'


def test_blessing_needs_both_labels_in_the_overall_eval_split():
  # TFMA reports an AUC of 0 on one-class rows, which --auc-threshold 0
  # would pass; the mean label must lie strictly inside (0, 1) instead.
  eval_config = pipeline_lib.eval_config(_config(auc_threshold=0.0))
  metrics = {m.class_name: m for m in eval_config.metrics_specs[0].metrics}
  [per_slice] = metrics['MeanLabel'].per_slice_thresholds
  assert [list(s.feature_keys) for s in per_slice.slicing_specs] == [[]]
  bounds = per_slice.threshold.value_threshold
  assert 0.0 < bounds.lower_bound.value < 1e-6
  assert 1.0 - 1e-6 < bounds.upper_bound.value < 1.0


@pytest.mark.parametrize('mean_label, rows, reason', [
    (0.0, 61.0, 'the eval split has only label 0 (61 rows)'),
    (1.0, 1.0, 'the eval split has only label 1 (1 row)'),
    (1 / 61, 61.0, None),  # One positive row is enough for an AUC.
    (60 / 61, 61.0, None),
    (None, 61.0, None),  # An evaluation without the mean label: unknown.
])
def test_one_class_reason(mean_label, rows, reason):
  assert run_result.one_class_reason(
      {'mean_label': mean_label, 'example_count': rows},
      'the eval split') == reason


def test_no_language_slice_without_a_slice_column():
  eval_config = pipeline_lib.eval_config(_config(slice_by_lang=False))
  assert [list(s.feature_keys) for s in eval_config.slicing_specs] == [[]]


@pytest.mark.parametrize('presplit, inputs, outputs', [
    (False, [{'name': 'single_split', 'pattern': '*.csv'}],
     {'split_config': {'splits': [{'name': 'train', 'hash_buckets': 4},
                                  {'name': 'eval', 'hash_buckets': 1}]}}),
    (True, [{'name': 'train', 'pattern': 'train/*.csv'},
            {'name': 'eval', 'pattern': 'eval/*.csv'}], {}),
])
def test_example_gen_reads_the_layout_and_splits_4_to_1_by_hash(
    presplit, inputs, outputs):
  [example_gen] = [c for c in pipeline_lib.create_pipeline(
      _config(presplit=presplit)).components if c.id == 'CsvExampleGen']
  properties = example_gen.exec_properties
  assert json.loads(properties['input_config']) == {'splits': inputs}
  assert json.loads(properties['output_config']) == outputs


def test_each_component_reads_the_outputs_create_pipeline_wires_to_it():
  # The wiring is what create_pipeline decides (tfx.dsl.Pipeline only sorts
  # it): each input's producing component and output key, and the order-only
  # edge that makes Transform wait for the anomalies gate.
  components = pipeline_lib.create_pipeline(_config()).components
  by_id = {c.id: c for c in components}
  assert set(by_id) == set(pipeline_lib.COMPONENT_IDS)

  def inputs(component_id):
    return {key: (channel.producer_component_id, channel.output_key)
            for key, channel in by_id[component_id].inputs.items()
            if hasattr(channel, 'producer_component_id')}

  assert inputs('StatisticsGen') == {
      'examples': ('CsvExampleGen', 'examples'),
      'schema': ('ImportSchemaGen', 'schema')}
  assert inputs('ExampleValidator') == {
      'statistics': ('StatisticsGen', 'statistics'),
      'schema': ('ImportSchemaGen', 'schema')}
  assert inputs('AnomaliesGate') == {
      'anomalies': ('ExampleValidator', 'anomalies')}
  assert inputs('Transform') == {
      'examples': ('CsvExampleGen', 'examples'),
      'schema': ('ImportSchemaGen', 'schema')}
  assert {n.id for n in by_id['Transform'].upstream_nodes} == {
      'AnomaliesGate', 'CsvExampleGen', 'ImportSchemaGen'}
  assert inputs('AutoStrategyTrainer') == {
      'examples': ('Transform', 'transformed_examples'),
      'transform_graph': ('Transform', 'transform_graph'),
      'schema': ('ImportSchemaGen', 'schema'),
      'statistics': ('StatisticsGen', 'statistics')}
  # The raw examples, so that the exported serving signature (raw text in)
  # is what TFMA evaluates; the baseline is the latest blessed model.
  assert inputs('Evaluator') == {
      'examples': ('CsvExampleGen', 'examples'),
      'model': ('AutoStrategyTrainer', 'model'),
      'baseline_model': ('latest_blessed_model_resolver', 'model')}
  assert inputs('Pusher') == {
      'model': ('AutoStrategyTrainer', 'model'),
      'model_blessing': ('Evaluator', 'blessing')}
  # The resolver reads MLMD only: it depends on nothing in this run.
  assert not by_id['latest_blessed_model_resolver'].upstream_nodes


def test_eval_config_computes_the_report_plots_without_thresholds():
  # The run report draws ROC/PR and calibration from these TFMA plots.
  eval_config = pipeline_lib.eval_config(_config())
  metrics = {m.class_name: m for m in eval_config.metrics_specs[0].metrics}
  for name in ('ConfusionMatrixPlot', 'CalibrationPlot'):
    assert not metrics[name].per_slice_thresholds
    assert not metrics[name].HasField('threshold')
