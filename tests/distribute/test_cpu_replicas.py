"""Logical CPU replicas (tfx_autostrategy/distribute/cpu_replicas.py).

Configured before TensorFlow initialises devices, and a real 4-replica
MirroredStrategy over them in a subprocess.
"""

import json
import os
import subprocess
import sys

import pytest

from tfx_autostrategy.distribute import cpu_replicas
from tfx_autostrategy import tf_env

WORKER_SCRIPT = os.path.join(os.path.dirname(__file__), 'multiworker_worker.py')


def worker_env(**extra):
  """A subprocess environment without this machine's cluster/TPU settings."""
  env = {k: v for k, v in os.environ.items()
         if k not in ('TF_CONFIG', 'CLUSTER_SPEC', 'TPU_NAME', 'TPU_CONFIG',
                      cpu_replicas.CPU_REPLICAS_ENV)}
  return tf_env.subprocess_env(env, TF_CPP_MIN_LOG_LEVEL='2', **extra)


def test_configure_cpu_replicas_after_initialisation_is_a_clear_error():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  current = len(tf.config.list_logical_devices('CPU'))  # initialises TF
  cpu_replicas.configure_cpu_replicas(current)  # same N: no-op
  with pytest.raises(RuntimeError,
                     match=r'must be called before TensorFlow initialises '
                     r'devices.*before other imports'):
    cpu_replicas.configure_cpu_replicas(current + 1)
  with pytest.raises(ValueError, match='>= 1'):
    cpu_replicas.configure_cpu_replicas(0)


def test_configure_cpu_replicas_from_env_parses_the_variable():
  assert cpu_replicas.configure_cpu_replicas_from_env({}) == 0
  with pytest.raises(ValueError, match='AUTOSTRATEGY_CPU_REPLICAS.*four'):
    cpu_replicas.configure_cpu_replicas_from_env(
        {cpu_replicas.CPU_REPLICAS_ENV: 'four'})
  with pytest.raises(ValueError, match='AUTOSTRATEGY_CPU_REPLICAS.*-2'):
    cpu_replicas.configure_cpu_replicas_from_env(
        {cpu_replicas.CPU_REPLICAS_ENV: '-2'})


def test_four_logical_cpus_train_under_real_mirrored_strategy(tmp_path):
  serving_dir = str(tmp_path / 'serving')
  proc = subprocess.run(
      [sys.executable, WORKER_SCRIPT, serving_dir], capture_output=True,
      text=True, timeout=240, check=False,
      env=worker_env(**{cpu_replicas.CPU_REPLICAS_ENV: '4'}))
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  plan = result['plan']
  assert plan['strategy'] == 'MirroredStrategy'
  assert plan['num_replicas'] == result['replicas_in_sync'] == 4
  assert plan['global_batch_size'] == 4 * plan['per_replica_batch_size']
  assert plan['devices'] == [f'/device:CPU:{i}' for i in range(4)]
  assert 'CPU: 4 logical CPU devices' in plan['reason']
  losses = result['losses']
  assert losses[-1] < losses[0] / 2, losses
  assert any(abs(w) > 0.1 for w in result['kernel'])  # started at zeros
  # A single process is the chief and exports to the serving directory.
  assert result['export_dir'] == serving_dir
  assert os.path.exists(os.path.join(serving_dir, 'saved_model.pb'))
  assert 'must be called before TensorFlow initialises devices' in (
      result['reconfigure_error'])
