"""Runs AutoStrategyTrainer's executor remotely, as a Vertex AI custom job.

The pipeline step that uses this executor only submits and watches the job.
TFX's Vertex training extension does the work: its `GenericExecutor` hook
`_GetExecutorClass` names the executor the job runs (ours), and its
`VertexJobClient` builds the CustomJob whose containers run
`python -m tfx.scripts.run_executor` with the step's inputs, outputs and
every execution property serialized on the command line, so the remote
executor sees the same parameters (batch size, epochs, text settings...) as a
local one.

Submitting and waiting is `run_custom_job` here, not the extension's
`runner.start_cloud_training` / `_launch_cloud_training`. Both were weighed
with the local stand-in of the job service (tests/kubeflow/local_vertex.py)
that now runs the job's worker pools as processes; TFX's loop stays unused
because (1) it builds its own client (`training_clients.get_job_client`), so
no job service can be injected short of patching TFX's module; (2) it polls
every 30 s, a module constant, whatever the job; (3) it has no bound at all:
it polls until the job reaches a final state, so a job that never gets there
(stuck PENDING for quota, a lost worker holding the others) keeps the step
"running" for ever, the hang its users reported (tensorflow/tfx#4419,
#6630). `run_custom_job` waits at most the job's own timeout
(`job_spec.scheduling.timeout`, Vertex AI's default of 7 days when unset)
after it starts running, plus a grace period, and at most
`_PENDING_LIMIT_SECONDS` before that; past either it cancels the job and
fails the step. A failed job fails the step with the job's `error` message
(Vertex AI names the replica and its exit status there).

The job service is injectable: tests pass one to `Executor`, and a pipeline
step (whose executor TFX's container entrypoint constructs itself) takes it
from the test hook JOB_SERVICE_ENV. Production sets neither and gets
aiplatform's JobServiceClient for the region.
"""

import copy
import importlib
import os
import re
import time
from typing import Any, Dict, List, Optional

import absl.logging
from google.cloud.aiplatform_v1.types import job_state
from tfx import types
from tfx.extensions.google_cloud_ai_platform import constants
from tfx.extensions.google_cloud_ai_platform import training_clients
from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_trainer_executor
from tfx.types import standard_component_specs as std
from tfx.utils import json_utils
from tfx.utils import name_utils

from tfx_autostrategy.components.trainer import executor


# Consecutive connection failures tolerated while polling (as TFX does).
_CONNECTION_RETRIES = 5
# Vertex AI stops a job after `scheduling.timeout`, by default 7 days.
_DEFAULT_JOB_TIMEOUT_SECONDS = 7 * 24 * 3600
# Time for Vertex AI to mark a job that hit its timeout as ended.
_END_GRACE_SECONDS = 600
# A job waiting this long for its machines (quota, stock-outs) is given up.
_PENDING_LIMIT_SECONDS = 24 * 3600
# Test hook: `module:factory`; factory(vertex_region=...) returns a
# JobServiceClient-compatible object used instead of the real client. An
# optional `poll_interval_seconds` attribute of that object sets the time
# between state checks. Unset in production.
JOB_SERVICE_ENV = 'AUTOSTRATEGY_VERTEX_JOB_SERVICE'


def job_service_from_env(vertex_region: str) -> Any:
  """The job service JOB_SERVICE_ENV names (a test hook), None when unset.

  Raises:
    ValueError: the variable is not `module:factory`.
  """
  spec = os.environ.get(JOB_SERVICE_ENV, '')
  if not spec:
    return None
  module, _, factory = spec.partition(':')
  if not module or not factory:
    raise ValueError(f'{JOB_SERVICE_ENV}={spec!r}: expected module:factory')
  absl.logging.warning('%s=%s: the Trainer job goes to this job service, not '
                       'to Vertex AI.', JOB_SERVICE_ENV, spec)
  return getattr(importlib.import_module(module), factory)(
      vertex_region=vertex_region)


def job_timeout_seconds(custom_job: Dict[str, Any]) -> float:
  """The job's `scheduling.timeout` in seconds (Vertex AI's default if unset).

  Accepts the API's JSON form ('3600s') and `{'seconds': 3600}`.
  """
  timeout = (custom_job.get('job_spec') or {}).get('scheduling', {}).get(
      'timeout')
  if not timeout:
    return _DEFAULT_JOB_TIMEOUT_SECONDS
  if isinstance(timeout, dict):
    return float(timeout.get('seconds', 0)) + timeout.get('nanos', 0) / 1e9
  found = re.fullmatch(r'(\d+(?:\.\d+)?)s', str(timeout))
  if not found:
    raise ValueError(f'job_spec.scheduling.timeout {timeout!r}: expected '
                     'a duration such as "3600s"')
  return float(found[1])


class VertexJobClient(training_clients.VertexJobClient):
  """TFX's Vertex AI job client, with an injectable JobServiceClient."""

  def __init__(self, vertex_region: str, job_service: Any = None):
    """Creates the client.

    Args:
      vertex_region: Vertex AI region, e.g. 'us-central1'.
      job_service: object with `create_custom_job(parent=, custom_job=)` and
        `get_custom_job(name=, retry=)` like
        `google.cloud.aiplatform.gapic.JobServiceClient`; None creates the
        real one for the region.
    """
    self._job_service = job_service
    super().__init__(vertex_region)

  def create_client(self) -> None:
    if self._job_service is None:
      super().create_client()
    else:
      self._client = self._job_service


def run_custom_job(client: training_clients.VertexJobClient, project: str,
                   custom_job: Dict[str, Any],
                   poll_interval_seconds: float = 30,
                   clock=time.monotonic, sleep=time.sleep) -> str:
  """Submits `custom_job` and waits, bounded, until it ends.

  Args:
    client: the job client (real or with an injected job service).
    project: Google Cloud project of the job.
    custom_job: the CustomJob, as built by `client.create_training_job`.
    poll_interval_seconds: time between state checks.
    clock: seconds, monotonic (tests pass a fake).
    sleep: waits (tests pass a fake).

  Returns:
    The job's resource name.

  Raises:
    RuntimeError: the job failed or was cancelled; the message has the job's
      error.
    TimeoutError: the job ran past its timeout plus `_END_GRACE_SECONDS`, or
      stayed pending past `_PENDING_LIMIT_SECONDS`; it was cancelled.
    ConnectionError: polling failed more than `_CONNECTION_RETRIES` times in
      a row.
  """
  timeout = job_timeout_seconds(custom_job)
  client.launch_job(project, custom_job)
  submitted = clock()
  running_since = None
  response = client.get_job()
  failures = 0
  while client.get_job_state(response) not in client.JOB_STATES_COMPLETED:
    now = clock()
    if (running_since is None and
        client.get_job_state(response) == job_state.JobState.JOB_STATE_RUNNING):
      running_since = now
    if running_since is None:
      limit, what = submitted + _PENDING_LIMIT_SECONDS, (
          f'did not start within {_PENDING_LIMIT_SECONDS} s')
    else:
      limit, what = running_since + timeout + _END_GRACE_SECONDS, (
          f'still runs {timeout:.0f} s (its timeout) + {_END_GRACE_SECONDS} s '
          'after it started')
    if now >= limit:
      _cancel(client)
      raise TimeoutError(
          f'Vertex AI job {client.get_job_name()} {what}; cancelled it')
    sleep(poll_interval_seconds)
    try:
      response = client.get_job()
      failures = 0
    except ConnectionError as error:
      # A long poll outlives connections; a fresh client usually recovers.
      failures += 1
      if failures > _CONNECTION_RETRIES:
        raise
      absl.logging.warning('Polling %s failed (%s); reconnecting.',
                           client.get_job_name(), error)
      client.create_client()
  state = client.get_job_state(response)
  if state in client.JOB_STATES_FAILED:
    error = getattr(response, 'error', None)
    message = getattr(error, 'message', '') or '(no error message)'
    raise RuntimeError(
        f'Vertex AI job {client.get_job_name()} did not succeed '
        f'({getattr(state, "name", state)}): {message}')
  absl.logging.info('Vertex AI job %s succeeded.', client.get_job_name())
  return client.get_job_name()


def _cancel(client: training_clients.VertexJobClient) -> None:
  try:
    client._client.cancel_custom_job(name=client.get_job_name())  # pylint: disable=protected-access
  except Exception as error:  # pylint: disable=broad-except
    # The step fails anyway; the job ends at its own timeout.
    absl.logging.error('Cancelling %s failed: %s', client.get_job_name(),
                       error)


class Executor(vertex_trainer_executor.GenericExecutor):
  """Trains with AutoStrategyTrainer's executor inside a Vertex AI custom job.

  `custom_config` must hold TFX's ENABLE_VERTEX_KEY (true), VERTEX_REGION_KEY
  and TRAINING_ARGS_KEY: `{'project': ..., 'display_name': ..., 'job_spec':
  {'worker_pool_specs': [...]}}`.
  """

  def __init__(self, context: Optional[Any] = None, *,
               job_service: Any = None, poll_interval_seconds: float = 30):
    """Creates the executor.

    Args:
      context: TFX executor context.
      job_service: Vertex AI JobServiceClient to use (tests inject a fake);
        None takes the one JOB_SERVICE_ENV names (a test hook), else creates
        the real one for the configured region.
      poll_interval_seconds: time between job state checks.
    """
    super().__init__(context)
    self._job_service = job_service
    self._poll_interval_seconds = poll_interval_seconds

  def _GetExecutorClass(self):
    return executor.Executor

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    self._log_startup(input_dict, output_dict, exec_properties)
    custom_config = json_utils.loads(
        exec_properties.get(std.CUSTOM_CONFIG_KEY) or 'null') or {}
    if not custom_config.get(constants.ENABLE_VERTEX_KEY):
      raise ValueError(
          f'custom_config[{constants.ENABLE_VERTEX_KEY!r}] must be true: this '
          'executor '
          'only runs Vertex AI custom jobs')
    region = custom_config.get(constants.VERTEX_REGION_KEY)
    if not region:
      raise ValueError(
          f'custom_config[{constants.VERTEX_REGION_KEY!r}] is missing')
    if not custom_config.get(vertex_trainer_executor.TRAINING_ARGS_KEY):
      raise ValueError(
          f'custom_config[{vertex_trainer_executor.TRAINING_ARGS_KEY!r}] is '
          'missing')
    # The TFX client fills the worker pools in place; the parsed
    # exec_properties must stay as they were.
    job_args = copy.deepcopy(
        custom_config[vertex_trainer_executor.TRAINING_ARGS_KEY])
    project = job_args.pop('project', None)
    if not project:
      raise ValueError(
          f'custom_config[{vertex_trainer_executor.TRAINING_ARGS_KEY!r}]'
          "['project'] is missing")

    job_service, poll_interval = self._job_service, self._poll_interval_seconds
    if job_service is None:
      job_service = job_service_from_env(region)
      poll_interval = getattr(job_service, 'poll_interval_seconds',
                              poll_interval)
    client = VertexJobClient(region, job_service=job_service)
    custom_job = client.create_training_job(
        input_dict, output_dict, exec_properties,
        name_utils.get_full_name(self._GetExecutorClass()), job_args,
        custom_config.get(vertex_trainer_executor.JOB_ID_KEY), None)
    run_custom_job(client, project, custom_job, poll_interval)
