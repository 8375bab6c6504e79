"""Compiles `create_pipeline` for Kubeflow Pipelines and Vertex AI Pipelines.

The same pipeline definition as the local run, with what remote runs need:
code imported from the container image (no module-file wheels), MLMD provided
by the orchestrator, and the Trainer placed on the machine that
`--accelerator` names (see `worker_pools`):

- `vertex`: the Trainer step submits a Vertex AI custom job on those worker
  pools, running our executor there (`vertex_executor.Executor`);
- `kubeflow`: the Trainer runs in its own pipeline container, which requests
  the accelerator, CPU and memory through KFP's `ResourceSpec`, and lands on
  a GKE node of that accelerator through the Kubernetes platform section of
  the KFP package (a second YAML document: node selector and toleration).

`--beam-runner dataflow` sends the Beam-based components to Dataflow.

Option checks need no TFX import, so that bad options fail fast; compiling
imports TFX (about 15 s).
"""

import dataclasses
import json
import os
from typing import Any, Dict, Optional, Tuple

from tfx_autostrategy.components import conventions
from tfx_autostrategy.components import settings as settings_lib
from tfx_autostrategy.kubeflow import worker_pools
from tfx_autostrategy.pipeline import atomic_io
from tfx_autostrategy.pipeline import config as config_lib

TARGETS = ('vertex', 'kubeflow')
BEAM_RUNNERS = ('direct', 'dataflow')
DEFAULT_PIPELINE_NAME = conventions.DEFAULT_PIPELINE_NAME
# Where kubeflow/Dockerfile puts the curated schema inside the image.
IMAGE_SCHEMA_PATH = '/pipeline/schemas/jigsaw/schema.pbtxt'
VERTEX_EXECUTOR_CLASS = (
    'tfx_autostrategy.components.trainer.vertex_executor.Executor')

# Keys of the Trainer's custom_config read by TFX's Vertex training extension
# (tfx.extensions.google_cloud_ai_platform); spelled out here so that checking
# options does not import TFX. tests/kubeflow checks they match.
ENABLE_VERTEX_KEY = 'ai_platform_enable_vertex'
VERTEX_REGION_KEY = 'ai_platform_vertex_region'
TRAINING_ARGS_KEY = 'ai_platform_training_args'


def vertex_trainer_executor_spec():
  """The Trainer's executor on Vertex AI (ours, run as a custom job).

  Imports TFX's Vertex training extension, so only a Vertex compile calls it.
  """
  from tfx.dsl.components.base import executor_spec  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components.trainer import vertex_executor  # pylint: disable=g-import-not-at-top
  return executor_spec.ExecutorClassSpec(vertex_executor.Executor)


def _is_remote(uri: str) -> bool:
  return '://' in uri


@dataclasses.dataclass(frozen=True)
class CompileOptions:
  """What `autostrategy compile` compiles; checked on construction.

  Attributes:
    target: one of TARGETS.
    image: container image built from kubeflow/Dockerfile.
    trainer_image: image of the Trainer's machines ('' = `image`), e.g. the
      Dockerfile's TF_VARIANT=tpu build.
    pipeline_root: remote URI where TFX writes artifacts (gs://...).
    data_root: remote URI of the CSV files.
    accelerator: a `worker_pools.ACCELERATORS` value.
    workers: machines training together (vertex only; chief included).
    project: Google Cloud project (vertex target, Dataflow).
    region: Google Cloud region (vertex target, Dataflow).
    beam_runner: one of BEAM_RUNNERS.
    pipeline_name: [a-z0-9-] name.
    schema_path: curated schema, by default the copy inside the image.
    serving_model_dir: Pusher's destination ('' = under pipeline_root).
    presplit: data_root has train/ and eval/ subdirectories.
    service_account: service account of the Vertex AI training job ('' for
      Vertex AI's default).
    text: Transform's text settings.
    trainer: Trainer settings; `accelerator` is replaced by the kind of the
      worker pool.
    enable_cache: reuse outputs of unchanged components.
  """
  target: str
  image: str
  pipeline_root: str
  data_root: str
  accelerator: str = 'cpu'
  trainer_image: str = ''
  workers: int = 1
  project: str = ''
  region: str = ''
  beam_runner: str = 'direct'
  pipeline_name: str = DEFAULT_PIPELINE_NAME
  schema_path: str = IMAGE_SCHEMA_PATH
  serving_model_dir: str = ''
  presplit: bool = False
  service_account: str = ''
  text: settings_lib.TextSettings = settings_lib.TextSettings()
  trainer: settings_lib.TrainerSettings = settings_lib.TrainerSettings()
  enable_cache: bool = True

  def __post_init__(self):
    config_lib.validate_pipeline_name(self.pipeline_name)
    if self.target not in TARGETS:
      raise ValueError(
          f'unknown target {self.target!r}; valid values: {", ".join(TARGETS)}')
    if self.beam_runner not in BEAM_RUNNERS:
      raise ValueError(f'unknown Beam runner {self.beam_runner!r}; valid '
                       f'values: {", ".join(BEAM_RUNNERS)}')
    pool = worker_pools.worker_pool(self.accelerator)
    worker_pools.check_workers(pool, self.workers)
    if self.workers > 1 and self.target != 'vertex':
      raise ValueError(
          'several workers need --target vertex: a Kubeflow pipeline step is '
          'one container')
    if self.target == 'kubeflow':
      # Raises for TPUs that GKE has no node pools of.
      worker_pools.kubernetes_node_selection(pool)
    if not self.image:
      raise ValueError('--image is required: the container image that '
                       'carries this package (kubeflow/Dockerfile)')
    # Every step runs in its own container: a local path written by one is
    # not there for the next.
    uris = [('--pipeline-root', self.pipeline_root),
            ('--data', self.data_root)]
    if self.serving_model_dir:
      uris.append(('--serving-model-dir', self.serving_model_dir))
    for flag, uri in uris:
      if not _is_remote(uri):
        raise ValueError(
            f'{flag} must be a remote URI such as gs://bucket/path, got '
            f'{uri!r}: pipeline steps run in separate containers')
    needs_gcp = []
    if self.target == 'vertex':
      needs_gcp.append('--target vertex')
    if self.beam_runner == 'dataflow':
      needs_gcp.append('--beam-runner dataflow')
      if not self.pipeline_root.startswith('gs://'):
        raise ValueError('--beam-runner dataflow needs a gs:// pipeline root '
                         '(Dataflow keeps its temporary files there)')
    if needs_gcp and not (self.project and self.region):
      raise ValueError(f'{" and ".join(needs_gcp)}: --project and --region '
                       'are required')

  @property
  def worker_pool(self) -> worker_pools.WorkerPool:
    return worker_pools.worker_pool(self.accelerator)

  @property
  def training_image(self) -> str:
    return self.trainer_image or self.image


def _join(root: str, *parts: str) -> str:
  return '/'.join([root.rstrip('/'), *parts])


def beam_pipeline_args(options: CompileOptions) -> Tuple[str, ...]:
  """Beam arguments of the Beam-based components (none for the direct runner).

  Dataflow workers run the same image (`--sdk_container_image`): Transform
  imports `preprocessing_fn` from this package, and the image has the Beam SDK
  worker boot loader (see kubeflow/Dockerfile).
  """
  if options.beam_runner != 'dataflow':
    return ()
  return (
      '--runner=DataflowRunner',
      f'--project={options.project}',
      f'--region={options.region}',
      f'--temp_location={_join(options.pipeline_root, "beam", "tmp")}',
      f'--sdk_container_image={options.image}',
  )


def vertex_training_args(options: CompileOptions) -> Dict[str, Any]:
  """The CustomJob arguments (TRAINING_ARGS_KEY) of the Vertex AI Trainer.

  Returns:
    `{'project', 'display_name', 'job_spec': {'worker_pool_specs', ...}}` as
    TFX's Vertex training client reads it.
  """
  job_spec: Dict[str, Any] = {
      'worker_pool_specs': worker_pools.vertex_worker_pool_specs(
          options.worker_pool, options.training_image, options.workers),
  }
  if options.service_account:
    job_spec['service_account'] = options.service_account
  return {
      'project': options.project,
      'display_name': f'{options.pipeline_name}-trainer',
      'job_spec': job_spec,
  }


def trainer_custom_config(options: CompileOptions
                         ) -> Optional[Dict[str, Any]]:
  """Trainer custom_config entries of `options.target` (None for kubeflow)."""
  if options.target != 'vertex':
    return None
  return {
      ENABLE_VERTEX_KEY: True,
      VERTEX_REGION_KEY: options.region,
      TRAINING_ARGS_KEY: vertex_training_args(options),
  }


def build_config(options: CompileOptions) -> config_lib.PipelineConfig:
  """The PipelineConfig of a remote run."""
  return config_lib.PipelineConfig(
      pipeline_name=options.pipeline_name,
      pipeline_root=options.pipeline_root,
      data_root=options.data_root,
      serving_model_dir=(options.serving_model_dir
                         or _join(options.pipeline_root, 'serving_model')),
      schema_path=options.schema_path,
      presplit=options.presplit,
      text=options.text,
      trainer=dataclasses.replace(options.trainer,
                                  accelerator=options.worker_pool.kind),
      beam_pipeline_args=beam_pipeline_args(options),
      # The orchestrator provides MLMD.
      metadata_path='',
      enable_cache=options.enable_cache,
      # The image carries the code; module-file wheels would be built and
      # uploaded to the pipeline root at compile time.
      use_module_files=False,
      trainer_custom_config=trainer_custom_config(options),
      trainer_executor_spec=(vertex_trainer_executor_spec()
                             if options.target == 'vertex' else None))


def kubeflow_resource_spec(pool: worker_pools.WorkerPool):
  """KFP `ResourceSpec` of the Trainer container on plain Kubeflow."""
  from kfp.pipeline_spec import pipeline_spec_pb2  # pylint: disable=g-import-not-at-top
  resource_spec_cls = (
      pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec
      .ResourceSpec)
  resources = worker_pools.kubeflow_resources(pool)
  accelerator = resources.pop('accelerator', None)
  spec = resource_spec_cls(**resources)
  if accelerator:
    spec.accelerator.type = accelerator['type']
    spec.accelerator.count = accelerator['count']
  return spec


def build_pipeline(options: CompileOptions):
  """`create_pipeline` for `options`, with the Trainer's resources attached."""
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  pipeline = pipeline_lib.create_pipeline(build_config(options))
  if options.target == 'kubeflow':
    trainer = next(c for c in pipeline.components
                   if c.id == pipeline_lib.TRAINER)
    trainer.with_platform_config(kubeflow_resource_spec(options.worker_pool))
  return pipeline


def _executor_label(pipeline_spec: Dict[str, Any], task: str) -> str:
  component = pipeline_spec['root']['dag']['tasks'][task]['componentRef']['name']
  return pipeline_spec['components'][component]['executorLabel']


def kubernetes_platform_spec(options: CompileOptions,
                             pipeline_spec: Dict[str, Any]
                            ) -> Optional[Dict[str, Any]]:
  """The KFP package's Kubernetes platform section, None where none is needed.

  KFP's `PlatformSpec` as JSON: per executor label, a kfp-kubernetes
  `KubernetesExecutorConfig`. Only the Trainer asks for an accelerator node.
  TFX's KubeflowV2DagRunner writes no platform section, hence this one.
  """
  if options.target != 'kubeflow':
    return None
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  selection = worker_pools.kubernetes_node_selection(options.worker_pool)
  if not selection:
    return None
  label = _executor_label(pipeline_spec, pipeline_lib.TRAINER)
  return {'platforms': {'kubernetes': {'deploymentSpec': {
      'executors': {label: selection}}}}}


def _check_output_format(options: CompileOptions, output_path: str) -> None:
  if (options.target == 'kubeflow' and
      worker_pools.kubernetes_node_selection(options.worker_pool) and
      not output_path.endswith(('.yaml', '.yml'))):
    raise ValueError(
        f'--target kubeflow --accelerator {options.accelerator}: the Trainer\'s '
        'node selector and toleration are written as the Kubernetes platform '
        'section of the KFP package, which only the YAML package carries '
        f'(and the KFP client uploads): use --output NAME.yaml, not '
        f'{output_path!r}')


def compile_pipeline(options: CompileOptions, output_path: str
                    ) -> Dict[str, Any]:
  """Writes the compiled pipeline (KFP pipeline spec schema 2.1).

  Args:
    options: what to compile.
    output_path: file to write, a local path or a remote URI: `.json` gets the
      PipelineJob (Vertex AI), `.yaml` the KFP package: the PipelineSpec and,
      for `kubeflow` on an accelerator, the Kubernetes platform spec as a
      second YAML document (what the KFP client uploads).

  Returns:
    The compiled `PipelineJob`, as a JSON-able dict.

  Raises:
    ValueError: a Kubeflow accelerator compile to a `.json` file.
  """
  # Before TFX is imported (15 s): a wrong extension fails at once.
  _check_output_format(options, output_path)
  from tfx.dsl.io import fileio  # pylint: disable=g-import-not-at-top
  from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner  # pylint: disable=g-import-not-at-top
  from tfx.orchestration.kubeflow.v2 import pipeline_builder  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  import yaml  # pylint: disable=g-import-not-at-top
  images = options.image
  if options.target == 'kubeflow' and options.trainer_image:
    # On Vertex AI the Trainer step only submits the job: the job's worker
    # pools carry the trainer image.
    images = {pipeline_builder.DEFAULT_IMAGE_PATH_KEY: options.image,
              pipeline_lib.TRAINER: options.trainer_image}
  runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
      config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(
          default_image=images, use_pipeline_spec_2_1=True),
      output_dir=os.path.dirname(output_path) or '.',
      output_filename=os.path.basename(output_path))
  job = runner.run(build_pipeline(options), write_out=False)
  spec = job['pipelineSpec']
  # The KFP package has no runtime config: without this, a run started from
  # it writes under the cluster's default root instead of --pipeline-root.
  spec['defaultPipelineRoot'] = options.pipeline_root
  platform_spec = kubernetes_platform_spec(options, spec)
  directory = os.path.dirname(output_path)
  if directory and not fileio.exists(directory):
    fileio.makedirs(directory)
  if output_path.endswith(('.yaml', '.yml')):
    text = yaml.safe_dump_all(
        [spec] + ([platform_spec] if platform_spec else []), sort_keys=True)
  else:
    text = json.dumps(job, sort_keys=True)
  if '://' in output_path:
    # A bucket's object appears whole on close; there is no rename to use.
    with fileio.open(output_path, 'w') as f:
      f.write(text)
  else:
    atomic_io.write_text(output_path, text)
  return job
