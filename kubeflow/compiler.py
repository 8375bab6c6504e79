"""Compiles `create_pipeline` for Kubeflow Pipelines and Vertex AI Pipelines.

The same pipeline definition as the local run, with what remote runs need:
code imported from the container image (no module-file wheels), MLMD provided
by the orchestrator, and the Trainer placed on the machine that
`--machine` names (see `worker_pools`). The layers, each a module:

- `compile_options`: `CompileOptions`, every option checked before TFX is
  imported (about 15 s), so that bad options fail fast;
- `targets`: what each target adds (the Vertex AI training job, the Kubeflow
  container resources and Kubernetes platform section, Dataflow's Beam
  arguments);
- this module: the remote run's `PipelineConfig`, the pipeline, and the
  compiled file (`compile_pipeline`).
"""

import dataclasses
import json
import os
from typing import Any, Dict

from tfx_autostrategy.kubeflow import compile_options
from tfx_autostrategy.kubeflow import targets
from tfx_autostrategy.pipeline import atomic_io
from tfx_autostrategy.pipeline import config as config_lib
from tfx_autostrategy.pipeline import schema_render


def schema_text(options: compile_options.CompileOptions) -> str:
  """The schema the compiled pipeline carries (see pipeline/schema_render).

  Raises:
    ValueError: `options.schema_file` is not a Schema.
  """
  if options.schema_file:
    with open(options.schema_file) as f:
      return schema_render.check_schema_text(f.read(), options.schema_file)
  return schema_render.render_schema_text(options.text,
                                          id_is_int=options.id_type == 'int')


def build_config(options: compile_options.CompileOptions
                ) -> config_lib.PipelineConfig:
  """The PipelineConfig of a remote run."""
  return config_lib.PipelineConfig(
      pipeline_name=options.pipeline_name,
      pipeline_root=options.pipeline_root,
      data_root=options.data_root,
      serving_model_dir=(
          options.serving_model_dir
          or targets.join_uri(options.pipeline_root, 'serving_model')),
      schema_text=schema_text(options),
      presplit=options.presplit,
      text=options.text,
      trainer=dataclasses.replace(options.trainer,
                                  accelerator=options.worker_pool.kind),
      beam_pipeline_args=targets.beam_pipeline_args(options),
      # The orchestrator provides MLMD.
      metadata_path='',
      enable_cache=options.enable_cache,
      # The image carries the code; module-file wheels would be built and
      # uploaded to the pipeline root at compile time.
      use_module_files=False,
      trainer_custom_config=targets.trainer_custom_config(options),
      trainer_executor_spec=(targets.vertex_trainer_executor_spec()
                             if options.target == 'vertex' else None))


def build_pipeline(options: compile_options.CompileOptions):
  """`create_pipeline` for `options`, with the Trainer's resources attached."""
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  pipeline = pipeline_lib.create_pipeline(build_config(options))
  if options.target == 'kubeflow':
    trainer = next(c for c in pipeline.components
                   if c.id == pipeline_lib.TRAINER)
    trainer.with_platform_config(
        targets.kubeflow_resource_spec(options.worker_pool))
  return pipeline


def compile_pipeline(options: compile_options.CompileOptions, output_path: str
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
  targets.check_output_format(options, output_path)
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
  if options.target == 'kubeflow':
    targets.use_kfp_entrypoint(spec)
  platform_spec = targets.kubernetes_platform_spec(options, spec,
                                                   pipeline_lib.TRAINER)
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
