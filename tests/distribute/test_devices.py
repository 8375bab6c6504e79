"""Accelerator detection (tfx_autostrategy/distribute/devices.py): probes and precedence.

The TPU and GPU branches run with injected resolvers and device lists, never
by patching TensorFlow.
"""

import json

import pytest

from tfx_autostrategy.distribute import devices
from tfx_autostrategy.distribute import strategies

from support.accelerator_fakes import cpu_only, two_gpus, Recorder  # pylint: disable=g-bad-import-order


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


SLICE_HOSTS = 't1v-n-0,t1v-n-1,t1v-n-2,t1v-n-3'


@pytest.mark.parametrize('environ, expected', [
    ({}, (0, 1)),
    # A single-host TPU VM lists itself.
    ({'TPU_WORKER_ID': '0', 'TPU_WORKER_HOSTNAMES': 't1v-n-0'}, (0, 1)),
    ({'TPU_WORKER_ID': '2', 'TPU_WORKER_HOSTNAMES': SLICE_HOSTS}, (2, 4)),
    ({'TPU_WORKER_HOSTNAMES': SLICE_HOSTS}, (0, 4)),
])
def test_tpu_slice_host(environ, expected):
  assert devices.tpu_slice_host(environ) == expected


@pytest.mark.parametrize('worker_id', ['4', 'x'])
def test_a_host_outside_the_slice_is_refused(worker_id):
  with pytest.raises(ValueError) as error:
    devices.tpu_slice_host({'TPU_WORKER_ID': worker_id,
                            'TPU_WORKER_HOSTNAMES': SLICE_HOSTS})
  assert str(error.value) == (
      f"TPU_WORKER_ID='{worker_id}' is not a host of the 4-host slice "
      f"TPU_WORKER_HOSTNAMES='{SLICE_HOSTS}'")


@pytest.mark.parametrize('worker_id, chief', [('0', True), ('3', False)])
def test_every_host_of_a_slice_sees_the_whole_slice(worker_id, chief):
  recorder = Recorder()
  info = devices.detect(
      'tpu', environ={'TPU_NAME': 'slice', 'TPU_WORKER_ID': worker_id,
                      'TPU_WORKER_HOSTNAMES': SLICE_HOSTS},
      tpu_resolver_factory=recorder.resolver_factory, list_devices=cpu_only)
  assert (info.kind, info.num_workers, info.is_chief) == ('tpu', 4, chief)
  assert info.reason.endswith('; host of a 4-host slice (TPU_WORKER_HOSTNAMES)')
  assert not info.is_multi_worker
