"""kfp_entrypoint: input types restored from the spec, outputs laid out locally.

Cheap (no step runs, one small subprocess); the whole compiled pipeline runs
through it in test_compiled_pipelines.py (KFP mode).
"""

import json
import subprocess
import sys

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
import pytest

from tfx_autostrategy.kubeflow import kfp_entrypoint
from tfx_autostrategy.kubeflow import targets

EXAMPLES_SCHEMA = ('title: tfx.Examples\ntype: object\nproperties:\n  '
                   'split_names:\n    type: string\n')
INPUTS_SPEC = {'artifacts': {
    'examples': {'artifactType': {'instanceSchema': EXAMPLES_SCHEMA}},
    'model': {'artifactType': {'schemaTitle': 'tfx.Model'}}}}
# What the KFP v2 driver passes for an upstream output: read back from MLMD.
FROM_MLMD = {'name': '7', 'uri': 'gs://b/root/run/Gen/examples',
             'type': {'instanceSchema': ''},
             'metadata': {'split_names': '["train", "eval"]', 'span': 0.0,
                          'display_name': 'examples',
                          'store_session_info': '{}'}}


def executor_input(**artifacts):
  return {'inputs': {'artifacts': {k: {'artifacts': [v]}
                                   for k, v in artifacts.items()}},
          'outputs': {'artifacts': {}, 'outputFile': '/tmp/x/out.json'}}


def parse_with_tfx(invocation):
  from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils  # pylint: disable=g-import-not-at-top
  message = json_format.ParseDict(invocation,
                                  pipeline_spec_pb2.ExecutorInput())
  return kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(
      message.inputs.artifacts)


def test_tfx_alone_still_cannot_parse_what_the_kfp_driver_passes():
  # Pinned to the lock's TFX (1.16): when these stop failing, the type
  # restoring in kfp_entrypoint is no longer needed.
  with pytest.raises(AttributeError,
                     match="'NoneType' object has no attribute 'get'"):
    parse_with_tfx(executor_input(examples=FROM_MLMD))
  with pytest.raises(ImportError, match='system.Model'):
    parse_with_tfx(executor_input(model=dict(
        FROM_MLMD, type={'schemaTitle': 'system.Model'})))


def test_types_come_back_from_the_inputs_spec():
  invocation = executor_input(
      examples=FROM_MLMD,
      model=dict(FROM_MLMD, name='8', type={'schemaTitle': 'system.Model'}))
  kfp_entrypoint.restore_input_types('Trainer', invocation, INPUTS_SPEC)
  parsed = parse_with_tfx(invocation)
  [examples], [model] = parsed['examples'], parsed['model']
  assert type(examples).__name__ == 'Examples'
  assert examples.split_names == '["train", "eval"]'
  assert examples.span == 0
  assert examples.uri == 'gs://b/root/run/Gen/examples'
  assert type(model).__name__ == 'Model'


@pytest.mark.parametrize('key, arrived, message', [
    ('examples', {'schemaTitle': 'tfx.Model'},
     "task Transform: input artifact 'examples' arrived with type "
     "'tfx.Model', which cannot be typed: the inputs spec types it "
     "'tfx.Examples'"),
    ('examples', {'schemaTitle': 'system.Model'},
     "task Transform: input artifact 'examples' arrived with type "
     "'system.Model', which cannot be typed: the inputs spec types it "
     "'tfx.Examples'"),
    ('statistics', {'instanceSchema': ''},
     "task Transform: input artifact 'statistics' arrived with type "
     "'(empty schema)', which cannot be typed: the inputs spec declares no "
     'type for it'),
])
def test_an_input_that_cannot_be_typed_is_named(key, arrived, message):
  invocation = executor_input(**{key: dict(FROM_MLMD, type=arrived)})
  with pytest.raises(kfp_entrypoint.UntypedInput) as failure:
    kfp_entrypoint.restore_input_types('Transform', invocation, INPUTS_SPEC)
  assert str(failure.value) == message


def test_the_step_fails_with_one_line_before_tfx_runs():
  invocation = executor_input(examples=dict(
      FROM_MLMD, type={'schemaTitle': 'tfx.Schema'}))
  proc = subprocess.run(
      [sys.executable, '-m', targets.KFP_ENTRYPOINT, '--task_name',
       'StatisticsGen', '--executor_class_path', 'no.such.Executor',
       '--json_serialized_invocation_args', json.dumps(invocation),
       '--json_serialized_inputs_spec_args', json.dumps(INPUTS_SPEC)],
      capture_output=True, text=True, timeout=120, check=False)
  assert proc.returncode == 1
  assert proc.stderr == (
      "kfp_entrypoint: task StatisticsGen: input artifact 'examples' arrived "
      "with type 'tfx.Schema', which cannot be typed: the inputs spec types "
      "it 'tfx.Examples'\n")


def test_outputs_go_to_the_launchers_local_path_and_back(tmp_path):
  invocation = {'outputs': {'artifacts': {
      'model': {'artifacts': [{'uri': 'gs://b/root/r/Trainer/model'}]},
      'other': {'artifacts': [{'uri': 'file:///x/y'}]}},
      'outputFile': str(tmp_path / 'out.json')}}
  prefixes = {'gs://': str(tmp_path) + '/gcs/'}
  moved = kfp_entrypoint.localize_outputs(invocation, prefixes)
  local = str(tmp_path / 'gcs/b/root/r/Trainer/model')
  assert moved == {local: 'gs://b/root/r/Trainer/model'}
  outputs = invocation['outputs']['artifacts']
  assert outputs['model']['artifacts'][0]['uri'] == local
  assert outputs['other']['artifacts'][0]['uri'] == 'file:///x/y'
  assert (tmp_path / 'gcs/b/root/r/Trainer').is_dir()  # as the launcher does
  (tmp_path / 'out.json').write_text(json.dumps({'artifacts': {'model': {
      'artifacts': [{'uri': local, 'metadata': {'a': 1}}]}}}))
  kfp_entrypoint.restore_output_uris(str(tmp_path / 'out.json'), moved)
  assert json.loads((tmp_path / 'out.json').read_text()) == {
      'artifacts': {'model': {'artifacts': [
          {'uri': 'gs://b/root/r/Trainer/model', 'metadata': {'a': 1}}]}}}
  assert kfp_entrypoint.LAUNCHER_LOCAL_PATHS['gs://'] == '/gcs/'
  assert kfp_entrypoint.uses_dataflow(['--runner=DataflowRunner'])
  assert kfp_entrypoint.uses_dataflow(['--runner', 'DataflowRunner'])
  assert not kfp_entrypoint.uses_dataflow(['--direct_num_workers=1'])


def test_kubeflow_steps_are_rewritten_to_the_entrypoint():
  tfx = ['python', '-m', targets.TFX_ENTRYPOINT]
  spec = {
      'root': {'dag': {'tasks': {
          'Gen': {'componentRef': {'name': 'Gen'}},
          'Res': {'componentRef': {'name': 'Res'}}}}},
      'components': {'Gen': {'executorLabel': 'Gen_executor'},
                     'Res': {'executorLabel': 'Res_executor'}},
      'deploymentSpec': {'executors': {
          'Gen_executor': {'container': {'command': list(tfx),
                                         'args': ['--executor_class_path',
                                                  'a.B']}},
          'Res_executor': {'resolver': {}}}}}
  targets.use_kfp_entrypoint(spec)
  assert spec['deploymentSpec']['executors'] == {
      'Gen_executor': {'container': {
          'command': ['python', '-m', 'tfx_autostrategy.kubeflow.kfp_entrypoint'],
          'args': ['--task_name', 'Gen', '--executor_class_path', 'a.B']}},
      'Res_executor': {'resolver': {}}}
  with pytest.raises(ValueError, match=r"Gen: unexpected command \['python'"):
    targets.use_kfp_entrypoint(spec)
