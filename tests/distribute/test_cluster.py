"""Multi-worker clusters (tfx_autostrategy/distribute/cluster.py).

TF_CONFIG / CLUSTER_SPEC parsing, the chief, the multi-worker strategy, and
only the chief keeping its export.
"""

import json
import os

import pytest

from tfx_autostrategy.components.trainer import export
from tfx_autostrategy.distribute import cluster
from tfx_autostrategy.distribute import devices
from tfx_autostrategy.distribute import strategies

from support.accelerator_fakes import cpu_only, Recorder  # pylint: disable=g-bad-import-order


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
