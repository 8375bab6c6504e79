"""The worker processes of one `autostrategy rehearse`, and serving the export.

`run_workers` starts `tfx_autostrategy.cli.rehearse_worker` (the Trainer's
executor, for real) once per worker of the machine shape, each with the
logical CPU devices that stand in for its GPUs or TPU cores and, for several
workers, the CLUSTER_SPEC and TF_CONFIG Vertex AI writes
(`cluster_environments`, also what the tests' Vertex AI job-service stand-in
gives its replicas); `serve` loads the chief's export and serves raw texts.
"""

import json
import os
import socket
import subprocess
import sys
import time
from typing import Any, Dict, List

from tfx_autostrategy import conventions
from tfx_autostrategy.cli import failures
from tfx_autostrategy import tf_env

SERVE_TEXTS = ('you are a stupid idiot', 'thank you for the kind help', '')
WORKER_TIMEOUT_SECONDS = 1800


def _free_ports(count: int) -> List[int]:
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(('127.0.0.1', 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def cluster_environments(workers: int, tpu_hosts: bool = False
                        ) -> List[Dict[str, str]]:
  """CLUSTER_SPEC and TF_CONFIG of each worker, as Vertex AI writes them.

  Vertex AI names the chief's pool `workerpool0` and the others'
  `workerpool1` in CLUSTER_SPEC, and writes the same cluster with TF job
  names (`chief`, `worker`) in TF_CONFIG. With `tpu_hosts` the workers are
  the hosts of a TPU slice: each also gets the variables a TPU VM runtime
  sets on every host (`TPU_WORKER_ID`, `TPU_WORKER_HOSTNAMES`).
  """
  if workers == 1:
    return [{}]
  addresses = [f'localhost:{port}' for port in _free_ports(workers)]
  pools = {'workerpool0': addresses[:1], 'workerpool1': addresses[1:]}
  jobs = {'chief': addresses[:1], 'worker': addresses[1:]}
  environments = []
  for index in range(workers):
    pool, job, task = (('workerpool0', 'chief', 0) if index == 0 else
                       ('workerpool1', 'worker', index - 1))
    environment = {
        'CLUSTER_SPEC': json.dumps({
            'cluster': pools, 'environment': 'cloud',
            'task': {'type': pool, 'index': task}}),
        'TF_CONFIG': json.dumps({
            'cluster': jobs, 'environment': 'cloud',
            'task': {'type': job, 'index': task}}),
    }
    if tpu_hosts:
      environment['TPU_WORKER_ID'] = str(index)
      environment['TPU_WORKER_HOSTNAMES'] = ','.join(
          address.split(':')[0] for address in addresses)
    environments.append(environment)
  return environments


def run_workers(shape, upstream: Dict[str, Any], trainer_settings,
                steps: int, run_dir: str) -> Dict[str, Any]:
  """Runs the executor in `shape.workers` processes; returns the chief's result.

  Args:
    shape: the `rehearsal.MachineShape` to rehearse.
    upstream: what `rehearse_upstream.prepare_upstream` returned.
    trainer_settings: the `TrainerSettings` to train with.
    steps: training steps in all.
    run_dir: where the spec, the results, the workers' logs and the model go.

  Raises:
    failures.RehearsalError: a worker failed (its innermost error) or timed
      out.
  """
  from tfx_autostrategy.components.trainer import spec as spec_lib  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components.trainer import trainer_module  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.distribute import cpu_replicas  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import config as config_lib  # pylint: disable=g-import-not-at-top
  exec_properties = {
      'train_args': json.dumps({'num_steps': steps}),
      # Validation at every epoch end, one step: the eval split is read
      # through the same distributed input path as on the machine.
      'eval_args': json.dumps({'num_steps': 1}),
      'run_fn': config_lib.RUN_FN,
      'custom_config': json.dumps(
          {trainer_module.REHEARSAL_KEY: shape.to_dict()}),
      **spec_lib.settings_parameters(trainer_settings,
                                     upstream['text_settings']),
  }
  spec = {
      'inputs': upstream['inputs'],
      'outputs': {
          'model': [{'type': 'Model', 'uri': os.path.join(run_dir, 'model')}],
          'model_run': [{'type': 'ModelRun',
                         'uri': os.path.join(run_dir, 'model_run')}],
      },
      'exec_properties': exec_properties,
  }
  os.makedirs(run_dir, exist_ok=True)
  spec_path = os.path.join(run_dir, 'spec.json')
  with open(spec_path, 'w') as f:
    json.dump(spec, f, indent=2)
  processes = []
  for index, cluster_env in enumerate(cluster_environments(
      shape.workers, tpu_hosts=shape.kind == 'tpu')):
    env = tf_env.subprocess_env(**cluster_env)
    env.pop(cpu_replicas.CPU_REPLICAS_ENV, None)
    if shape.replicas_per_worker > 1:
      env[cpu_replicas.CPU_REPLICAS_ENV] = str(shape.replicas_per_worker)
    result_path = os.path.join(run_dir, f'result-{index}.json')
    log_path = os.path.join(run_dir, f'worker-{index}.log')
    with open(log_path, 'w') as log:
      process = subprocess.Popen(
          [sys.executable, '-m', 'tfx_autostrategy.cli.rehearse_worker',
           spec_path, result_path], stdout=log, stderr=subprocess.STDOUT,
          env=env)
    processes.append((process, result_path, log_path))
  deadline = time.monotonic() + WORKER_TIMEOUT_SECONDS
  results = []
  for process, result_path, log_path in processes:
    try:
      process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
      for other, _, _ in processes:
        other.kill()
      raise failures.RehearsalError(
          f'a worker did not finish within {WORKER_TIMEOUT_SECONDS} s '
          f'(log: {log_path})') from None
    result = {}
    if os.path.exists(result_path):
      with open(result_path) as f:
        result = json.load(f)
    if process.returncode or 'error' in result:
      for other, _, _ in processes:
        if other.poll() is None:
          other.kill()
      raise failures.RehearsalError(
          f'{result.get("error") or f"exit status {process.returncode}"} '
          f'(log: {log_path})')
    results.append(result)
  return results[0]


def serve(model_dir: str, text_column: str) -> List[float]:
  """Serves `SERVE_TEXTS` with the exported model; returns the probabilities.

  Raises:
    failures.RehearsalError: the model does not serve, or returns something
      other than one probability in [0, 1] per text.
  """
  import math  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  model = tf.saved_model.load(model_dir)
  signature = model.signatures[conventions.SERVING_SIGNATURE]
  examples = [tf.train.Example(features=tf.train.Features(feature={
      text_column: tf.train.Feature(
          bytes_list=tf.train.BytesList(value=[text.encode()]))}))
              .SerializeToString() for text in SERVE_TEXTS]
  output = signature(examples=tf.constant(examples))
  values = output[conventions.PROBABILITIES].numpy().tolist()
  if len(values) != len(SERVE_TEXTS) or not all(
      math.isfinite(v) and 0.0 <= v <= 1.0 for v in values):
    raise failures.RehearsalError(f'the exported model served {values} for '
                                  f'{len(SERVE_TEXTS)} texts')
  return values
