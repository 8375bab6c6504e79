"""The `tf.distribute` strategy for what `devices.detect` found.

Strategy per case: TPU -> `TPUStrategy` (after `initialize_tpu`, which waits a
bounded time for a remote TPU node); multi-worker ->
`MultiWorkerMirroredStrategy`; >= 1 GPUs -> `MirroredStrategy` over them (one
GPU included: tf_keras 2.16's `BackupAndRestore` refuses `OneDeviceStrategy`
at the start of `fit`, and TFX's own Vertex AI tutorial uses a one-device
`MirroredStrategy`); N > 1 logical CPUs (`cpu_replicas`) ->
`MirroredStrategy` over them; a CPU run on a GPU machine -> `MirroredStrategy`
over '/cpu:0'; otherwise the default strategy. The TPU initialiser and the
strategy constructor are injectable (tests, rehearsals).

Bounded multi-worker start-up (measured with TF 2.16.2): when a worker never
starts, the others block inside `MultiWorkerMirroredStrategy()` in the
coordination service's `WaitForAllTasks` barrier, whose deadline is hard-coded
to one hour. Neither `CommunicationOptions(timeout_seconds=...)` nor the
coordination service's `cluster_register_timeout_in_ms` (private API) shortens
it, and the call holds the GIL, so no Python thread or signal handler can
interrupt it. The bound that works is a watchdog outside the GIL:
`faulthandler.dump_traceback_later(..., exit=True)` prints every thread's
stack (naming `_exit_unless_all_workers_join`) and exits with status 1. After
start-up, `CommunicationOptions(timeout_seconds=...)` bounds every collective
op; TF's coordination service also aborts collectives when a peer's
heartbeats stop. TensorFlow catches SIGTERM in multi-worker processes
(preemption notifier), so supervisors must use SIGKILL to stop a hung worker.
"""

import faulthandler
import io
import logging
import sys
import time
from typing import Any, Callable, Optional, Tuple

from tfx_autostrategy.distribute import cluster as cluster_lib
from tfx_autostrategy.distribute import devices


# How long a remote TPU node (TPU_CONFIG, TPU_NAME) may take to become
# reachable: a Vertex AI TPU node or a freshly created Cloud TPU accepts
# connections minutes after the job's container starts.
DEFAULT_TPU_WAIT_SECONDS = 600.0
TPU_WAIT_INTERVAL_SECONDS = 15.0

# Generous because every worker's first step waits for the slowest worker's
# tracing and compilation, and for the chief's checkpoint writes.
DEFAULT_COLLECTIVE_TIMEOUT_SECONDS = 600.0

# TPU systems initialised in this process, keyed by resolver master ('' for a
# TPU VM's local chips). Initialising twice would wipe the TPU's memory.
_TPU_INITIALIZED = set()


class TPUUnreachableError(RuntimeError):
  """A TPU was named but did not become reachable within the wait."""


def _default_tpu_initializer(resolver: Any) -> Any:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # A no-op for a TPU VM's local chips (master '').
  tf.config.experimental_connect_to_cluster(resolver)
  return tf.tpu.experimental.initialize_tpu_system(resolver)


def _unreachable_errors() -> Tuple[type, ...]:
  """Errors that mean "the TPU is not reachable yet", worth waiting on."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
          ConnectionError)


def initialize_tpu(resolver: Any, *,
                   initializer: Optional[Callable[[Any], Any]] = None,
                   wait_seconds: float = DEFAULT_TPU_WAIT_SECONDS,
                   interval_seconds: float = TPU_WAIT_INTERVAL_SECONDS,
                   sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic,
                   retry_on: Optional[Tuple[type, ...]] = None) -> None:
  """Connects to and initialises the TPU system once per process.

  A remote TPU node (Vertex AI's TPU_CONFIG, a Cloud TPU named by TPU_NAME)
  often accepts connections only minutes after the job starts, so
  unreachable-TPU errors are retried every `interval_seconds` for up to
  `wait_seconds` (tensorflow/cloud waits the same way); a TPU VM's local chips
  (master '') are initialised at once. Initialising twice would wipe the
  TPU's memory, hence once per resolver master.

  Args:
    resolver: the TPU cluster resolver.
    initializer: connects and initialises; defaults to
      `experimental_connect_to_cluster` + `initialize_tpu_system`.
    wait_seconds: how long to keep retrying an unreachable TPU.
    interval_seconds: pause between attempts.
    sleep: injectable pause (tests).
    clock: injectable monotonic clock (tests).
    retry_on: exception types that mean "not reachable yet"; defaults to
      TensorFlow's Unavailable / DeadlineExceeded errors and ConnectionError.

  Raises:
    TPUUnreachableError: the TPU was still unreachable after `wait_seconds`;
      the message names the TPU, the attempts and the last error.
  """
  key = resolver.master()
  if key in _TPU_INITIALIZED:
    return
  initializer = initializer or _default_tpu_initializer
  retry_on = retry_on or _unreachable_errors()
  started = clock()
  attempts = 0
  while True:
    attempts += 1
    try:
      initializer(resolver)
      break
    except retry_on as error:
      waited = clock() - started
      if waited + interval_seconds > wait_seconds:
        raise TPUUnreachableError(
            f'TPU {key!r} did not become reachable: waited {waited:.0f} s '
            f'over {attempts} attempt(s) to connect to it and initialise the '
            f'TPU system (limit {wait_seconds:.0f} s); last error: '
            f'{type(error).__name__}: {error}. Check that the TPU node exists, '
            'is READY, and is in the job\'s network and zone.') from error
      logging.warning('TPU %r not reachable yet (%s: %s); retrying in %.0f s '
                      '(waited %.0f of %.0f s).', key, type(error).__name__,
                      error, interval_seconds, waited, wait_seconds)
      sleep(interval_seconds)
  _TPU_INITIALIZED.add(key)


def _default_strategy_factory(name: str, **kwargs) -> Any:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if name == 'default':
    return tf.distribute.get_strategy()
  return getattr(tf.distribute, name)(**kwargs)


def _exit_unless_all_workers_join(create: Callable[[], Any],
                                  timeout_seconds: float,
                                  info: devices.AcceleratorInfo) -> Any:
  """Calls `create`, exiting the process if it blocks past the timeout.

  TF 2.16 waits one hour (hard-coded) for missing workers inside the strategy
  constructor while holding the GIL; faulthandler's watchdog runs outside the
  GIL, dumps the stacks (this function's name among them) and exits with
  status 1.
  """
  peers = {job: list(addresses)
           for job, addresses in (info.cluster or {}).items()}
  logging.info(
      'Joining the %d-worker cluster %s as %s:%s; if any worker has not '
      'started within %.0f s this process exits with status 1 '
      '(faulthandler watchdog).', info.num_workers, peers, info.task_type,
      info.task_id, timeout_seconds)
  try:
    faulthandler.dump_traceback_later(timeout_seconds, exit=True,
                                      file=sys.stderr)
  except (AttributeError, ValueError, io.UnsupportedOperation) as error:
    # No usable stderr file descriptor (embedded interpreters): run unbounded
    # rather than refuse to train.
    logging.warning('Cannot bound the wait for workers (%s); TensorFlow waits '
                    'up to one hour for missing workers.', error)
    return create()
  try:
    return create()
  finally:
    faulthandler.cancel_dump_traceback_later()


def strategy_for(info: devices.AcceleratorInfo, *,
                 tpu_initializer: Optional[Callable[[Any], Any]] = None,
                 strategy_factory: Optional[Callable[..., Any]] = None,
                 collective_timeout_seconds: float = (
                     DEFAULT_COLLECTIVE_TIMEOUT_SECONDS),
                 tpu_wait_seconds: float = DEFAULT_TPU_WAIT_SECONDS) -> Any:
  """Builds the `tf.distribute.Strategy` for what `detect` found.

  Args:
    info: result of `detect`.
    tpu_initializer: called with the TPU resolver to connect to and
      initialise the TPU system; runs once per resolver master per process
      (`initialize_tpu`, which retries an unreachable TPU). Defaults to
      `experimental_connect_to_cluster` +
      `tf.tpu.experimental.initialize_tpu_system`.
    strategy_factory: called as `factory(name, **kwargs)` where name is a
      `tf.distribute` class name ('TPUStrategy', 'MultiWorkerMirroredStrategy',
      'MirroredStrategy') or 'default' (the default
      strategy), and kwargs are that class's constructor arguments.
    collective_timeout_seconds: multi-worker only: bounds both the wait for
      every worker to join (the process exits with status 1 past it) and each
      collective op afterwards (`CommunicationOptions.timeout_seconds`).
      0 leaves TensorFlow's own limits (one hour to join, none per op).
    tpu_wait_seconds: how long an unreachable TPU is waited for.

  Returns:
    The strategy.

  Raises:
    TPUUnreachableError: see `initialize_tpu`.
  """
  factory = strategy_factory or _default_strategy_factory
  if info.kind == 'tpu':
    initialize_tpu(info.tpu_resolver, initializer=tpu_initializer,
                   wait_seconds=tpu_wait_seconds)
    return factory('TPUStrategy', tpu_cluster_resolver=info.tpu_resolver)
  gpus = info.devices_of('GPU')
  if info.is_multi_worker:
    return _multi_worker_strategy(info, factory, len(gpus),
                                  collective_timeout_seconds)
  if info.kind == 'gpu':
    # MirroredStrategy even for one GPU: every callback the Trainer uses
    # supports it, while BackupAndRestore refuses OneDeviceStrategy.
    return factory('MirroredStrategy', devices=list(gpus))
  cpus = info.devices_of('CPU')
  if len(cpus) > 1:
    return factory('MirroredStrategy', devices=list(cpus))
  if gpus:
    # The default strategy would place ops on the GPU the caller declined.
    return factory('MirroredStrategy', devices=[cpus[0] if cpus else '/cpu:0'])
  return factory('default')


def _multi_worker_strategy(info: devices.AcceleratorInfo,
                           factory: Callable[..., Any],
                           num_gpus: int, timeout_seconds: float) -> Any:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cluster = {job: list(info.cluster[job]) for job in cluster_lib.TRAINING_JOBS
             if job in info.cluster}
  # Built from the parsed config rather than letting TF re-read TF_CONFIG, so
  # Vertex's CLUSTER_SPEC and an injected environment behave the same.
  resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec(cluster), task_type=info.task_type,
      task_id=info.task_id, num_accelerators={'GPU': num_gpus},
      rpc_layer='grpc')
  options = tf.distribute.experimental.CommunicationOptions(
      timeout_seconds=timeout_seconds or None)

  def create():
    return factory('MultiWorkerMirroredStrategy', cluster_resolver=resolver,
                   communication_options=options)

  if not timeout_seconds:
    return create()
  return _exit_unless_all_workers_join(create, timeout_seconds, info)
