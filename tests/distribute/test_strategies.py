"""The TPU start-up watchdog (tfx_autostrategy/distribute/strategies.py).

An unreachable TPU is retried until it answers or the bound is reached;
other errors are not retried.
"""

import logging

import pytest

from tfx_autostrategy.distribute import strategies

from support.accelerator_fakes import FakeResolver  # pylint: disable=g-bad-import-order


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
