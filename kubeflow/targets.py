"""What each target adds to the pipeline: Vertex AI, Kubeflow, Dataflow.

- `vertex`: the Trainer step submits a Vertex AI custom job on the worker
  pools of `--machine`, running our executor there
  (`vertex_executor.Executor`); its `custom_config` carries the job.
- `kubeflow`: the Trainer runs in its own pipeline container, which requests
  the accelerator, CPU and memory through KFP's `ResourceSpec`, and lands on
  a GKE node of that accelerator through the Kubernetes platform section of
  the KFP package (a second YAML document: node selector and toleration);
  every step runs through `kfp_entrypoint`, which makes TFX's executor
  entrypoint survive the open-source KFP v2 backend.
- `--beam-runner dataflow`: the Beam arguments that send the Beam-based
  components to Dataflow.

Pure functions of `CompileOptions`; only `vertex_trainer_executor_spec` and
`kubeflow_resource_spec` import TFX or KFP, when a compile calls them.
"""

from typing import Any, Dict, Optional, Tuple

from tfx_autostrategy.kubeflow import compile_options
from tfx_autostrategy.kubeflow import scheduling
from tfx_autostrategy.kubeflow import worker_pools

# Keys of the Trainer's custom_config read by TFX's Vertex training extension
# (tfx.extensions.google_cloud_ai_platform); spelled out here so that checking
# options does not import TFX. tests/kubeflow checks they match.
ENABLE_VERTEX_KEY = 'ai_platform_enable_vertex'
VERTEX_REGION_KEY = 'ai_platform_vertex_region'
TRAINING_ARGS_KEY = 'ai_platform_training_args'


def join_uri(root: str, *parts: str) -> str:
  """`root/part/...` for local paths and remote URIs alike."""
  return '/'.join([root.rstrip('/'), *parts])


def beam_pipeline_args(options: compile_options.CompileOptions
                      ) -> Tuple[str, ...]:
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
      f'--temp_location={join_uri(options.pipeline_root, "beam", "tmp")}',
      f'--sdk_container_image={options.image}',
  )


def vertex_trainer_executor_spec():
  """The Trainer's executor on Vertex AI (ours, run as a custom job).

  Imports TFX's Vertex training extension, so only a Vertex compile calls it.
  """
  from tfx.dsl.components.base import executor_spec  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components.trainer import vertex_executor  # pylint: disable=g-import-not-at-top
  return executor_spec.ExecutorClassSpec(vertex_executor.Executor)


def vertex_training_args(options: compile_options.CompileOptions
                        ) -> Dict[str, Any]:
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


def trainer_custom_config(options: compile_options.CompileOptions
                         ) -> Optional[Dict[str, Any]]:
  """Trainer custom_config entries of `options.target` (None for kubeflow)."""
  if options.target != 'vertex':
    return None
  return {
      ENABLE_VERTEX_KEY: True,
      VERTEX_REGION_KEY: options.region,
      TRAINING_ARGS_KEY: vertex_training_args(options),
  }


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


TFX_ENTRYPOINT = 'tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor'
KFP_ENTRYPOINT = 'tfx_autostrategy.kubeflow.kfp_entrypoint'


def use_kfp_entrypoint(pipeline_spec: Dict[str, Any]) -> None:
  """Runs each container step of `pipeline_spec` through kfp_entrypoint.

  Its command `python -m <TFX's entrypoint>` becomes `python -m
  tfx_autostrategy.kubeflow.kfp_entrypoint --task_name TASK`, with TFX's
  own arguments after it (kfp_entrypoint calls TFX's). The task name is
  there for error messages: nothing else in a step's ExecutorInput names it.

  Raises:
    ValueError: a container step whose command is not TFX's entrypoint.
  """
  executors = pipeline_spec['deploymentSpec']['executors']
  for task in sorted(pipeline_spec['root']['dag']['tasks']):
    container = executors[_executor_label(pipeline_spec, task)].get(
        'container')
    if container is None:
      continue
    if container['command'] != ['python', '-m', TFX_ENTRYPOINT]:
      raise ValueError(f'{task}: unexpected command {container["command"]}')
    container['command'] = ['python', '-m', KFP_ENTRYPOINT]
    container['args'] = ['--task_name', task] + list(container['args'])


def _executor_label(pipeline_spec: Dict[str, Any], task: str) -> str:
  component = pipeline_spec['root']['dag']['tasks'][task]['componentRef']['name']
  return pipeline_spec['components'][component]['executorLabel']


def kubernetes_platform_spec(options: compile_options.CompileOptions,
                             pipeline_spec: Dict[str, Any], trainer_task: str
                            ) -> Optional[Dict[str, Any]]:
  """The KFP package's Kubernetes platform section, None where none is needed.

  KFP's `PlatformSpec` as JSON: per executor label, a kfp-kubernetes
  `KubernetesExecutorConfig`. Only the Trainer (task `trainer_task`) asks
  for an accelerator node. TFX's KubeflowV2DagRunner writes no platform
  section, hence this one.
  """
  if options.target != 'kubeflow':
    return None
  selection = worker_pools.kubernetes_node_selection(options.worker_pool)
  if not selection:
    return None
  label = _executor_label(pipeline_spec, trainer_task)
  return {'platforms': {'kubernetes': {'deploymentSpec': {
      'executors': {label: selection}}}}}


def check_output_format(options: compile_options.CompileOptions,
                        output_path: str) -> None:
  """Refuses a `.json` file for a package that needs a platform section.

  Raises:
    ValueError: `--target kubeflow` on an accelerator, to a non-YAML file.
  """
  if (options.target == 'kubeflow' and
      worker_pools.kubernetes_node_selection(options.worker_pool) and
      not output_path.endswith(('.yaml', '.yml'))):
    raise ValueError(
        f'--target kubeflow --machine {options.accelerator}: the Trainer\'s '
        'node selector and toleration are written as the Kubernetes platform '
        'section of the KFP package, which only the YAML package carries '
        f'(and the KFP client uploads): use --output NAME.yaml, not '
        f'{output_path!r}')
