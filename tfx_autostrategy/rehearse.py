"""`autostrategy rehearse`: train as a Trainer machine would, on this CPU.

For one row of the worker-pool table (`kubeflow/worker_pools.py`, the table
`compile` uses too) it runs AutoStrategyTrainer's executor for real on the
Transform output of a local run, in as many processes as the machine shape
has workers, with logical CPU devices standing in for its GPUs or TPU cores
(`components/rehearsal.py` says what else is simulated), then serves the
exported model on raw text. A shape that would fail on its machine fails here
with the reason: an op without an XLA kernel, a dynamic shape, fixed lengths
that break the TPU tiling rule, a callback its strategy does not support.

Exit codes as for `autostrategy run`: 0 the rehearsal trained, exported and
served; 1 it failed (the cause on the last line); 2 bad options.
"""

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from tfx_autostrategy import tf_env

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
DEFAULT_OUTPUT = 'outputs/rehearse'
# Epochs of a rehearsal: two, so that every epoch-boundary callback fires and
# the second epoch starts from the state the first one left.
EPOCHS = 2
SERVE_TEXTS = ('you are a stupid idiot', 'thank you for the kind help', '')
WORKER_TIMEOUT_SECONDS = 1800


class RehearsalError(RuntimeError):
  """The rehearsal ran and failed: what would fail on the machine."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The options of `autostrategy rehearse`."""
  from tfx_autostrategy.components import settings  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.kubeflow import worker_pools  # pylint: disable=g-import-not-at-top
  defaults = settings.TrainerSettings()
  parser.add_argument('--accelerator', required=True,
                      help='the machine to rehearse: ' +
                      ', '.join(worker_pools.ACCELERATORS))
  parser.add_argument('--workers', type=int, default=1,
                      help='machines training together, chief included')
  parser.add_argument('--data', default='',
                      help='CSV directory for the Transform run when OUT has '
                      'none yet (default: the bundled sample)')
  parser.add_argument('--output', default=DEFAULT_OUTPUT,
                      help='output directory; the Transform output of an '
                      'earlier run there is reused')
  parser.add_argument('--steps', type=int, default=0,
                      help='training steps (default: two epochs of one '
                      'execution of steps_per_execution steps each)')
  parser.add_argument('--model', choices=settings.MODELS,
                      default=defaults.model)
  parser.add_argument('--per-replica-batch-size', type=int,
                      default=defaults.per_replica_batch_size)
  parser.add_argument('--json', action='store_true',
                      help='end with one JSON line describing the rehearsal')


def shape_for(accelerator: str, workers: int):
  """The `rehearsal.MachineShape` of a worker-pool row.

  Raises:
    ValueError: unknown accelerator (the message lists the valid ones), an
      impossible number of workers, or a shape a CPU cannot stand in for.
  """
  from tfx_autostrategy.components import rehearsal  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.kubeflow import worker_pools  # pylint: disable=g-import-not-at-top
  pool = worker_pools.worker_pool(accelerator)
  worker_pools.check_workers(pool, workers)
  if workers > 1 and pool.accelerator_count > 1:
    raise ValueError(
        f'cannot rehearse {workers} x {pool.name} here: '
        'MultiWorkerMirroredStrategy uses one CPU device per worker, so '
        f'{pool.accelerator_count} GPUs per worker cannot be stood in for; '
        f'rehearse {pool.name} alone, and the multi-worker path with a '
        'one-GPU pool such as nvidia-t4')
  return rehearsal.MachineShape(
      name=pool.name, kind=pool.kind,
      accelerators_per_worker=pool.accelerator_count, workers=workers,
      compute_capability=pool.compute_capability, tpu_type=pool.tpu_type)


def _upstream_from_mlmd(metadata_path: str) -> Optional[Dict[str, Any]]:
  """The latest finished Transform, statistics and schema outputs in MLMD."""
  if not os.path.exists(metadata_path):
    return None
  import ml_metadata as mlmd  # pylint: disable=g-import-not-at-top
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components import settings  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  store = mlmd.MetadataStore(
      tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path))
  done = (metadata_store_pb2.Execution.COMPLETE,
          metadata_store_pb2.Execution.CACHED)
  type_names = {t.id: t.name for t in store.get_artifact_types()}

  def latest_outputs(node: str):
    contexts = [c for c in store.get_contexts_by_type('node')
                if c.name.split('.')[-1] == node]
    executions = [e for c in contexts
                  for e in store.get_executions_by_context(c.id)
                  if e.last_known_state in done]
    if not executions:
      return None, None
    execution = max(executions,
                    key=lambda e: (e.last_update_time_since_epoch, e.id))
    outputs = {}
    for event in store.get_events_by_execution_ids([execution.id]):
      if event.type != metadata_store_pb2.Event.OUTPUT:
        continue
      [artifact] = store.get_artifacts_by_id([event.artifact_id])
      splits = artifact.properties.get('split_names')
      outputs[event.path.steps[0].key] = {
          'type': type_names[artifact.type_id], 'uri': artifact.uri,
          'splits': json.loads(splits.string_value) if splits else None}
    return execution, outputs

  transform, transformed = latest_outputs(pipeline_lib.TRANSFORM)
  _, statistics = latest_outputs(pipeline_lib.STATISTICS_GEN)
  _, schema = latest_outputs(pipeline_lib.SCHEMA_GEN)
  if not (transformed and statistics and schema):
    return None
  custom_config = json.loads(
      transform.custom_properties['custom_config'].string_value)
  return {
      'inputs': {
          'examples': [transformed['transformed_examples']],
          'transform_graph': [transformed['transform_graph']],
          'statistics': [statistics['statistics']],
          'schema': [schema['schema']],
      },
      'text_settings': settings.from_json(settings.TextSettings,
                                          custom_config['text']),
  }


def prepare_upstream(data: str, output_dir: str, out) -> Dict[str, Any]:
  """Transform output to train on: the latest in OUT, or a new local run.

  Raises:
    ValueError, OSError: bad data or output directory (the CSV preflight).
    RehearsalError: the pipeline up to Transform failed.
  """
  from tfx_autostrategy.pipeline import local_runner  # pylint: disable=g-import-not-at-top
  layout = local_runner.Layout(os.path.abspath(output_dir))
  upstream = _upstream_from_mlmd(layout.metadata_path)
  if upstream:
    print(f'transform output: reused from {layout.pipeline_root}', file=out)
    return upstream
  from tfx_autostrategy import console  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy import failures  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components import csv_check  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components import settings  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  data_root = data or local_runner.sample_data_dir()
  text_settings = settings.TextSettings()
  report = csv_check.check_csv_dir(
      data_root, text_column=text_settings.text_column,
      label_column=text_settings.label_column,
      id_column=text_settings.id_column,
      lang_column=text_settings.slice_column)
  local_runner.check_output_dir(output_dir)
  config = local_runner.build_config(data_root, output_dir, text_settings,
                                     settings.TrainerSettings(), report)
  print(f'transform output: none in {layout.output_dir} yet; running the '
        f'pipeline up to Transform on {os.path.abspath(data_root)} '
        f'(log: {layout.log_path})', file=out)
  started = time.monotonic()
  try:
    with console.logs_to_file(layout.log_path):
      local_runner.run_pipeline(config, until=pipeline_lib.TRANSFORM)
  except Exception as error:  # pylint: disable=broad-except
    raise RehearsalError(
        f'the pipeline up to Transform failed: {failures.error_text(error)}'
    ) from error
  print(f'transform output: ready in {time.monotonic() - started:.0f} s',
        file=out)
  return _upstream_from_mlmd(layout.metadata_path)


def _free_ports(count: int) -> List[int]:
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(('127.0.0.1', 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def cluster_environments(workers: int) -> List[Dict[str, str]]:
  """CLUSTER_SPEC and TF_CONFIG of each worker, as Vertex AI writes them.

  Vertex AI names the chief's pool `workerpool0` and the others'
  `workerpool1` in CLUSTER_SPEC, and writes the same cluster with TF job
  names (`chief`, `worker`) in TF_CONFIG.
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
    environments.append({
        'CLUSTER_SPEC': json.dumps({
            'cluster': pools, 'environment': 'cloud',
            'task': {'type': pool, 'index': task}}),
        'TF_CONFIG': json.dumps({
            'cluster': jobs, 'environment': 'cloud',
            'task': {'type': job, 'index': task}}),
    })
  return environments


def run_workers(shape, upstream: Dict[str, Any], trainer_settings,
                steps: int, run_dir: str) -> Dict[str, Any]:
  """Runs the executor in `shape.workers` processes; returns the chief's result.

  Raises:
    RehearsalError: a worker failed (its innermost error) or timed out.
  """
  from tfx_autostrategy.components import cpu_replicas  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components import distribution_plan  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components.trainer import spec as spec_lib  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components.trainer import trainer_module  # pylint: disable=g-import-not-at-top
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
  for index, cluster_env in enumerate(cluster_environments(shape.workers)):
    env = tf_env.subprocess_env(**cluster_env)
    env.pop(cpu_replicas.CPU_REPLICAS_ENV, None)
    if shape.replicas_per_worker > 1:
      env[cpu_replicas.CPU_REPLICAS_ENV] = str(shape.replicas_per_worker)
    result_path = os.path.join(run_dir, f'result-{index}.json')
    log_path = os.path.join(run_dir, f'worker-{index}.log')
    with open(log_path, 'w') as log:
      process = subprocess.Popen(
          [sys.executable, '-m', 'tfx_autostrategy.rehearse_worker',
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
      raise RehearsalError(
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
      raise RehearsalError(
          f'{result.get("error") or f"exit status {process.returncode}"} '
          f'(log: {log_path})')
    results.append(result)
  return results[0]


def serve(model_dir: str, text_column: str) -> List[float]:
  """Serves `SERVE_TEXTS` with the exported model; returns the probabilities.

  Raises:
    RehearsalError: the model does not serve, or returns something other
      than one probability in [0, 1] per text.
  """
  import math  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components.trainer import trainer_module  # pylint: disable=g-import-not-at-top
  model = tf.saved_model.load(model_dir)
  signature = model.signatures[trainer_module.SERVING_SIGNATURE]
  examples = [tf.train.Example(features=tf.train.Features(feature={
      text_column: tf.train.Feature(
          bytes_list=tf.train.BytesList(value=[text.encode()]))}))
              .SerializeToString() for text in SERVE_TEXTS]
  output = signature(examples=tf.constant(examples))
  values = output[trainer_module.PROBABILITIES].numpy().tolist()
  if len(values) != len(SERVE_TEXTS) or not all(
      math.isfinite(v) and 0.0 <= v <= 1.0 for v in values):
    raise RehearsalError(f'the exported model served {values} for '
                         f'{len(SERVE_TEXTS)} texts')
  return values


def run(args: argparse.Namespace) -> int:
  """`autostrategy rehearse`.

  Holds the output directory's lock (`pipeline/run_lock.py`) from before its
  first write there to the end: the rehearsal reads and may extend the MLMD
  store a concurrent `autostrategy run` on OUT would be writing.
  """
  with contextlib.ExitStack() as lock:
    return _run_locked(args, lock)


def _run_locked(args: argparse.Namespace, lock: contextlib.ExitStack) -> int:
  """`run`; the output directory's lock goes on `lock` once taken."""
  from tfx_autostrategy.components import cpu_replicas  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components import distribution_plan  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.components import settings  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import local_runner  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import run_lock  # pylint: disable=g-import-not-at-top
  out = sys.stdout
  try:
    shape = shape_for(args.accelerator, args.workers)
    if args.steps < 0:
      raise ValueError(f'--steps must be >= 0, got {args.steps}')
    trainer_settings = settings.TrainerSettings(
        model=args.model, epochs=EPOCHS,
        per_replica_batch_size=args.per_replica_batch_size,
        accelerator=shape.kind)
    local_runner.check_output_dir(args.output)
    lock.enter_context(run_lock.hold(
        args.output, command=run_lock.command_line(getattr(args, 'argv',
                                                           None))))
    upstream = prepare_upstream(args.data, args.output, out)
  except (ValueError, OSError, run_lock.RunLockedError) as error:
    print(f'error: {error}', file=sys.stderr)
    return EXIT_BAD_INPUT
  except RehearsalError as error:
    print(f'error: {error}', file=sys.stderr)
    return EXIT_FAILED
  steps = args.steps or EPOCHS * distribution_plan.steps_per_execution_for(
      shape.kind)
  run_dir = os.path.join(os.path.abspath(args.output), 'rehearsal',
                         f'{shape.name}-x{shape.workers}',
                         time.strftime('%Y%m%d-%H%M%S'))
  print(f'rehearsing {shape.workers} x {shape.name}: {steps} steps in '
        f'{shape.workers} process(es) (logs: {run_dir})', file=out, flush=True)
  started = time.monotonic()
  try:
    result = run_workers(shape, upstream, trainer_settings, steps, run_dir)
    exported = os.path.join(run_dir, 'model', 'Format-Serving')
    probabilities = serve(exported, upstream['text_settings'].text_column)
  except RehearsalError as error:
    print(f'error: rehearsal of {shape.name} failed: {error}',
          file=sys.stderr)
    return EXIT_FAILED
  plan = result['plan']
  steps_per_epoch = max(1, steps // EPOCHS)
  summary = {
      'accelerator': shape.name,
      'kind': shape.kind,
      'workers': shape.workers,
      'strategy': plan['strategy'],
      'num_replicas': plan['num_replicas'],
      'per_replica_batch_size': plan['per_replica_batch_size'],
      'global_batch_size': plan['global_batch_size'],
      'precision': plan['precision'],
      'steps_per_execution': plan['steps_per_execution'],
      'jit_compile': plan['jit_compile'],
      'xla_in_fit': plan['xla_in_fit'],
      'backup_every_steps': plan['backup_every_steps'],
      'adjustments': plan['adjustments'],
      'steps_trained': len(result.get('history', [])) * steps_per_epoch,
      'exported_model': exported,
      'serves': True,
      'probabilities': probabilities,
      'stand_ins': plan['stand_ins'],
      'seconds': round(time.monotonic() - started, 1),
  }
  for name in ('strategy', 'num_replicas', 'global_batch_size', 'precision',
               'steps_per_execution', 'jit_compile', 'steps_trained'):
    print(f'  {name:<20} {summary[name]}', file=out)
  for note in summary['adjustments']:
    print(f'  adjusted: {note}', file=out)
  for note in summary['stand_ins']:
    print(f'  stand-in: {note}', file=out)
  print(f'  served {len(probabilities)} raw texts: '
        f'{", ".join(f"{p:.3f}" for p in probabilities)}', file=out)
  print(f'rehearsal of {shape.workers} x {shape.name} passed in '
        f'{summary["seconds"]:.0f} s; exported model: {exported}', file=out)
  if args.json:
    print(json.dumps(summary, sort_keys=True), file=out)
  return EXIT_OK
