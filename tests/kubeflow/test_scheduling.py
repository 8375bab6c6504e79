"""`--spot`, `--restart-on-worker-restart`, `--job-timeout`: parsing and checks.

test_vertex_executor.py follows them into the CustomJob the Trainer step
submits; here, the duration syntax and the refusal for Kubeflow.
"""

import pytest

from test_compile import options
from tfx_autostrategy.kubeflow import scheduling
from tfx_autostrategy.kubeflow import targets


@pytest.mark.parametrize('text, seconds', [
    ('3600', 3600), ('45s', 45), ('90m', 5400), ('24h', 86400),
    ('7d', 604800), (' 2h ', 7200)])
def test_durations(text, seconds):
  assert scheduling.parse_duration(text) == seconds


@pytest.mark.parametrize('text', ['0', '0m', '-5', '1.5h', '90 m', 'h', '',
                                  '10w', '1h30m'])
def test_bad_durations_name_the_flag_and_the_value(text):
  with pytest.raises(ValueError, match=rf"^--job-timeout {text!r}: expected "
                     'a positive duration'):
    scheduling.parse_duration(text)


def test_vertex_job_spec_carries_the_scheduling():
  job_spec = targets.vertex_training_args(options(
      spot=True, restart_on_worker_restart=True,
      job_timeout_seconds=86400))['job_spec']
  assert job_spec['scheduling'] == {
      'strategy': 'SPOT', 'restart_job_on_worker_restart': True,
      'timeout': '86400s'}
  assert targets.vertex_training_args(options())['job_spec'][
      'scheduling'] == {'strategy': 'STANDARD',
                        'restart_job_on_worker_restart': False}


@pytest.mark.parametrize('overrides, flags', [
    ({'spot': True}, '--spot'),
    ({'restart_on_worker_restart': True, 'job_timeout_seconds': 60},
     '--restart-on-worker-restart, --job-timeout'),
])
def test_kubeflow_refuses_vertex_job_options(overrides, flags):
  with pytest.raises(ValueError, match=rf'^{flags}: Vertex AI training job '
                     'options, meaningless for --target kubeflow'):
    options('kubeflow', **overrides)


def test_negative_timeout_is_refused():
  with pytest.raises(ValueError, match='--job-timeout must be > 0 seconds, '
                     'got -1'):
    options(job_timeout_seconds=-1)
