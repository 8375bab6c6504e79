"""The Vertex AI Trainer step: the exact CustomJob it submits (fake client).

The execution properties are those the compiled pipeline gives the step,
turned into Python values by TFX's own Kubeflow V2 container code, so the
test follows them from the JSON to the remote executor's command line.
One file (over 300 lines) around one module-scoped compiled pipeline
(`exec_properties`).
"""

import json
import sys
import types

from google.cloud.aiplatform_v1.types import custom_job as custom_job_pb
from google.cloud.aiplatform_v1.types import job_state
from google.protobuf import json_format
from google.protobuf import struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2
import pytest
from tfx import version as tfx_version
from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils
from tfx.scripts import run_executor
from tfx.types import artifact_utils
from tfx.types import standard_artifacts
from tfx.utils import import_utils

from tfx_autostrategy.components.trainer import executor as trainer_executor
from tfx_autostrategy.components.trainer import vertex_executor
from tfx_autostrategy.kubeflow import compile_options
from tfx_autostrategy.kubeflow import compiler
from tfx_autostrategy.kubeflow import scheduling
from tfx_autostrategy.pipeline import pipeline as pipeline_lib
from tfx_autostrategy import settings as settings_lib

IMAGE = 'us-docker.pkg.dev/proj/repo/autostrategy:test'
PROJECT = 'proj'
REGION = 'europe-west4'
SUCCEEDED = job_state.JobState.JOB_STATE_SUCCEEDED
FAILED = job_state.JobState.JOB_STATE_FAILED
RUNNING = job_state.JobState.JOB_STATE_RUNNING
PENDING = job_state.JobState.JOB_STATE_PENDING
SPOT = custom_job_pb.Scheduling.Strategy.SPOT
STANDARD = custom_job_pb.Scheduling.Strategy.STANDARD


class FakeJobService:
  """Records requests like aiplatform's JobServiceClient.

  Each poll returns the next of `responses` (the last one repeats): a job
  state, or an exception to raise.
  """

  def __init__(self, responses=(SUCCEEDED,)):
    self.created = []
    self.polled = []
    self._responses = list(responses)

  def create_custom_job(self, parent, custom_job):
    self.created.append((parent, custom_job))
    return types.SimpleNamespace(name=f'{parent}/customJobs/123')

  def get_custom_job(self, name, retry=None):
    del retry
    self.polled.append(name)
    response = (self._responses.pop(0) if len(self._responses) > 1
                else self._responses[0])
    if isinstance(response, Exception):
      raise response
    return types.SimpleNamespace(state=response)


def container_exec_properties(job_json):
  """The Trainer step's exec_properties, as the KFP v2 container parses them."""
  spec = pipeline_spec_pb2.PipelineSpec()
  json_format.ParseDict(job_json['pipelineSpec'], spec)
  task = spec.root.dag.tasks[pipeline_lib.TRAINER]
  inputs_spec = spec.components[task.component_ref.name].input_definitions
  values = {}
  for key, parameter in task.inputs.parameters.items():
    value = struct_pb2.Value()
    value.CopyFrom(parameter.runtime_value.constant)
    values[key] = value
  return kubeflow_v2_entrypoint_utils.parse_execution_properties(
      values, {}, inputs_spec)


def compiled_exec_properties(directory, **overrides):
  opts = compile_options.CompileOptions(**{
      **dict(target='vertex', image=IMAGE, pipeline_root='gs://bucket/root',
             data_root='gs://bucket/data', accelerator='tpu-v3-8',
             project=PROJECT, region=REGION,
             service_account='trainer@proj.iam.gserviceaccount.com'),
      **overrides})
  return container_exec_properties(
      compiler.compile_pipeline(opts, str(directory / 'pipeline.json')))


@pytest.fixture(scope='module')
def exec_properties(tmp_path_factory):
  return compiled_exec_properties(tmp_path_factory.mktemp('vertex'))


def artifact(artifact_type, uri):
  result = artifact_type()
  result.uri = uri
  return result


@pytest.fixture
def artifacts():
  inputs = {
      'examples': [artifact(standard_artifacts.Examples, 'gs://b/Transform/1')],
      'transform_graph': [
          artifact(standard_artifacts.TransformGraph, 'gs://b/Transform/2')],
      'schema': [artifact(standard_artifacts.Schema, 'gs://b/Schema/3')],
      'statistics': [
          artifact(standard_artifacts.ExampleStatistics, 'gs://b/Stats/4')],
  }
  outputs = {
      'model': [artifact(standard_artifacts.Model, 'gs://b/Trainer/model/5')],
      'model_run': [
          artifact(standard_artifacts.ModelRun, 'gs://b/Trainer/run/5')],
  }
  return inputs, outputs


def expected_labels():
  major, minor = sys.version_info[:2]
  return {
      'tfx_executor': 'third_party_executor',
      'tfx_version': tfx_version.__version__.replace('.', '-'),
      'tfx_py_version': f'{major}-{minor}',
  }


def test_submits_the_exact_custom_job(exec_properties, artifacts):
  inputs, outputs = artifacts
  service = FakeJobService()
  vertex_executor.Executor(job_service=service).Do(
      inputs, outputs, exec_properties)

  [(parent, request)] = service.created
  assert parent == f'projects/{PROJECT}/locations/{REGION}'
  command = [
      'python', '-m', 'tfx.scripts.run_executor',
      '--executor_class_path',
      'tfx_autostrategy.components.trainer.executor.Executor',
      '--inputs', artifact_utils.jsonify_artifact_dict(inputs),
      '--outputs', artifact_utils.jsonify_artifact_dict(outputs),
      '--exec-properties', json.dumps(exec_properties, sort_keys=True),
  ]
  assert request == {
      'display_name': 'autostrategy-trainer',
      'job_spec': {
          'worker_pool_specs': [{
              'machine_spec': {'machine_type': 'cloud-tpu',
                               'accelerator_type': 'TPU_V3',
                               'accelerator_count': 8},
              'replica_count': 1,
              'container_spec': {'image_uri': IMAGE, 'command': command},
          }],
          'service_account': 'trainer@proj.iam.gserviceaccount.com',
          'scheduling': {'strategy': 'STANDARD',
                         'restart_job_on_worker_restart': False},
      },
      'labels': expected_labels(),
      'encryption_spec': {},
  }
  # Vertex AI's own message type accepts it (field and enum names).
  job = custom_job_pb.CustomJob(request)
  assert job.job_spec.worker_pool_specs[0].machine_spec.accelerator_count == 8
  assert job.job_spec.scheduling.strategy == STANDARD
  assert not job.job_spec.scheduling.restart_job_on_worker_restart
  assert 'timeout' not in job.job_spec.scheduling  # Vertex AI's 7 days.
  assert service.polled == [f'{parent}/customJobs/123']


def test_remote_executor_gets_every_execution_property(exec_properties,
                                                       artifacts):
  inputs, outputs = artifacts
  service = FakeJobService()
  vertex_executor.Executor(job_service=service).Do(
      inputs, outputs, exec_properties)
  [(_, request)] = service.created
  command = request['job_spec']['worker_pool_specs'][0]['container_spec'][
      'command']
  # What `python -m tfx.scripts.run_executor` parses in the training job.
  args, _ = run_executor.parse_flags(command[3:])
  assert import_utils.import_class_by_path(
      args.executor_class_path) is trainer_executor.Executor
  remote_properties = json.loads(args.exec_properties)
  assert remote_properties == exec_properties
  assert settings_lib.from_json(
      settings_lib.TrainerSettings, remote_properties['trainer_settings']) == (
          settings_lib.TrainerSettings(accelerator='tpu'))
  assert isinstance(json.loads(remote_properties['trainer_settings'])[
      'per_replica_batch_size'], int)
  assert settings_lib.from_json(
      settings_lib.TextSettings,
      remote_properties['text_settings']) == settings_lib.TextSettings()
  remote_inputs = artifact_utils.parse_artifact_dict(args.inputs)
  assert {k: [a.uri for a in v] for k, v in remote_inputs.items()} == {
      k: [a.uri for a in v] for k, v in inputs.items()}
  # The step's parsed properties are left as they were.
  assert json.loads(exec_properties['custom_config'])[
      'ai_platform_training_args']['project'] == PROJECT


def test_waits_until_the_job_ends(exec_properties, artifacts):
  service = FakeJobService(responses=(RUNNING, RUNNING, SUCCEEDED))
  vertex_executor.Executor(job_service=service, poll_interval_seconds=0).Do(
      *artifacts, exec_properties)
  assert len(service.polled) == 3


def test_reconnects_after_a_dropped_connection(exec_properties, artifacts):
  service = FakeJobService(
      responses=(RUNNING, ConnectionError('reset'), SUCCEEDED))
  vertex_executor.Executor(job_service=service, poll_interval_seconds=0).Do(
      *artifacts, exec_properties)
  assert len(service.polled) == 3


def test_gives_up_after_repeated_connection_failures(exec_properties,
                                                     artifacts):
  service = FakeJobService(responses=(RUNNING, ConnectionError('down')))
  with pytest.raises(ConnectionError, match='down'):
    vertex_executor.Executor(job_service=service, poll_interval_seconds=0).Do(
        *artifacts, exec_properties)
  assert len(service.polled) == 1 + 6  # the first poll, then 5 retries + 1


def test_failed_job_fails_the_step(exec_properties, artifacts):
  service = FakeJobService(responses=(FAILED,))
  with pytest.raises(RuntimeError, match='customJobs/123 did not succeed'):
    vertex_executor.Executor(job_service=service).Do(
        *artifacts, exec_properties)


@pytest.mark.parametrize('drop,match', [
    ('ai_platform_enable_vertex', 'must be true'),
    ('ai_platform_vertex_region', "'ai_platform_vertex_region'.* missing"),
    ('ai_platform_training_args', "'ai_platform_training_args'.* missing"),
])
def test_incomplete_custom_config_is_rejected(exec_properties, artifacts,
                                              drop, match):
  custom_config = json.loads(exec_properties['custom_config'])
  del custom_config[drop]
  properties = dict(exec_properties, custom_config=json.dumps(custom_config))
  service = FakeJobService()
  with pytest.raises(ValueError, match=match):
    vertex_executor.Executor(job_service=service).Do(*artifacts, properties)
  assert not service.created


class FakeClock:
  """Time that passes only in `sleep`."""

  def __init__(self):
    self.now = 0.0

  def sleep(self, seconds):
    self.now += seconds


class CancellableJobService(FakeJobService):

  def __init__(self, responses):
    super().__init__(responses)
    self.cancelled = []

  def cancel_custom_job(self, name):
    self.cancelled.append(name)


@pytest.mark.parametrize('scheduling, responses, match, polls', [
    # Running past its timeout (+ 600 s grace): cancelled at 3600 + 600 s.
    ({'timeout': '3600s'}, (RUNNING,),
     r'customJobs/123 still runs 3600 s \(its timeout\) \+ 600 s after it '
     'started; cancelled it', 1 + 4200 // 300),
    # No timeout set: Vertex AI's default of 7 days bounds the wait.
    ({}, (RUNNING,), r'still runs 604800 s \(its timeout\)',
     1 + 605400 // 300),
    # Never started: given up after a day of waiting for machines.
    ({'timeout': '60s'}, (PENDING,), r'customJobs/123 did not start within '
     r'86400 s; cancelled it', 1 + 86400 // 300),
])
def test_a_job_that_does_not_end_is_cancelled_at_its_bound(scheduling,
                                                           responses, match,
                                                           polls):
  service = CancellableJobService(responses)
  client = vertex_executor.VertexJobClient(REGION, job_service=service)
  clock = FakeClock()
  custom_job = {'display_name': 'x', 'job_spec': {
      'worker_pool_specs': [], 'scheduling': scheduling}}
  with pytest.raises(TimeoutError, match=match):
    vertex_executor.run_custom_job(client, PROJECT, custom_job,
                                   poll_interval_seconds=300,
                                   clock=lambda: clock.now, sleep=clock.sleep)
  assert service.cancelled == [f'projects/{PROJECT}/locations/{REGION}/'
                               'customJobs/123']
  assert len(service.polled) == polls


def test_job_timeout_is_read_in_either_form():
  def timeout(value):
    return vertex_executor.job_timeout_seconds(
        {'job_spec': {'scheduling': {'timeout': value}}})
  assert timeout('5400s') == timeout({'seconds': 5400}) == 5400
  assert vertex_executor.job_timeout_seconds({'job_spec': {}}) == 7 * 86400
  with pytest.raises(ValueError, match="timeout '90m': expected a duration"):
    timeout('90m')


HOOKED_SERVICES = []


def hooked_job_service(vertex_region):
  """A factory for the test hook: records what the executor asked for."""
  service = FakeJobService()
  service.poll_interval_seconds = 0
  HOOKED_SERVICES.append((vertex_region, service))
  return service


def test_the_test_hook_names_the_job_service(exec_properties, artifacts,
                                             monkeypatch):
  monkeypatch.setenv(vertex_executor.JOB_SERVICE_ENV,
                     f'{__name__}:hooked_job_service')
  HOOKED_SERVICES.clear()
  vertex_executor.Executor().Do(*artifacts, exec_properties)
  [(region, service)] = HOOKED_SERVICES
  assert region == REGION
  [(parent, _)] = service.created
  assert parent == f'projects/{PROJECT}/locations/{REGION}'
  monkeypatch.setenv(vertex_executor.JOB_SERVICE_ENV, 'no_colon')
  with pytest.raises(ValueError, match="'no_colon': expected module:factory"):
    vertex_executor.Executor().Do(*artifacts, exec_properties)


def test_scheduling_options_reach_the_submitted_job(tmp_path, artifacts):
  # compile --spot --restart-on-worker-restart --job-timeout 90m
  properties = compiled_exec_properties(
      tmp_path, spot=True, restart_on_worker_restart=True,
      job_timeout_seconds=scheduling.parse_duration('90m'))
  service = FakeJobService()
  vertex_executor.Executor(job_service=service).Do(*artifacts, properties)
  [(_, request)] = service.created
  assert request['job_spec']['scheduling'] == {
      'strategy': 'SPOT', 'restart_job_on_worker_restart': True,
      'timeout': '5400s'}
  submitted = custom_job_pb.CustomJob(request).job_spec.scheduling
  assert submitted.strategy == SPOT
  assert submitted.restart_job_on_worker_restart
  assert submitted.timeout.total_seconds() == 5400
