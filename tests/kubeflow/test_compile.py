"""Compiling `create_pipeline` for Vertex AI and Kubeflow: the JSON says it all.

Every accelerator is compiled for both targets once (module fixture, which is
why this is one file of over 300 lines); each
result is parsed with KFP's own protos and checked for the DAG, the image, the
Trainer's executor and its machine.
"""

import json
import re
import os

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
import pytest
import yaml

from tfx_autostrategy.kubeflow import compile_options
from tfx_autostrategy.kubeflow import compiler
from tfx_autostrategy.kubeflow import targets
from tfx_autostrategy.kubeflow import worker_pools
from tfx_autostrategy.pipeline import pipeline as pipeline_lib

IMAGE = 'us-docker.pkg.dev/proj/repo/autostrategy:test'
PROJECT = 'proj'
REGION = 'us-central1'
ROOT = 'gs://bucket/root'
DATA = 'gs://bucket/data'
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

TRAINER = pipeline_lib.TRAINER
# Component -> the components it consumes artifacts from (or waits for).
# KubeflowV2DagRunner splits the baseline Resolver into one task per channel.
BASELINE_RESOLVER_TASKS = (
    f'{pipeline_lib.BASELINE_RESOLVER}-model-resolver',
    f'{pipeline_lib.BASELINE_RESOLVER}-model-blessing-resolver')
UPSTREAM = {
    pipeline_lib.EXAMPLE_GEN: set(),
    pipeline_lib.SCHEMA_GEN: set(),
    pipeline_lib.STATISTICS_GEN: {pipeline_lib.EXAMPLE_GEN,
                                  pipeline_lib.SCHEMA_GEN},
    pipeline_lib.EXAMPLE_VALIDATOR: {pipeline_lib.STATISTICS_GEN,
                                     pipeline_lib.SCHEMA_GEN},
    pipeline_lib.ANOMALIES_GATE: {pipeline_lib.EXAMPLE_VALIDATOR},
    pipeline_lib.TRANSFORM: {pipeline_lib.EXAMPLE_GEN, pipeline_lib.SCHEMA_GEN,
                             pipeline_lib.ANOMALIES_GATE},
    TRAINER: {pipeline_lib.TRANSFORM, pipeline_lib.SCHEMA_GEN,
              pipeline_lib.STATISTICS_GEN},
    pipeline_lib.EVALUATOR: {pipeline_lib.EXAMPLE_GEN, TRAINER,
                             *BASELINE_RESOLVER_TASKS[:1]},
    pipeline_lib.PUSHER: {TRAINER, pipeline_lib.EVALUATOR},
}
# GKE has no node pools of TPU v2 and v3, and a multi-host slice is not one
# pod: those compile for Vertex AI only; Vertex AI custom training has no TPU
# v5p or v6e: those compile for Kubeflow only (test_node_selection.py and
# test_worker_pools.py check the refusals).
KUBEFLOW_ACCELERATORS = tuple(a for a in worker_pools.ACCELERATORS
                              if a not in ('tpu-v2-8', 'tpu-v3-8',
                                           'tpu-v5e-16'))
VERTEX_ACCELERATORS = tuple(a for a in worker_pools.ACCELERATORS
                            if a not in ('tpu-v5p-8', 'tpu-v6e-1', 'tpu-v6e-4',
                                         'tpu-v6e-8'))
# Half the machine's vCPUs and memory (room for the node's daemons) and the
# accelerator by its Kubernetes resource name; TPUs are counted in chips.
KUBEFLOW_REQUESTS = {
    'cpu': ('cpu', 4, 15, '', 0),
    'nvidia-t4': ('gpu', 4, 15, 'nvidia.com/gpu', 1),
    'nvidia-t4x2': ('gpu', 8, 30, 'nvidia.com/gpu', 2),
    'nvidia-t4x4': ('gpu', 16, 60, 'nvidia.com/gpu', 4),
    'nvidia-l4': ('gpu', 4, 16, 'nvidia.com/gpu', 1),
    'nvidia-l4x2': ('gpu', 12, 48, 'nvidia.com/gpu', 2),
    'nvidia-l4x4': ('gpu', 24, 96, 'nvidia.com/gpu', 4),
    'nvidia-l4x8': ('gpu', 48, 192, 'nvidia.com/gpu', 8),
    'nvidia-a100': ('gpu', 6, 42.5, 'nvidia.com/gpu', 1),
    'nvidia-a100x2': ('gpu', 12, 85, 'nvidia.com/gpu', 2),
    'nvidia-a100x4': ('gpu', 24, 170, 'nvidia.com/gpu', 4),
    'nvidia-a100x8': ('gpu', 48, 340, 'nvidia.com/gpu', 8),
    'tpu-v5e-8': ('tpu', 112, 192, 'google.com/tpu', 8),
    'nvidia-h100': ('gpu', 13, 117, 'nvidia.com/gpu', 1),
    'nvidia-h100x2': ('gpu', 26, 234, 'nvidia.com/gpu', 2),
    'nvidia-h100x4': ('gpu', 52, 468, 'nvidia.com/gpu', 4),
    'nvidia-h100x8': ('gpu', 104, 936, 'nvidia.com/gpu', 8),
    'nvidia-h200x8': ('gpu', 112, 1476, 'nvidia.com/gpu', 8),
    'nvidia-a100-80gb': ('gpu', 6, 85, 'nvidia.com/gpu', 1),
    'nvidia-a100-80gbx2': ('gpu', 12, 170, 'nvidia.com/gpu', 2),
    'nvidia-a100-80gbx4': ('gpu', 24, 340, 'nvidia.com/gpu', 4),
    'nvidia-a100-80gbx8': ('gpu', 48, 680, 'nvidia.com/gpu', 8),
    'tpu-v5e-1': ('tpu', 12, 24, 'google.com/tpu', 1),
    'tpu-v5e-4': ('tpu', 56, 96, 'google.com/tpu', 4),
    'tpu-v5p-8': ('tpu', 104, 224, 'google.com/tpu', 4),
    'tpu-v6e-1': ('tpu', 22, 88, 'google.com/tpu', 1),
    'tpu-v6e-4': ('tpu', 90, 360, 'google.com/tpu', 4),
    'tpu-v6e-8': ('tpu', 90, 720, 'google.com/tpu', 8),
}
TRAINER_EXECUTOR = 'tfx_autostrategy.components.trainer.executor.Executor'
CASES = ([('vertex', a) for a in VERTEX_ACCELERATORS] +
         [('kubeflow', a) for a in KUBEFLOW_ACCELERATORS])


def options(target='vertex', accelerator='cpu', **overrides):
  values = dict(target=target, image=IMAGE, pipeline_root=ROOT,
                data_root=DATA, accelerator=accelerator, project=PROJECT,
                region=REGION)
  values.update(overrides)
  return compile_options.CompileOptions(**values)


def parse_job(text):
  """PipelineJob JSON -> (PipelineJob, PipelineSpec); strict on both."""
  job = pipeline_spec_pb2.PipelineJob()
  json_format.Parse(text, job)
  spec = pipeline_spec_pb2.PipelineSpec()
  json_format.ParseDict(json_format.MessageToDict(job.pipeline_spec), spec)
  return job, spec


def package(directory, target, name='p'):
  """Vertex AI takes the PipelineJob JSON, the KFP client the YAML package."""
  return directory / f'{name}.{"json" if target == "vertex" else "yaml"}'


def compile_and_parse(opts, path):
  """-> (text, PipelineJob or None for a YAML package, PipelineSpec)."""
  compiler.compile_pipeline(opts, str(path))
  text = path.read_text()
  if path.suffix == '.json':
    return (text, *parse_job(text))
  spec = pipeline_spec_pb2.PipelineSpec()
  json_format.ParseDict(next(yaml.safe_load_all(text)), spec)
  return text, None, spec


@pytest.fixture(scope='module')
def compiled(tmp_path_factory):
  """(target, accelerator) -> (JSON text, PipelineJob, PipelineSpec)."""
  out = tmp_path_factory.mktemp('compiled')
  return {(target, accelerator): compile_and_parse(
      options(target, accelerator), package(out, target, accelerator))
          for target, accelerator in CASES}


def executor_of(spec, task_name):
  label = spec.components[
      spec.root.dag.tasks[task_name].component_ref.name].executor_label
  deployment = pipeline_spec_pb2.PipelineDeploymentConfig()
  json_format.ParseDict(json_format.MessageToDict(spec.deployment_spec),
                        deployment)
  return deployment.executors[label]


def trainer_parameters(spec):
  parameters = spec.root.dag.tasks[TRAINER].inputs.parameters
  return {key: json_format.MessageToDict(value.runtime_value.constant)
          for key, value in parameters.items()}


def class_path(container):
  args = list(container.args)
  return args[args.index('--executor_class_path') + 1]


@pytest.mark.parametrize('target,accelerator', CASES)
def test_every_component_is_in_the_dag_with_its_dependencies(
    compiled, target, accelerator):
  _, job, spec = compiled[target, accelerator]
  assert spec.schema_version == '2.1.0'
  assert spec.pipeline_info.name == 'autostrategy'
  # The KFP package has no runtime config: the root is the spec's default.
  assert spec.default_pipeline_root == ROOT
  if target == 'vertex':
    assert job.runtime_config.gcs_output_directory == ROOT
  tasks = spec.root.dag.tasks
  assert set(tasks) == (set(pipeline_lib.COMPONENT_IDS) -
                        {pipeline_lib.BASELINE_RESOLVER} |
                        set(BASELINE_RESOLVER_TASKS))
  for name, upstream in UPSTREAM.items():
    assert set(tasks[name].dependent_tasks) == upstream, name
    producers = {a.task_output_artifact.producer_task
                 for a in tasks[name].inputs.artifacts.values()}
    assert producers <= upstream, name


def test_trainer_reads_transform_statistics_and_schema(compiled):
  _, _, spec = compiled['vertex', 'tpu-v3-8']
  inputs = spec.root.dag.tasks[TRAINER].inputs.artifacts
  assert {key: (a.task_output_artifact.producer_task,
                a.task_output_artifact.output_artifact_key)
          for key, a in inputs.items()} == {
              'examples': (pipeline_lib.TRANSFORM, 'transformed_examples'),
              'transform_graph': (pipeline_lib.TRANSFORM, 'transform_graph'),
              'schema': (pipeline_lib.SCHEMA_GEN, 'schema'),
              'statistics': (pipeline_lib.STATISTICS_GEN, 'statistics'),
          }


@pytest.mark.parametrize('target,accelerator', CASES)
def test_every_step_runs_the_given_image_and_nothing_is_local(
    compiled, target, accelerator):
  text, _, spec = compiled[target, accelerator]
  for task in spec.root.dag.tasks:
    if task in BASELINE_RESOLVER_TASKS:
      # Resolvers are MLMD queries run by the orchestrator, not containers.
      assert executor_of(spec, task).HasField('resolver'), task
      continue
    container = executor_of(spec, task).container
    assert container.image == IMAGE, task
    # Open-source KFP needs our entrypoint (kfp_entrypoint); Vertex AI keeps
    # TFX's own.
    if target == 'kubeflow':
      assert list(container.command) == [
          'python', '-m', 'tfx_autostrategy.kubeflow.kfp_entrypoint'], task
      assert list(container.args[:3]) == ['--task_name', task,
                                          '--executor_class_path'], task
    else:
      assert list(container.command) == [
          'python', '-m',
          'tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor'
      ], task
      assert container.args[0] == '--executor_class_path', task
  # Code comes from the image, not from module-file wheels or this checkout.
  assert REPO_ROOT not in text
  parameters = trainer_parameters(spec)
  assert parameters['run_fn'] == (
      'tfx_autostrategy.components.trainer.trainer_module.run_fn')
  assert 'module_file' not in parameters


@pytest.mark.parametrize('accelerator', VERTEX_ACCELERATORS)
def test_vertex_trainer_runs_our_executor_on_the_worker_pool(
    compiled, accelerator):
  _, _, spec = compiled['vertex', accelerator]
  pool = worker_pools.worker_pool(accelerator)
  container = executor_of(spec, TRAINER).container
  assert class_path(container) == (
      'tfx_autostrategy.components.trainer.vertex_executor.Executor')
  # The step only watches the job: it asks for no accelerator itself.
  assert not container.HasField('resources')
  machine_spec = {'machine_type': pool.machine_type}
  if pool.accelerator_type:
    machine_spec.update(accelerator_type=pool.accelerator_type,
                        accelerator_count=pool.accelerator_count)
  if pool.tpu_topology:
    machine_spec['tpu_topology'] = pool.tpu_topology
  parameters = trainer_parameters(spec)
  custom_config = json.loads(parameters['custom_config'])
  assert re.fullmatch('[0-9a-f]{64}', custom_config.pop('code_fingerprint'))
  assert custom_config == {
      'ai_platform_enable_vertex': True,
      'ai_platform_vertex_region': REGION,
      'ai_platform_training_args': {
          'project': PROJECT,
          'display_name': 'autostrategy-trainer',
          'job_spec': {
              'worker_pool_specs': [{
                  'machine_spec': machine_spec,
                  'replica_count': 1,
                  'container_spec': {'image_uri': IMAGE},
              }],
              'scheduling': {'strategy': 'STANDARD',
                             'restart_job_on_worker_restart': False},
          },
      },
  }
  # The Trainer insists on the accelerator the pool provides.
  assert json.loads(parameters['trainer_settings'])['accelerator'] == (
      pool.kind)


# Issue 34's rows on Vertex AI, spelled out: the machine spec the training
# job's one pool asks for. A multi-host slice is still one pool of one
# replica: one host's machine type and chips, the whole slice's topology.
NEW_VERTEX_MACHINES = {
    'nvidia-h100x8': {'machine_type': 'a3-highgpu-8g',
                      'accelerator_type': 'NVIDIA_H100_80GB',
                      'accelerator_count': 8},
    'nvidia-h200x8': {'machine_type': 'a3-ultragpu-8g',
                      'accelerator_type': 'NVIDIA_H200_141GB',
                      'accelerator_count': 8},
    'nvidia-a100-80gbx2': {'machine_type': 'a2-ultragpu-2g',
                           'accelerator_type': 'NVIDIA_A100_80GB',
                           'accelerator_count': 2},
    'tpu-v5e-1': {'machine_type': 'ct5lp-hightpu-1t',
                  'accelerator_type': 'TPU_V5_LITEPOD',
                  'accelerator_count': 1, 'tpu_topology': '1x1'},
    'tpu-v5e-16': {'machine_type': 'ct5lp-hightpu-4t',
                   'accelerator_type': 'TPU_V5_LITEPOD',
                   'accelerator_count': 4, 'tpu_topology': '4x4'},
}


@pytest.mark.parametrize('accelerator', sorted(NEW_VERTEX_MACHINES))
def test_vertex_pools_of_new_rows_literally(compiled, accelerator):
  _, job, spec = compiled['vertex', accelerator]
  assert job.pipeline_spec  # parsed strictly as a PipelineJob
  training_args = json.loads(trainer_parameters(spec)['custom_config'])[
      'ai_platform_training_args']
  assert training_args['job_spec']['worker_pool_specs'] == [{
      'machine_spec': NEW_VERTEX_MACHINES[accelerator],
      'replica_count': 1,
      'container_spec': {'image_uri': IMAGE}}]
  expected_kind = 'tpu' if accelerator.startswith('tpu') else 'gpu'
  assert json.loads(trainer_parameters(spec)['trainer_settings'])[
      'accelerator'] == expected_kind


def test_vertex_executor_runs_our_trainer_executor_remotely():
  from tfx.utils import name_utils  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components.trainer import vertex_executor  # pylint: disable=g-import-not-at-top
  remote = vertex_executor.Executor()._GetExecutorClass()  # pylint: disable=protected-access
  assert name_utils.get_full_name(remote) == TRAINER_EXECUTOR
  assert name_utils.get_full_name(vertex_executor.Executor) == (
      'tfx_autostrategy.components.trainer.vertex_executor.Executor')


def test_custom_config_keys_are_the_vertex_extension_keys():
  from tfx.extensions.google_cloud_ai_platform import constants  # pylint: disable=g-import-not-at-top
  from tfx.extensions.google_cloud_ai_platform.trainer import executor  # pylint: disable=g-import-not-at-top
  assert targets.ENABLE_VERTEX_KEY == constants.ENABLE_VERTEX_KEY
  assert targets.VERTEX_REGION_KEY == constants.VERTEX_REGION_KEY
  assert targets.TRAINING_ARGS_KEY == executor.TRAINING_ARGS_KEY


@pytest.mark.parametrize('accelerator', KUBEFLOW_ACCELERATORS)
def test_kubeflow_trainer_requests_the_machine(compiled, accelerator):
  _, _, spec = compiled['kubeflow', accelerator]
  container = executor_of(spec, TRAINER).container
  assert class_path(container) == TRAINER_EXECUTOR
  resources = container.resources
  kind, cpus, memory_gb, accelerator_type, count = KUBEFLOW_REQUESTS[
      accelerator]
  assert (resources.cpu_request, resources.memory_request) == (cpus,
                                                               memory_gb)
  assert (resources.accelerator.type,
          resources.accelerator.count) == (accelerator_type, count)
  parameters = trainer_parameters(spec)
  custom_config = json.loads(parameters['custom_config'])
  # The Trainer's cache key follows its code (pipeline/code_fingerprint.py).
  assert re.fullmatch('[0-9a-f]{64}', custom_config.pop('code_fingerprint'))
  assert custom_config == {}
  assert json.loads(parameters['trainer_settings'])['accelerator'] == kind
  # Only the Trainer asks for the machine.
  for task in spec.root.dag.tasks:
    if task != TRAINER:
      assert not executor_of(spec, task).container.HasField('resources'), task


def test_kubeflow_yaml_package_for_the_kfp_client(tmp_path):
  path = tmp_path / 'pipeline.yaml'
  compiler.compile_pipeline(options('kubeflow', 'nvidia-l4x2'), str(path))
  spec = pipeline_spec_pb2.PipelineSpec()
  json_format.ParseDict(next(yaml.safe_load_all(path.read_text())), spec)
  accelerator = executor_of(spec, TRAINER).container.resources.accelerator
  assert (accelerator.type, accelerator.count) == ('nvidia.com/gpu', 2)


def test_multi_worker_vertex_pools(tmp_path):
  _, _, spec = compile_and_parse(
      options('vertex', 'nvidia-a100x4', workers=3), tmp_path / 'p.json')
  training_args = json.loads(trainer_parameters(spec)['custom_config'])[
      'ai_platform_training_args']
  pools = training_args['job_spec']['worker_pool_specs']
  assert [p['replica_count'] for p in pools] == [1, 2]
  assert {p['machine_spec']['machine_type'] for p in pools} == {
      'a2-highgpu-4g'}


def test_dataflow_args_reach_every_beam_component(tmp_path):
  from tfx.dsl.components.base import executor_spec  # pylint: disable=g-import-not-at-top
  opts = options('vertex', 'tpu-v3-8', beam_runner='dataflow')
  _, _, spec = compile_and_parse(opts, tmp_path / 'p.json')
  expected = ['--runner=DataflowRunner', f'--project={PROJECT}',
              f'--region={REGION}', f'--temp_location={ROOT}/beam/tmp',
              f'--sdk_container_image={IMAGE}']
  beam_components = [
      c.id for c in compiler.build_pipeline(opts).components
      if isinstance(c.executor_spec, executor_spec.BeamExecutorSpec)]
  assert {pipeline_lib.EXAMPLE_GEN, pipeline_lib.STATISTICS_GEN,
          pipeline_lib.TRANSFORM, pipeline_lib.EVALUATOR} <= set(
              beam_components)
  for task in beam_components:
    args = list(executor_of(spec, task).container.args)
    assert args[-len(expected):] == expected, task


def test_direct_runner_adds_no_dataflow_args(compiled):
  text, _, _ = compiled['vertex', 'cpu']
  assert 'DataflowRunner' not in text


@pytest.mark.parametrize('overrides,match', [
    ({'pipeline_name': 'My_Pipeline'}, r'invalid pipeline name .*\[a-z0-9-\]'),
    ({'accelerator': 'tpu-v9'}, r"unknown machine 'tpu-v9'; valid values: "
                                r'cpu, nvidia-t4, '),
    ({'target': 'airflow'}, "unknown target 'airflow'"),
    ({'project': ''}, '--target vertex: --project and --region are required'),
    ({'target': 'kubeflow', 'beam_runner': 'dataflow', 'region': ''},
     '--beam-runner dataflow: --project and --region are required'),
    ({'serving_model_dir': 'models'}, '--serving-model-dir must be a remote'),
    ({'pipeline_root': '/tmp/root'}, '--pipeline-root must be a remote URI'),
    ({'data_root': 'data'}, '--data must be a remote URI'),
    ({'image': ''}, '--image is required'),
    ({'accelerator': 'tpu-v5e-8', 'workers': 2}, 'one TPU slice'),
    ({'accelerator': 'tpu-v6e-8'},
     r'^tpu-v6e-8: Vertex AI custom training has no TPU v6e '),
    ({'accelerator': 'tpu-v5e-16', 'target': 'kubeflow'},
     r'^tpu-v5e-16 is a multi-host TPU slice .* Install JobSet '
     r'\(jobset.x-k8s.io\) or LeaderWorkerSet'),
    ({'beam_runner': 'dataflow', 'pipeline_root': 's3://bucket/root'},
     'dataflow needs a gs:// pipeline root'),
])
def test_bad_options_are_rejected_with_a_clear_message(overrides, match):
  with pytest.raises(ValueError, match=match):
    options(**overrides)


def test_kubeflow_cannot_run_several_workers():
  with pytest.raises(ValueError, match='several workers need --target vertex'):
    options('kubeflow', 'nvidia-t4', workers=2)


def test_kubeflow_needs_no_google_cloud_project():
  opts = options('kubeflow', 'nvidia-t4', project='', region='',
                 pipeline_root='s3://bucket/root', data_root='s3://bucket/d')
  config = compiler.build_config(opts)
  assert config.trainer_custom_config is None
  assert config.trainer_executor_spec is None
  assert config.serving_model_dir == 's3://bucket/root/serving_model'
  assert not config.use_module_files and not config.metadata_path



@pytest.mark.parametrize('target', compile_options.TARGETS)
def test_trainer_image_goes_where_training_runs(tmp_path, target):
  trainer_image = IMAGE + '-tpu'
  _, _, spec = compile_and_parse(
      options(target, 'tpu-v5e-8', trainer_image=trainer_image),
      package(tmp_path, target))
  images = {task: executor_of(spec, task).container.image
            for task in spec.root.dag.tasks
            if task not in BASELINE_RESOLVER_TASKS}
  if target == 'vertex':
    # The step submits the job; the job's machines run the trainer image.
    assert set(images.values()) == {IMAGE}
    [pool] = json.loads(trainer_parameters(spec)['custom_config'])[
        'ai_platform_training_args']['job_spec']['worker_pool_specs']
    assert pool['container_spec'] == {'image_uri': trainer_image}
  else:
    assert images.pop(TRAINER) == trainer_image
    assert set(images.values()) == {IMAGE}
