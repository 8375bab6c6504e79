"""This process's place in a training cluster (TF_CONFIG, Vertex CLUSTER_SPEC).

`cluster_config` parses the variable (Vertex AI's `workerpool<N>` names become
TF job names), counts the synchronous training tasks and decides which process
is the chief; `chief_from_environ` answers only the last question, without
importing TensorFlow (the Trainer's executor asks it after `run_fn`).
"""

import dataclasses
import json
import os
from typing import Dict, Mapping, Optional, Tuple

# Training tasks of a TF_CONFIG cluster; `evaluator` and `ps` tasks do not
# take part in the synchronous all-reduce.
TRAINING_JOBS = ('chief', 'worker')

# Vertex AI worker pools as TF job names
# (https://cloud.google.com/vertex-ai/docs/training/distributed-training).
_VERTEX_POOL_JOBS = {
    'workerpool0': 'chief',
    'workerpool1': 'worker',
    'workerpool2': 'ps',
    'workerpool3': 'evaluator',
}


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
  """This process's place in a TF_CONFIG / CLUSTER_SPEC cluster."""
  cluster: Dict[str, Tuple[str, ...]]
  task_type: Optional[str]
  task_id: Optional[int]
  num_workers: int
  is_chief: bool
  source: str


def cluster_config(environ: Mapping[str, str]) -> ClusterConfig:
  """Parses TF_CONFIG, or Vertex AI's CLUSTER_SPEC when TF_CONFIG is absent.

  Raises:
    ValueError: the variable is not valid JSON, or names several training
      tasks without saying which one this process is.
  """
  source = ''
  for variable in ('TF_CONFIG', 'CLUSTER_SPEC'):
    if environ.get(variable, '').strip():
      source = variable
      break
  if not source:
    return ClusterConfig({}, None, None, 1, True, 'no TF_CONFIG/CLUSTER_SPEC')
  try:
    config = json.loads(environ[source])
  except json.JSONDecodeError as error:
    raise ValueError(f'{source} is not valid JSON: {error}') from error
  cluster = config.get('cluster') or {}
  task = config.get('task') or {}
  task_type = task.get('type')
  task_id = task.get('index')
  if source == 'CLUSTER_SPEC':
    cluster = {_VERTEX_POOL_JOBS.get(pool, pool): addresses
               for pool, addresses in cluster.items()}
    task_type = _VERTEX_POOL_JOBS.get(task_type, task_type)
  cluster = {job: tuple(addresses) for job, addresses in cluster.items()}
  task_id = None if task_id is None else int(task_id)
  num_training = sum(len(cluster.get(job, ())) for job in TRAINING_JOBS)
  if num_training > 1 and (task_type is None or task_id is None):
    raise ValueError(
        f'{source} lists {num_training} training tasks but no task.type and '
        f'task.index for this process: {environ[source]}')
  if task_type is None:
    is_chief = True
  elif 'chief' in cluster:
    is_chief = task_type == 'chief'
  else:
    is_chief = task_type == 'worker' and task_id == 0
  num_workers = num_training if task_type in TRAINING_JOBS else 1
  if source == 'CLUSTER_SPEC':
    source = f'CLUSTER_SPEC ({task.get("type")} -> {task_type})'
  return ClusterConfig(cluster, task_type, task_id, max(num_workers, 1),
                       is_chief, source)


def chief_from_environ(environ: Optional[Mapping[str, str]] = None) -> bool:
  """Returns whether this process is the chief, from TF_CONFIG/CLUSTER_SPEC.

  The chief is the `chief` task, or `worker` 0 when the cluster has no chief;
  with Vertex AI's CLUSTER_SPEC it is the `workerpool0` replica. A process
  without cluster configuration is its own chief. Does not import TensorFlow.

  Args:
    environ: environment to read; defaults to `os.environ`.
  """
  environ = os.environ if environ is None else environ
  config = cluster_config(environ)
  return config.is_chief and environ.get('TPU_WORKER_ID', '0') in ('', '0')


def cluster_note(cluster: ClusterConfig) -> str:
  """Says, for `AcceleratorInfo.reason`, how the cluster shaped this run."""
  if cluster.num_workers > 1:
    return (f'; multi-worker: {cluster.source} has {cluster.num_workers} '
            f'training tasks, this is {cluster.task_type}:{cluster.task_id}')
  if cluster.task_type is not None:
    return f'; {cluster.source} task {cluster.task_type}:{cluster.task_id}'
  return ''
