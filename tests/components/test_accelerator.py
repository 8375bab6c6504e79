"""Accelerator detection, strategies and plans.

Real where this CPU machine allows (default strategy, a 4-replica
MirroredStrategy over logical CPUs in a subprocess, device initialisation
order); the TPU and GPU branches run with injected resolvers, initialisers and
strategy factories, never by patching TensorFlow.
"""

import json
import logging
import os
import subprocess
import sys

import pytest

from tfx_autostrategy import tf_env
from tfx_autostrategy.components import cluster
from tfx_autostrategy.components import cpu_replicas
from tfx_autostrategy.components import devices
from tfx_autostrategy.components import distribution_plan
from tfx_autostrategy.components import strategies
from tfx_autostrategy.components.trainer import export

WORKER_SCRIPT = os.path.join(os.path.dirname(__file__), 'multiworker_worker.py')


def cpu_only():
  return ['/device:CPU:0']


def two_gpus():
  return ['/device:CPU:0', '/device:GPU:0', '/device:GPU:1']


def worker_env(**extra):
  """A subprocess environment without this machine's cluster/TPU settings."""
  env = {k: v for k, v in os.environ.items()
         if k not in ('TF_CONFIG', 'CLUSTER_SPEC', 'TPU_NAME', 'TPU_CONFIG',
                      cpu_replicas.CPU_REPLICAS_ENV)}
  return tf_env.subprocess_env(env, TF_CPP_MIN_LOG_LEVEL='2', **extra)


class FakeResolver:

  def __init__(self, master):
    self._master = master

  def master(self):
    return self._master


class FakeStrategy:
  """Stands in for a strategy class; records how it was built."""

  def __init__(self, name, num_replicas_in_sync, kwargs):
    self.name = name
    self.num_replicas_in_sync = num_replicas_in_sync
    self.kwargs = kwargs


class Recorder:
  """Fake resolver factory, TPU initialiser and strategy factory."""

  def __init__(self, master='grpc://10.0.0.2:8470', replicas=8,
               resolver_error=None):
    self.master = master
    self.replicas = replicas
    self.resolver_error = resolver_error
    self.resolver_calls = []
    self.initialised = []
    self.strategies = []

  def resolver_factory(self, **kwargs):
    self.resolver_calls.append(kwargs)
    if self.resolver_error:
      raise ValueError(self.resolver_error)
    return FakeResolver(self.master)

  def initializer(self, resolver):
    self.initialised.append(resolver.master())
    return 'topology'

  def strategy_factory(self, name, **kwargs):
    strategy = FakeStrategy(name, self.replicas, kwargs)
    self.strategies.append(strategy)
    return strategy


def test_default_cpu_is_real_default_strategy():
  strategy, plan, info = distribution_plan.resolve('auto', 16, environ={},
                                             dev_dir='/nonexistent')
  assert info.kind == 'cpu'
  assert info.is_chief and info.num_workers == 1
  assert plan.strategy == 'DefaultStrategy'
  assert strategy.num_replicas_in_sync == plan.num_replicas
  assert plan.global_batch_size == 16 * plan.num_replicas
  assert (plan.precision, plan.steps_per_execution) == ('float32', 1)
  assert 'no TPU probe fired' in plan.reason
  as_dict = json.loads(json.dumps(plan.to_dict()))
  assert set(as_dict) >= {
      'accelerator', 'strategy', 'num_replicas', 'per_replica_batch_size',
      'global_batch_size', 'precision', 'steps_per_execution', 'is_chief',
      'devices', 'reason'}
  text = distribution_plan.format_plan(plan)
  assert 'global batch:' in text and 'DefaultStrategy' in text


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


@pytest.mark.parametrize('requested', ['tpu', 'gpu'])
def test_requesting_a_missing_accelerator_fails_loudly(requested):
  with pytest.raises(devices.AcceleratorNotFoundError,
                     match=rf"accelerator='{requested}' was requested but "
                     r'.*devices found: \[.*CPU:0'):
    devices.detect(requested, environ={}, dev_dir='/nonexistent')


def test_missing_tpu_message_names_the_probes():
  recorder = Recorder(resolver_error='Please provide a TPU Name to connect to.')
  with pytest.raises(devices.AcceleratorNotFoundError,
                     match=r'Please provide a TPU Name.*probes: explicit tpu '
                     r'argument, TPU_NAME'):
    devices.detect('tpu', environ={}, dev_dir='/nonexistent',
                       tpu_resolver_factory=recorder.resolver_factory,
                       list_devices=cpu_only)
  assert recorder.resolver_calls == [{'tpu': None}]


def test_unknown_accelerator_is_rejected():
  with pytest.raises(ValueError, match=r"one of .*'tpu'.*got 'npu'"):
    devices.detect('npu', environ={}, list_devices=cpu_only)


def test_tpu_branch_with_injected_fakes(caplog):
  recorder = Recorder(master='grpc://10.0.0.7:8470', replicas=8)
  kwargs = dict(environ={'TPU_NAME': 'my-tpu'}, dev_dir='/nonexistent',
                tpu_resolver_factory=recorder.resolver_factory,
                list_devices=cpu_only, tpu_initializer=recorder.initializer,
                strategy_factory=recorder.strategy_factory)
  with caplog.at_level(logging.WARNING):
    strategy, plan, info = distribution_plan.resolve('auto', 12, **kwargs)
  assert recorder.resolver_calls == [{'tpu': 'my-tpu'}]
  assert info.kind == 'tpu' and "TPU_NAME='my-tpu'" in info.reason
  assert strategy.name == 'TPUStrategy'
  assert strategy.kwargs == {'tpu_cluster_resolver': info.tpu_resolver}
  # The tiling rule: 12 per core is rounded up to 16, and the plan says why.
  assert plan.num_replicas == 8 and plan.per_replica_batch_size == 16
  assert plan.global_batch_size == 128
  assert plan.adjustments == (
      "per-replica batch 12 rounded up to 16: the TPU tiles each core's "
      'batch in multiples of 8 (128 per core is ideal)',)
  assert plan.to_dict()['adjustments'] == list(plan.adjustments)
  assert plan.precision == 'mixed_bfloat16'
  assert plan.steps_per_execution == distribution_plan.TPU_STEPS_PER_EXECUTION
  assert plan.jit_compile is True
  assert plan.backup_every_steps == distribution_plan.TPU_BACKUP_EVERY_STEPS
  assert any('per-replica batch 12 rounded up to 16' in r.message
             for r in caplog.records if r.levelno == logging.WARNING)

  # A second strategy in the same process must not re-initialise the TPU.
  strategies.strategy_for(info, tpu_initializer=recorder.initializer,
                           strategy_factory=recorder.strategy_factory)
  assert recorder.initialised == ['grpc://10.0.0.7:8470']
  assert len(recorder.strategies) == 2

  caplog.clear()
  with caplog.at_level(logging.WARNING):
    plan = distribution_plan.plan_for(info, strategy, 16, precision='float32',
                                steps_per_execution=64)
  assert not [r for r in caplog.records if 'rounded up' in r.message]
  assert (plan.precision, plan.steps_per_execution) == ('float32', 64)
  assert plan.adjustments == ()
  with pytest.raises(ValueError, match='jit_compile=off is impossible on TPU'):
    distribution_plan.plan_for(info, strategy, 16, jit_compile='off')


@pytest.mark.parametrize('environ, device_node, expected_call', [
    ({'TPU_ACCELERATOR_TYPE': 'v4-8'}, None, {'tpu': 'local'}),
    ({'TPU_WORKER_ID': '0'}, None, {'tpu': 'local'}),
    ({}, 'accel0', {'tpu': 'local'}),
    ({}, 'vfio/0', {'tpu': 'local'}),
    ({'KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS': 'grpc://10.1.2.3:8470'}, None,
     {'tpu': 'grpc://10.1.2.3:8470'}),
    ({'TPU_CONFIG': json.dumps({'tpu_node_name': 'node-1', 'project': 'p',
                                'zone': 'us-central1-b'})}, None,
     {'tpu': 'node-1', 'project': 'p', 'zone': 'us-central1-b'}),
])
def test_tpu_probes(tmp_path, environ, device_node, expected_call):
  if device_node:
    (tmp_path / device_node).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / device_node).touch()
  recorder = Recorder(master=f'grpc://probe-{len(environ)}-{device_node}')
  info = devices.detect(environ=environ, dev_dir=str(tmp_path),
                            tpu_resolver_factory=recorder.resolver_factory,
                            list_devices=cpu_only)
  assert info.kind == 'tpu'
  assert recorder.resolver_calls == [expected_call]


def test_vfio_control_node_alone_is_not_a_tpu(tmp_path):
  (tmp_path / 'vfio').mkdir()
  (tmp_path / 'vfio' / 'vfio').touch()
  recorder = Recorder()
  info = devices.detect(environ={}, dev_dir=str(tmp_path),
                            tpu_resolver_factory=recorder.resolver_factory,
                            list_devices=cpu_only)
  assert info.kind == 'cpu' and not recorder.resolver_calls


def test_explicit_tpu_argument_wins_over_environment():
  recorder = Recorder()
  devices.detect(tpu='named-tpu', environ={'TPU_NAME': 'other'},
                     tpu_resolver_factory=recorder.resolver_factory,
                     list_devices=cpu_only)
  assert recorder.resolver_calls == [{'tpu': 'named-tpu'}]


def test_resolver_value_error_in_auto_mode_falls_back_with_reason():
  recorder = Recorder(resolver_error='No TPUs with the specified names exist.')
  info = devices.detect(environ={'TPU_NAME': 'gone'},
                            dev_dir='/nonexistent',
                            tpu_resolver_factory=recorder.resolver_factory,
                            list_devices=cpu_only)
  assert info.kind == 'cpu'
  assert "TPU_NAME='gone' rejected by the resolver: No TPUs" in info.reason


def test_tpu_wins_over_multi_worker():
  recorder = Recorder()
  environ = {'TPU_NAME': 't',
             'TF_CONFIG': json.dumps({'cluster': {'worker': ['a:1', 'b:2']},
                                      'task': {'type': 'worker', 'index': 0}})}
  info = devices.detect(environ=environ,
                            tpu_resolver_factory=recorder.resolver_factory,
                            list_devices=cpu_only)
  assert info.kind == 'tpu' and not info.is_multi_worker


def test_cpu_override_skips_tpu_and_gpus():
  recorder = Recorder()
  info = devices.detect('cpu', environ={'TPU_NAME': 't'},
                            tpu_resolver_factory=recorder.resolver_factory,
                            list_devices=two_gpus)
  assert info.kind == 'cpu' and not recorder.resolver_calls
  strategy = strategies.strategy_for(
      info, strategy_factory=recorder.strategy_factory)
  # The default strategy would place ops on the GPUs; MirroredStrategy over
  # the CPU, not OneDeviceStrategy, which BackupAndRestore refuses.
  assert (strategy.name, strategy.kwargs) == ('MirroredStrategy',
                                              {'devices': ['/device:CPU:0']})


def test_gpu_strategies_with_injected_devices():
  recorder = Recorder(replicas=2)
  info = devices.detect(environ={}, dev_dir='/nonexistent',
                            list_devices=two_gpus)
  assert info.kind == 'gpu' and 'GPU: 2 logical GPU' in info.reason
  strategy = strategies.strategy_for(
      info, strategy_factory=recorder.strategy_factory)
  assert strategy.name == 'MirroredStrategy'
  assert strategy.kwargs == {'devices': ['/device:GPU:0', '/device:GPU:1']}
  plan = distribution_plan.plan_for(info, strategy, 32)
  assert plan.global_batch_size == 64
  assert plan.steps_per_execution == distribution_plan.GPU_STEPS_PER_EXECUTION

  one = devices.detect('gpu', environ={},
                           list_devices=lambda: ['/device:CPU:0',
                                                 '/device:GPU:0'])
  strategy = strategies.strategy_for(
      one, strategy_factory=recorder.strategy_factory)
  assert (strategy.name, strategy.kwargs) == ('MirroredStrategy',
                                              {'devices': ['/device:GPU:0']})


def gpu_info(capability):
  return devices.AcceleratorInfo(
      kind='gpu', devices=('/device:GPU:0',), num_workers=1, is_chief=True,
      task_type=None, task_id=None, reason='test',
      compute_capability=capability)


@pytest.mark.parametrize('capability, expected', [
    ((8, 0), 'mixed_float16'),
    ((7, 0), 'mixed_float16'),
    ((6, 1), 'float32'),
    (None, 'float32'),
])
def test_gpu_precision_follows_compute_capability(capability, expected):
  assert distribution_plan.default_precision(gpu_info(capability)) == expected


def test_plan_validates_overrides():
  info = gpu_info((8, 0))
  strategy = FakeStrategy('MirroredStrategy', 2, {})
  with pytest.raises(ValueError, match="precision must be one of .*'fp8'"):
    distribution_plan.plan_for(info, strategy, 8, precision='fp8')
  with pytest.raises(ValueError, match='per_replica_batch_size must be >= 1'):
    distribution_plan.plan_for(info, strategy, 0)
  with pytest.raises(ValueError, match='steps_per_execution must be >= 0'):
    distribution_plan.plan_for(info, strategy, 8, steps_per_execution=-1)


def test_apply_precision_sets_the_keras_policy():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    distribution_plan.apply_precision('mixed_bfloat16')
    assert tf.keras.mixed_precision.global_policy().name == 'mixed_bfloat16'
  finally:
    distribution_plan.apply_precision('float32')
  assert tf.keras.mixed_precision.global_policy().name == 'float32'
  with pytest.raises(ValueError, match="got 'half'"):
    distribution_plan.apply_precision('half')


def tf_config(cluster, task_type=None, index=None):
  config = {'cluster': cluster}
  if task_type:
    config['task'] = {'type': task_type, 'index': index}
  return {'TF_CONFIG': json.dumps(config)}


TWO_WORKERS = {'worker': ['h0:1', 'h1:1']}
CHIEF_AND_WORKER = {'chief': ['c:1'], 'worker': ['w0:1'],
                    'evaluator': ['e:1']}
VERTEX = {'workerpool0': ['c:1'], 'workerpool1': ['w0:1', 'w1:1']}


@pytest.mark.parametrize('environ, is_chief, task, num_workers', [
    ({}, True, (None, None), 1),
    (tf_config(CHIEF_AND_WORKER, 'chief', 0), True, ('chief', 0), 2),
    (tf_config(CHIEF_AND_WORKER, 'worker', 0), False, ('worker', 0), 2),
    (tf_config(CHIEF_AND_WORKER, 'evaluator', 0), False, ('evaluator', 0), 1),
    (tf_config(TWO_WORKERS, 'worker', 0), True, ('worker', 0), 2),
    (tf_config(TWO_WORKERS, 'worker', 1), False, ('worker', 1), 2),
    (tf_config({'worker': ['h0:1']}), True, (None, None), 1),
    ({'CLUSTER_SPEC': json.dumps({'cluster': VERTEX, 'task': {
        'type': 'workerpool0', 'index': 0}})}, True, ('chief', 0), 3),
    ({'CLUSTER_SPEC': json.dumps({'cluster': VERTEX, 'task': {
        'type': 'workerpool1', 'index': 1}})}, False, ('worker', 1), 3),
])
def test_chief_detection(environ, is_chief, task, num_workers):
  info = devices.detect('cpu', environ=environ, list_devices=cpu_only)
  assert info.is_chief is is_chief
  assert (info.task_type, info.task_id) == task
  assert info.num_workers == num_workers
  assert info.is_multi_worker is (num_workers > 1)
  assert cluster.chief_from_environ(environ) is is_chief


def test_tf_config_takes_precedence_over_cluster_spec():
  environ = dict(tf_config(TWO_WORKERS, 'worker', 1))
  environ['CLUSTER_SPEC'] = json.dumps(
      {'cluster': VERTEX, 'task': {'type': 'workerpool0', 'index': 0}})
  assert not cluster.chief_from_environ(environ)


def test_malformed_cluster_configuration_is_an_error():
  with pytest.raises(ValueError, match='TF_CONFIG is not valid JSON'):
    cluster.chief_from_environ({'TF_CONFIG': '{cluster'})
  with pytest.raises(ValueError, match='2 training tasks but no task.type'):
    cluster.chief_from_environ(tf_config(TWO_WORKERS))


def test_multi_worker_strategy_gets_cluster_and_timeout():
  recorder = Recorder(replicas=2)
  environ = {'CLUSTER_SPEC': json.dumps({'cluster': VERTEX, 'task': {
      'type': 'workerpool1', 'index': 0}})}
  info = devices.detect('auto', environ=environ, dev_dir='/nonexistent',
                            list_devices=cpu_only)
  strategy = strategies.strategy_for(
      info, strategy_factory=recorder.strategy_factory,
      collective_timeout_seconds=45)
  assert strategy.name == 'MultiWorkerMirroredStrategy'
  resolver = strategy.kwargs['cluster_resolver']
  assert resolver.cluster_spec().as_dict() == {'chief': ['c:1'],
                                               'worker': ['w0:1', 'w1:1']}
  assert (resolver.task_type, resolver.task_id) == ('worker', 0)
  assert strategy.kwargs['communication_options'].timeout_seconds == 45
  assert 'multi-worker: CLUSTER_SPEC (workerpool1 -> worker) has 3' in (
      info.reason)


def test_only_the_chief_keeps_its_export(tmp_path):
  serving_dir = str(tmp_path / 'serving')
  chief = devices.detect('cpu', environ=tf_config(TWO_WORKERS, 'worker', 0),
                             list_devices=cpu_only)
  other = devices.detect('cpu', environ=tf_config(TWO_WORKERS, 'worker', 1),
                             list_devices=cpu_only)
  assert export.export_dir_for(chief, serving_dir) == serving_dir
  temp_dir = export.export_dir_for(other, serving_dir)
  assert temp_dir != serving_dir and os.path.isdir(temp_dir)
  assert 'worker-1' in os.path.basename(temp_dir)
  with open(os.path.join(temp_dir, 'saved_model.pb'), 'w') as f:
    f.write('x')
  export.cleanup(temp_dir)
  assert not os.path.exists(temp_dir)
  os.makedirs(serving_dir)
  with pytest.raises(ValueError, match='refusing to delete'):
    export.cleanup(serving_dir)
  assert os.path.isdir(serving_dir)


class FlakyTPU:
  """A TPU node that refuses connections for its first `failures` attempts."""

  def __init__(self, failures, master='grpc://10.0.0.9:8470'):
    self.failures = failures
    self.attempts = 0
    self.now = 0.0
    self.sleeps = []
    self.resolver = FakeResolver(master)

  def initializer(self, resolver):
    self.attempts += 1
    if self.attempts <= self.failures:
      raise ConnectionError('connection refused')

  def sleep(self, seconds):
    self.sleeps.append(seconds)
    self.now += seconds


def test_unreachable_tpu_is_retried_until_it_answers(caplog):
  tpu = FlakyTPU(failures=3)
  with caplog.at_level(logging.WARNING):
    strategies.initialize_tpu(tpu.resolver, initializer=tpu.initializer,
                               wait_seconds=120, interval_seconds=15,
                               sleep=tpu.sleep, clock=lambda: tpu.now)
  assert tpu.attempts == 4 and tpu.sleeps == [15, 15, 15]
  retries = [r.getMessage() for r in caplog.records
             if 'not reachable yet' in r.getMessage()]
  assert len(retries) == 3
  assert retries[0].startswith("TPU 'grpc://10.0.0.9:8470' not reachable yet "
                               '(ConnectionError: connection refused)')
  # Initialised once per process: a second call does not connect again.
  strategies.initialize_tpu(tpu.resolver, initializer=tpu.initializer,
                             sleep=tpu.sleep, clock=lambda: tpu.now)
  assert tpu.attempts == 4


def test_tpu_that_never_answers_gives_up_naming_it():
  tpu = FlakyTPU(failures=10**6, master='grpc://10.0.0.10:8470')
  with pytest.raises(strategies.TPUUnreachableError) as raised:
    strategies.initialize_tpu(tpu.resolver, initializer=tpu.initializer,
                               wait_seconds=60, interval_seconds=15,
                               sleep=tpu.sleep, clock=lambda: tpu.now)
  # Attempts at 0, 15, 30, 45 and 60 s; the next would pass the 60 s limit.
  assert tpu.attempts == 5 and sum(tpu.sleeps) == 60
  assert str(raised.value) == (
      "TPU 'grpc://10.0.0.10:8470' did not become reachable: waited 60 s "
      'over 5 attempt(s) to connect to it and initialise the TPU system '
      '(limit 60 s); last error: ConnectionError: connection refused. Check '
      "that the TPU node exists, is READY, and is in the job's network and "
      'zone.')


def test_tpu_errors_other_than_unreachable_are_not_retried():
  def broken(resolver):
    raise ValueError('bad topology')
  with pytest.raises(ValueError, match='bad topology'):
    strategies.initialize_tpu(FakeResolver('grpc://10.0.0.11:8470'),
                               initializer=broken, sleep=pytest.fail,
                               clock=lambda: 0.0)
