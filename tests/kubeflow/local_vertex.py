"""A local stand-in for Vertex AI's JobServiceClient (test code).

`create_custom_job` takes the request the real client would send (parsed by
Vertex AI's own request type, so a field name the API does not know fails
here too) and runs every replica of its worker pools as a local process: the
pool's container `command` + `args` (the interpreter `python` becomes this
venv's), with the CLUSTER_SPEC and TF_CONFIG Vertex AI writes (workerpool0 is
the chief; `rehearse_cluster.cluster_environments` builds them, with free
localhost ports). `get_custom_job` reports the job as the service does:
JOB_STATE_PENDING when created, RUNNING while a replica runs, SUCCEEDED when
all exited 0, FAILED as soon as one exits non-zero (the others are stopped),
with `error.message` naming the replica, its exit status and its last stderr
line. `cancel_custom_job` stops the replicas (CANCELLED).

The Vertex Trainer step constructs its executor in its own process, so the
stand-in reaches it through vertex_executor's test hook:
AUTOSTRATEGY_VERTEX_JOB_SERVICE=local_vertex:job_service (with this
directory on PYTHONPATH) and LOCAL_VERTEX_JOBS_DIR naming where each job's
replica logs go (`<dir>/job-N/workerpoolP-R.stdout|.stderr`, next to the
parsed request, `custom_job.json`).
"""

import os
import subprocess
import sys
from typing import Any, Dict, List

from google.cloud.aiplatform_v1.types import custom_job as custom_job_pb
from google.cloud.aiplatform_v1.types import job_service as job_service_pb
from google.cloud.aiplatform_v1.types import job_state
from google.rpc import status_pb2

from tfx_autostrategy.cli import rehearse_cluster
from tfx_autostrategy import tf_env

HOOK = 'local_vertex:job_service'
JOBS_DIR_ENV = 'LOCAL_VERTEX_JOBS_DIR'
State = job_state.JobState


class LocalJobService:
  """JobServiceClient-compatible: create, get and cancel custom jobs."""

  # Read by vertex_executor: no API quota to spare here, so poll often.
  poll_interval_seconds = 1.0

  def __init__(self, jobs_dir: str):
    self.jobs_dir = jobs_dir
    self._jobs: Dict[str, Dict[str, Any]] = {}

  def create_custom_job(self, parent: str, custom_job: Any
                       ) -> custom_job_pb.CustomJob:
    request = job_service_pb.CreateCustomJobRequest(parent=parent,
                                                    custom_job=custom_job)
    spec = request.custom_job.job_spec
    replicas = []
    for index, pool in enumerate(spec.worker_pool_specs):
      replicas += [(f'workerpool{index}-{r}', pool.container_spec)
                   for r in range(pool.replica_count)]
    pools = [pool.replica_count for pool in spec.worker_pool_specs]
    if pools[:1] != [1] or len(pools) > 2:
      raise ValueError(f'replica counts {pools}: the stand-in runs a chief '
                       '(workerpool0, 1 replica) and optional workers')
    number = len(os.listdir(self.jobs_dir)) + 1 if os.path.isdir(
        self.jobs_dir) else 1
    name = f'{parent}/customJobs/{number}'
    job_dir = os.path.join(self.jobs_dir, f'job-{number}')
    os.makedirs(job_dir)
    # What Vertex AI would have received, for the tests to read.
    with open(os.path.join(job_dir, 'custom_job.json'), 'w') as f:
      f.write(custom_job_pb.CustomJob.to_json(request.custom_job,
                                             use_integers_for_enums=False))
    processes = []
    for (replica, container), cluster_env in zip(
        replicas, rehearse_cluster.cluster_environments(len(replicas))):
      argv = list(container.command) + list(container.args)
      if argv[0] == 'python':
        argv[0] = sys.executable
      log = os.path.join(job_dir, replica)
      with open(log + '.stdout', 'w') as out, open(log + '.stderr',
                                                     'w') as err:
        processes.append((replica, log + '.stderr', subprocess.Popen(
            argv, stdout=out, stderr=err,
            env=tf_env.subprocess_env(**cluster_env))))
    self._jobs[name] = {'processes': processes, 'state': State.JOB_STATE_PENDING,
                        'error': None, 'display_name':
                        request.custom_job.display_name}
    return self._response(name)

  def get_custom_job(self, name: str, retry: Any = None
                    ) -> custom_job_pb.CustomJob:
    del retry
    job = self._jobs[name]
    if job['state'] in (State.JOB_STATE_PENDING, State.JOB_STATE_RUNNING):
      job['state'] = State.JOB_STATE_RUNNING
      codes = [(replica, stderr, process.poll())
               for replica, stderr, process in job['processes']]
      failed = [c for c in codes if c[2]]
      if failed:
        replica, stderr, code = failed[0]
        self._stop(job)
        job['state'] = State.JOB_STATE_FAILED
        job['error'] = status_pb2.Status(code=3, message=(
            f'The replica {replica} exited with a non-zero status of {code}. '
            f'Last error log: {_last_line(stderr)}'))
      elif all(c[2] == 0 for c in codes):
        job['state'] = State.JOB_STATE_SUCCEEDED
    return self._response(name)

  def cancel_custom_job(self, name: str) -> None:
    job = self._jobs[name]
    self._stop(job)
    job['state'] = State.JOB_STATE_CANCELLED

  def replica_logs(self, name: str) -> List[str]:
    return [stderr for _, stderr, _ in self._jobs[name]['processes']]

  @staticmethod
  def _stop(job) -> None:
    for _, _, process in job['processes']:
      if process.poll() is None:
        process.kill()
        process.wait()

  def _response(self, name: str) -> custom_job_pb.CustomJob:
    job = self._jobs[name]
    return custom_job_pb.CustomJob(name=name, display_name=job['display_name'],
                                   state=job['state'], error=job['error'])


def _last_line(path: str) -> str:
  with open(path, errors='replace') as f:
    lines = [line.strip() for line in f if line.strip()]
  return lines[-1] if lines else '(no stderr)'


def job_service(vertex_region: str) -> LocalJobService:
  """The hook's factory: one stand-in per Trainer step process."""
  del vertex_region
  return LocalJobService(os.environ[JOBS_DIR_ENV])
