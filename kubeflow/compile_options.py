"""What `autostrategy compile` compiles: `CompileOptions`, checked on creation.

Every option a remote run depends on is checked here, before TFX is imported
(about 15 s), so that bad options fail fast with the flag they name: targets
and Beam runners, the accelerator and worker count (`worker_pools`), column
names, remote URIs for everything a pipeline step reads or writes, and the
options only one target understands. `kubeflow/targets.py` turns the options
into each target's configuration; `kubeflow/compiler.py` compiles them.
"""

import dataclasses
import os

from tfx_autostrategy import conventions
from tfx_autostrategy.kubeflow import worker_pools
from tfx_autostrategy.pipeline import config as config_lib
from tfx_autostrategy.pipeline import schema_render
from tfx_autostrategy import settings as settings_lib

TARGETS = ('vertex', 'kubeflow')
BEAM_RUNNERS = ('direct', 'dataflow')


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
  pipeline_name: str = conventions.DEFAULT_PIPELINE_NAME
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
      # Raises for TPUs that GKE has no node pools of, and multi-host slices.
      worker_pools.kubernetes_node_selection(pool)
    elif worker_pools.vertex_refusal(pool):
      raise ValueError(worker_pools.vertex_refusal(pool))
    _check_columns(self.text)
    if self.id_type not in schema_render.ID_TYPES:
      raise ValueError('--id-type must be one of '
                       f'{", ".join(schema_render.ID_TYPES)}, got '
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
