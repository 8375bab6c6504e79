"""Runs AutoStrategyTrainer's executor remotely, as a Vertex AI custom job.

The pipeline step that uses this executor only submits and watches the job.
TFX's Vertex training extension does the work: its `GenericExecutor` hook
`_GetExecutorClass` names the executor the job runs (ours), and its
`VertexJobClient` builds the CustomJob whose containers run
`python -m tfx.scripts.run_executor` with the step's inputs, outputs and
every execution property serialized on the command line, so the remote
executor sees the same parameters (batch size, epochs, text settings...) as a
local one.

Only the submission differs from the extension's `runner.start_cloud_training`:
that function builds its own Vertex AI client, so here the client is
injectable, and tests see the exact request without calling Vertex AI.
"""

import copy
import time
from typing import Any, Dict, List, Optional

import absl.logging
from tfx import types
from tfx.extensions.google_cloud_ai_platform import constants
from tfx.extensions.google_cloud_ai_platform import training_clients
from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_trainer_executor
from tfx.types import standard_component_specs as std
from tfx.utils import json_utils
from tfx.utils import name_utils

from tfx_autostrategy.components.trainer import executor

# custom_config keys the Trainer reads here (set by the Kubeflow compiler).
ENABLE_VERTEX_KEY = constants.ENABLE_VERTEX_KEY
VERTEX_REGION_KEY = constants.VERTEX_REGION_KEY
TRAINING_ARGS_KEY = vertex_trainer_executor.TRAINING_ARGS_KEY
JOB_ID_KEY = vertex_trainer_executor.JOB_ID_KEY

# Consecutive connection failures tolerated while polling (as TFX does).
_CONNECTION_RETRIES = 5


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
                   poll_interval_seconds: float = 30) -> str:
  """Submits `custom_job` and waits until it ends.

  Args:
    client: the job client (real or with an injected job service).
    project: Google Cloud project of the job.
    custom_job: the CustomJob, as built by `client.create_training_job`.
    poll_interval_seconds: time between state checks.

  Returns:
    The job's resource name.

  Raises:
    RuntimeError: the job failed or was cancelled.
    ConnectionError: polling failed more than `_CONNECTION_RETRIES` times in
      a row.
  """
  client.launch_job(project, custom_job)
  response = client.get_job()
  failures = 0
  while client.get_job_state(response) not in client.JOB_STATES_COMPLETED:
    time.sleep(poll_interval_seconds)
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
  if client.get_job_state(response) in client.JOB_STATES_FAILED:
    raise RuntimeError(
        f'Vertex AI job {client.get_job_name()} did not succeed: {response}')
  absl.logging.info('Vertex AI job %s succeeded.', client.get_job_name())
  return client.get_job_name()


class Executor(vertex_trainer_executor.GenericExecutor):
  """Trains with AutoStrategyTrainer's executor inside a Vertex AI custom job.

  `custom_config` must hold ENABLE_VERTEX_KEY (true), VERTEX_REGION_KEY and
  TRAINING_ARGS_KEY: `{'project': ..., 'display_name': ..., 'job_spec':
  {'worker_pool_specs': [...]}}`.
  """

  def __init__(self, context: Optional[Any] = None, *,
               job_service: Any = None, poll_interval_seconds: float = 30):
    """Creates the executor.

    Args:
      context: TFX executor context.
      job_service: Vertex AI JobServiceClient to use (tests inject a fake);
        None creates the real one for the configured region.
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
    if not custom_config.get(ENABLE_VERTEX_KEY):
      raise ValueError(
          f'custom_config[{ENABLE_VERTEX_KEY!r}] must be true: this executor '
          'only runs Vertex AI custom jobs')
    region = custom_config.get(VERTEX_REGION_KEY)
    if not region:
      raise ValueError(f'custom_config[{VERTEX_REGION_KEY!r}] is missing')
    if not custom_config.get(TRAINING_ARGS_KEY):
      raise ValueError(f'custom_config[{TRAINING_ARGS_KEY!r}] is missing')
    # The TFX client fills the worker pools in place; the parsed
    # exec_properties must stay as they were.
    job_args = copy.deepcopy(custom_config[TRAINING_ARGS_KEY])
    project = job_args.pop('project', None)
    if not project:
      raise ValueError(
          f"custom_config[{TRAINING_ARGS_KEY!r}]['project'] is missing")

    client = VertexJobClient(region, job_service=self._job_service)
    custom_job = client.create_training_job(
        input_dict, output_dict, exec_properties,
        name_utils.get_full_name(self._GetExecutorClass()), job_args,
        custom_config.get(JOB_ID_KEY), None)
    run_custom_job(client, project, custom_job, self._poll_interval_seconds)
