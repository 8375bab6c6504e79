"""A real two-process MultiWorkerMirroredStrategy cluster on 127.0.0.1.

Each worker runs `multiworker_worker.py` with its own TF_CONFIG. Every
subprocess is bounded and SIGKILLed on timeout: multi-worker TensorFlow
catches SIGTERM (preemption notifier), so terminate() would not stop it.
"""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tfx_autostrategy.distribute import cpu_replicas
from tfx_autostrategy import tf_env

WORKER_SCRIPT = os.path.join(os.path.dirname(__file__), 'multiworker_worker.py')
RUN_TIMEOUT_SECONDS = 240
# How long the chief waits for a worker that never comes.
JOIN_TIMEOUT_SECONDS = 20


def free_ports(n):
  sockets = [socket.socket() for _ in range(n)]
  try:
    for s in sockets:
      s.bind(('127.0.0.1', 0))
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def worker_env(cluster, index):
  env = {k: v for k, v in os.environ.items()
         if k not in ('TF_CONFIG', 'CLUSTER_SPEC', 'TPU_NAME', 'TPU_CONFIG',
                      cpu_replicas.CPU_REPLICAS_ENV)}
  env = tf_env.subprocess_env(
      env, TF_CPP_MIN_LOG_LEVEL='2',
      TF_CONFIG=json.dumps({'cluster': cluster,
                                   'task': {'type': 'worker', 'index': index}}))
  return env


def run_bounded(commands, timeout):
  """Runs (argv, env) pairs concurrently; kills all of them past `timeout`.

  Returns:
    [(returncode, stdout, stderr)] in the order of `commands`.
  """
  procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
           for argv, env in commands]
  deadline = time.monotonic() + timeout
  results = []
  try:
    for proc in procs:
      try:
        out, err = proc.communicate(
            timeout=max(deadline - time.monotonic(), 0.1))
      except subprocess.TimeoutExpired:
        for p in procs:
          p.kill()
        details = [p.communicate()[1][-2000:] for p in procs]
        pytest.fail(f'workers still running after {timeout} s; stderr tails: '
                    f'{details}')
      results.append((proc.returncode, out, err))
  finally:
    for proc in procs:
      if proc.poll() is None:
        proc.kill()
        proc.wait()
  return results


@pytest.mark.slow
def test_two_workers_train_in_sync_and_only_the_chief_exports(tmp_path):
  cluster = {'worker': [f'127.0.0.1:{p}' for p in free_ports(2)]}
  serving_dir = str(tmp_path / 'serving')
  results = run_bounded(
      [([sys.executable, WORKER_SCRIPT, serving_dir, '60'],
        worker_env(cluster, i)) for i in range(2)],
      RUN_TIMEOUT_SECONDS)
  for returncode, _, err in results:
    assert returncode == 0, err[-3000:]
  chief, other = (json.loads(out.strip().splitlines()[-1])
                  for _, out, _ in results)

  for result in (chief, other):
    plan = result['plan']
    assert plan['strategy'] == 'MultiWorkerMirroredStrategy'
    assert plan['num_workers'] == 2
    assert plan['num_replicas'] == result['replicas_in_sync'] == 2
    assert plan['global_batch_size'] == 2 * plan['per_replica_batch_size']
    assert result['losses'][-1] < result['losses'][0] / 2, result['losses']
  assert (chief['plan']['is_chief'], other['plan']['is_chief']) == (True,
                                                                    False)
  # Synchronous training: both workers end with the same weights.
  assert chief['kernel'] == pytest.approx(other['kernel'])
  assert chief['losses'] == pytest.approx(other['losses'])

  # Exactly one serving export, by the chief; the other worker saved to a
  # temporary directory (saving runs collectives) that is gone now.
  assert chief['export_dir'] == serving_dir
  assert os.path.exists(os.path.join(serving_dir, 'saved_model.pb'))
  assert other['export_dir'] != serving_dir
  assert other['saved_model_written']
  assert not other['export_dir_exists_after_cleanup']
  assert os.listdir(tmp_path) == ['serving']


@pytest.mark.slow
def test_chief_exits_within_bound_when_a_worker_never_starts(tmp_path):
  cluster = {'worker': [f'127.0.0.1:{p}' for p in free_ports(2)]}
  started = time.monotonic()
  [(returncode, out, err)] = run_bounded(
      [([sys.executable, WORKER_SCRIPT, str(tmp_path / 'serving'),
         str(JOIN_TIMEOUT_SECONDS)], worker_env(cluster, 0))],
      timeout=JOIN_TIMEOUT_SECONDS + 100)
  elapsed = time.monotonic() - started
  assert returncode == 1, (out, err[-3000:])
  assert f'Timeout (0:00:{JOIN_TIMEOUT_SECONDS})!' in err
  assert '_exit_unless_all_workers_join' in err
  assert (f'if any worker has not started within {JOIN_TIMEOUT_SECONDS} s '
          'this process exits with status 1') in err
  assert cluster['worker'][1] in err  # the log names the cluster
  assert not out.strip()  # it never got to train
  assert elapsed < JOIN_TIMEOUT_SECONDS + 90


@pytest.mark.slow
def test_chief_fails_within_bound_when_a_worker_dies_mid_training(tmp_path):
  cluster = {'worker': [f'127.0.0.1:{p}' for p in free_ports(2)]}
  serving_dir = str(tmp_path / 'serving')
  dying = worker_env(cluster, 1)
  dying['MULTIWORKER_TEST_DIE_AFTER_EPOCH'] = '1'
  started = time.monotonic()
  (chief_code, chief_out, chief_err), (worker_code, _, _) = run_bounded(
      [([sys.executable, WORKER_SCRIPT, serving_dir, str(JOIN_TIMEOUT_SECONDS)],
        worker_env(cluster, 0)),
       ([sys.executable, WORKER_SCRIPT, serving_dir, str(JOIN_TIMEOUT_SECONDS)],
        dying)],
      RUN_TIMEOUT_SECONDS)
  assert worker_code == 3
  # The chief does not hang on the lost peer: it fails, saying why, and
  # exports nothing.
  assert chief_code != 0, chief_out
  assert not chief_out.strip()
  assert not os.path.exists(serving_dir)
  # TF's coordination service notices the missing heartbeat and aborts the
  # collective, naming the lost task.
  assert 'Collective ops is aborted' in chief_err, chief_err[-3000:]
  assert '/job:worker/replica:0/task:1' in chief_err
  assert time.monotonic() - started < RUN_TIMEOUT_SECONDS
