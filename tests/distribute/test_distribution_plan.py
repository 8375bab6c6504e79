"""The distribution plan (tfx_autostrategy/distribute/distribution_plan.py).

The real default strategy on this CPU, the TPU and GPU plans with injected
devices, precision and the plan's checks.
"""

import json
import logging

import pytest

from tfx_autostrategy.distribute import devices
from tfx_autostrategy.distribute import distribution_plan
from tfx_autostrategy.distribute import strategies
from tfx_autostrategy.settings import TrainerSettings

from support.accelerator_fakes import cpu_only, two_gpus, FakeStrategy, Recorder  # pylint: disable=g-bad-import-order


def test_default_cpu_is_real_default_strategy():
  strategy, plan, info = distribution_plan.resolve(
      TrainerSettings(per_replica_batch_size=16), environ={},
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


def test_tpu_branch_with_injected_fakes(caplog):
  recorder = Recorder(master='grpc://10.0.0.7:8470', replicas=8)
  kwargs = dict(environ={'TPU_NAME': 'my-tpu'}, dev_dir='/nonexistent',
                tpu_resolver_factory=recorder.resolver_factory,
                list_devices=cpu_only, tpu_initializer=recorder.initializer,
                strategy_factory=recorder.strategy_factory)
  with caplog.at_level(logging.WARNING):
    strategy, plan, info = distribution_plan.resolve(
        TrainerSettings(per_replica_batch_size=12), **kwargs)
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
    plan = distribution_plan.plan_for(info, strategy, TrainerSettings(
        per_replica_batch_size=16, precision='float32',
        steps_per_execution=64))
  assert not [r for r in caplog.records if 'rounded up' in r.message]
  assert (plan.precision, plan.steps_per_execution) == ('float32', 64)
  assert plan.adjustments == ()
  with pytest.raises(ValueError, match='jit_compile=off is impossible on TPU'):
    distribution_plan.plan_for(info, strategy, TrainerSettings(
        per_replica_batch_size=16, jit_compile='off'))


def test_gpu_strategies_with_injected_devices():
  recorder = Recorder(replicas=2)
  info = devices.detect(environ={}, dev_dir='/nonexistent',
                            list_devices=two_gpus)
  assert info.kind == 'gpu' and 'GPU: 2 logical GPU' in info.reason
  strategy = strategies.strategy_for(
      info, strategy_factory=recorder.strategy_factory)
  assert strategy.name == 'MirroredStrategy'
  assert strategy.kwargs == {'devices': ['/device:GPU:0', '/device:GPU:1']}
  plan = distribution_plan.plan_for(info, strategy, TrainerSettings())
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
    # Hopper (H100, H200): bfloat16 at float16's rate, no loss scaling.
    ((9, 0), 'mixed_bfloat16'),
    ((8, 9), 'mixed_float16'),
    ((8, 0), 'mixed_float16'),
    ((7, 0), 'mixed_float16'),
    ((6, 1), 'float32'),
    (None, 'float32'),
])
def test_gpu_precision_follows_compute_capability(capability, expected):
  assert distribution_plan.default_precision(gpu_info(capability)) == expected


def test_plan_takes_the_overrides_and_the_device_defaults():
  info = gpu_info((8, 0))
  strategy = FakeStrategy('MirroredStrategy', 2, {})
  plan = distribution_plan.plan_for(info, strategy, TrainerSettings(
      per_replica_batch_size=12, precision='mixed_bfloat16',
      steps_per_execution=7, jit_compile='off', backup_every_steps=50))
  assert (plan.per_replica_batch_size, plan.global_batch_size) == (12, 24)
  assert (plan.precision, plan.steps_per_execution) == ('mixed_bfloat16', 7)
  assert (plan.jit_compile, plan.backup_every_steps) == (False, 50)
  plan = distribution_plan.plan_for(info, strategy, TrainerSettings())
  assert (plan.precision, plan.steps_per_execution) == (
      'mixed_float16', distribution_plan.GPU_STEPS_PER_EXECUTION)
  assert (plan.jit_compile, plan.backup_every_steps) == (True, 0)


def test_apply_precision_sets_the_keras_policy():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    distribution_plan.apply_precision('mixed_bfloat16')
    assert tf.keras.mixed_precision.global_policy().name == 'mixed_bfloat16'
  finally:
    distribution_plan.apply_precision('float32')
  assert tf.keras.mixed_precision.global_policy().name == 'float32'
