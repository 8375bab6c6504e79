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
from tfx_autostrategy.kubeflow import scheduling
from tfx_autostrategy.kubeflow import worker_pools
from tfx_autostrategy.pipeline import atomic_io
from tfx_autostrategy.pipeline import config as config_lib
from tfx_autostrategy.pipeline import schema_render

TARGETS = ('vertex', 'kubeflow')
BEAM_RUNNERS = ('direct', 'dataflow')
DEFAULT_PIPELINE_NAME = conventions.DEFAULT_PIPELINE_NAME
ID_TYPES = schema_render.ID_TYPES
VERTEX_EXECUTOR_CLASS = (
    'tfx_autostrategy.components.trainer.vertex_executor.Executor')

# Keys of the Trainer's custom_config read by TFX's Vertex training extension
# (tfx.extensions.google_cloud_ai_platform); spelled out here so that checking
# options does not import TFX. tests/kubeflow checks they match.
ENABLE_VERTEX_KEY = 'ai_platform_enable_vertex'
VERTEX_REGION_KEY = 'ai_platform_vertex_region'
TRAINING_ARGS_KEY = 'ai_platform_training_args'


def _is_remote(uri: str) -> bool:
  return '://' in uri


def _check_columns(text: settings_lib.TextSettings) -> None:
  """Column names a schema can hold; the local run checks them on the data."""
  columns = [('--text-column', text.text_column),
             ('--label-column', text.label_column),
             ('--id-column', text.id_column),
             ('--slice-column', text.slice_column)]
  for flag, name in columns[:2]:
    if not name:
      raise ValueError(f'{flag} must name a column, got an empty name')
  seen = {}
  for flag, name in columns:
    if name and name in seen:
      raise ValueError(f'{seen[name]} and {flag} both name column {name!r}: '
                       'each must be a different column')
    seen.setdefault(name, flag)


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
    schema_file: a local schema.pbtxt compiled into the pipeline as it is,
      instead of the curated schema rendered with `text`'s column names and
      `id_type` ('' = rendered).
    serving_model_dir: Pusher's destination ('' = under pipeline_root).
    presplit: data_root has train/ and eval/ subdirectories.
    service_account: service account of the Vertex AI training job ('' for
      Vertex AI's default).
    text: Transform's text settings and the data's column names.
    id_type: 'string' or 'int': how CsvExampleGen will type the id column
      (all-integer ids become INT); the local run reads it from the data,
      a compile cannot.
    spot: run the Vertex AI training job on Spot VMs (else standard VMs).
    restart_on_worker_restart: Vertex AI restarts the whole job when a worker
      restarts (what MultiWorkerMirroredStrategy needs to recover).
    job_timeout_seconds: Vertex AI stops the training job after this many
      seconds (0 = Vertex AI's default, 7 days).
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
  schema_file: str = ''
  serving_model_dir: str = ''
  presplit: bool = False
  service_account: str = ''
  text: settings_lib.TextSettings = settings_lib.TextSettings()
  id_type: str = 'string'
  trainer: settings_lib.TrainerSettings = settings_lib.TrainerSettings()
  enable_cache: bool = True
  spot: bool = False
  restart_on_worker_restart: bool = False
  job_timeout_seconds: int = 0

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
    _check_columns(self.text)
    if self.id_type not in ID_TYPES:
      raise ValueError(f'--id-type must be one of {", ".join(ID_TYPES)}, got '
                       f'{self.id_type!r}')
    if self.schema_file and (_is_remote(self.schema_file) or
                             not os.path.isfile(self.schema_file)):
      raise ValueError(
          f'--schema {self.schema_file}: no such local file (its text is '
          'compiled into the pipeline, so it is read here, on this machine)')
    if self.job_timeout_seconds < 0:
      raise ValueError('--job-timeout must be > 0 seconds, got '
                       f'{self.job_timeout_seconds}')
    if self.target != 'vertex':
      vertex_only = [flag for flag, value in (
          ('--spot', self.spot),
          ('--restart-on-worker-restart', self.restart_on_worker_restart),
          ('--job-timeout', self.job_timeout_seconds)) if value]
      if vertex_only:
        raise ValueError(
            f'{", ".join(vertex_only)}: Vertex AI training job options, '
            f'meaningless for --target {self.target} (a Kubeflow step is a '
            'pod; use a node pool of Spot VMs and the cluster\'s own limits)')
    if not self.image:
      raise ValueError('--image is required: the container image that '
                       'carries this package (kubeflow/Dockerfile)')
    # Every step runs in its own container: a local path written by one is
    # not there for the next.
    uris = [('--pipeline-root', self.pipeline_root),
            ('--data', self.data_root)]
    if self.serving_model_dir:
      uris.append(('--serving-model-dir', self.serving_model_dir))
    if self.text.sentencepiece_model:
      # Transform reads it in its container (or on Dataflow).
      uris.append(('--sentencepiece-model', self.text.sentencepiece_model))
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


def schema_text(options: CompileOptions) -> str:
  """The schema the compiled pipeline carries (see pipeline/schema_render).

  Raises:
    ValueError: `options.schema_file` is not a Schema.
  """
  if options.schema_file:
    with open(options.schema_file) as f:
      return schema_render.check_schema_text(f.read(), options.schema_file)
  return schema_render.render_schema_text(options.text,
                                          id_is_int=options.id_type == 'int')


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
    `{'project', 'display_name', 'job_spec': {'worker_pool_specs',
    'scheduling', ...}}` as TFX's Vertex training client reads it.
  """
  job_spec: Dict[str, Any] = {
      'worker_pool_specs': worker_pools.vertex_worker_pool_specs(
          options.worker_pool, options.training_image, options.workers),
  }
  if options.service_account:
    job_spec['service_account'] = options.service_account
  job_spec['scheduling'] = scheduling.vertex_scheduling(
      options.spot, options.restart_on_worker_restart,
      options.job_timeout_seconds)
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
      schema_text=schema_text(options),
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
      trainer_executor_class=(VERTEX_EXECUTOR_CLASS
                              if options.target == 'vertex' else ''))


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
  # Before TFX is imported (15 s): a wrong extension or schema fails at once.
  _check_output_format(options, output_path)
  schema_text(options)
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
