"""The files `autostrategy compile` writes, executed step by step.

Each case compiles through the real CLI (in this process), then
kfp_local_harness runs the file as the KFP v2 launcher would: every task
through its own container command, in its own process, on local disk
standing in for the bucket. The Vertex AI Trainer step submits its custom
job to local_vertex's stand-in job service, which runs the worker pools as
processes with the CLUSTER_SPEC/TF_CONFIG Vertex AI writes.

Cases are data: the data set (rows, seed, renamed columns) and the extra
compile flags are parameters (`Case`), so a new column layout or option is
one more entry.
"""

import csv
import dataclasses
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Tuple

import pytest

from conftest import assert_serves_raw_text
import kfp_local_harness as harness
import local_vertex
from test_vertex_executor import container_exec_properties

from tfx_autostrategy import cli
from tfx_autostrategy.components.trainer import vertex_executor
from tfx_autostrategy.pipeline import pipeline as pipeline_lib

HERE = os.path.dirname(os.path.abspath(__file__))
BUCKET = 'gs://autostrategy-test/'
IMAGE = 'us-docker.pkg.dev/proj/repo/autostrategy:test'
# Small and quick: two epochs of a few hundred rows learn the synthetic
# data past the default AUC threshold (0.6); one epoch only just did.
# The data is under BUCKET only for the harness, so compile cannot read it
# to pick auto lengths.
TRAINING_FLAGS = ('--epochs', '2', '--per-replica-batch-size', '16',
                  '--sequence-length', '64', '--char-ngram-length', '512')
VERTEX_FLAGS = ('--project', 'proj', '--region', 'europe-west4')
RESOLVERS = (f'{pipeline_lib.BASELINE_RESOLVER}-model-blessing-resolver',
             f'{pipeline_lib.BASELINE_RESOLVER}-model-resolver')


@dataclasses.dataclass(frozen=True)
class Case:
  """One compiled pipeline to execute.

  Attributes:
    target: `--target`.
    flags: further compile flags.
    rows: rows of the synthetic data set.
    seed: its seed.
    rename: CSV header renames, (old, new) pairs; pass the matching
      `--text-column`... in `flags` and `text_column`.
    text_column: the raw text feature the served model takes.
    scheduling: the `jobSpec.scheduling` the Vertex AI job must carry, as
      (key, value) pairs of the API's JSON (() = not checked).
  """
  target: str
  flags: Tuple[str, ...] = ()
  rows: int = 600
  seed: int = 17
  rename: Tuple[Tuple[str, str], ...] = ()
  text_column: str = 'comment_text'
  scheduling: Tuple[Tuple[str, object], ...] = ()

  @property
  def output_name(self) -> str:
    # The KFP package for Kubeflow, the PipelineJob for Vertex AI.
    return 'pipeline.yaml' if self.target == 'kubeflow' else 'pipeline.json'


KUBEFLOW = Case('kubeflow')
VERTEX_TWO_WORKERS = Case('vertex', VERTEX_FLAGS + (
    '--machine', 'cpu', '--workers', '2'), seed=23)
# The same, on data whose columns all have other names (and scheduling
# options, which the stand-in's request parsing must accept).
VERTEX_RENAMED = dataclasses.replace(
    VERTEX_TWO_WORKERS,
    flags=VERTEX_TWO_WORKERS.flags + (
        '--text-column', 'body', '--label-column', 'is_bad',
        '--id-column', 'row_id', '--slice-column', 'language',
        '--spot', '--restart-on-worker-restart', '--job-timeout', '2h'),
    rename=(('comment_text', 'body'), ('toxic', 'is_bad'), ('id', 'row_id'),
            ('lang', 'language')),
    text_column='body',
    scheduling=(('strategy', 'SPOT'), ('restartJobOnWorkerRestart', True),
                ('timeout', '7200s')))


def write_data(case: Case, directory: str) -> None:
  """The case's CSV data set in `directory`."""
  subprocess.run([sys.executable, '-m', 'tfx_autostrategy.sample_data',
                  '--rows', str(case.rows), '--seed', str(case.seed),
                  '--output', directory], check=True, capture_output=True)
  if case.rename:
    renames = dict(case.rename)
    for path in glob.glob(os.path.join(directory, '**', '*.csv'),
                          recursive=True):
      with open(path, newline='', encoding='utf-8') as f:
        rows = list(csv.reader(f))
      rows[0] = [renames.get(column, column) for column in rows[0]]
      with open(path, 'w', newline='', encoding='utf-8') as f:
        csv.writer(f).writerows(rows)


def compile_case(case: Case, directory: str) -> str:
  """Compiles `case` with the real `autostrategy compile`; the file's path."""
  output = os.path.join(directory, case.output_name)
  assert cli.main([
      'compile', '--target', case.target, '--output', output,
      '--pipeline-root', BUCKET + 'root', '--data', BUCKET + 'data',
      '--image', IMAGE, *TRAINING_FLAGS, *case.flags]) == 0
  return output


@dataclasses.dataclass
class Prepared:
  pipeline_file: str
  bucket: str  # the local directory standing in for BUCKET
  root: str  # the harness's local root


def prepare(case: Case, directory) -> Prepared:
  bucket = os.path.join(directory, 'bucket')
  write_data(case, os.path.join(bucket, 'data'))
  return Prepared(compile_case(case, str(directory)), bucket,
                  os.path.join(directory, 'harness'))


def harness_run(prepared: Prepared, env=None, mode='vertex',
                directory_markers=True) -> harness.LocalPipelineRun:
  return harness.LocalPipelineRun(prepared.pipeline_file, prepared.root,
                                  {BUCKET: prepared.bucket + '/'}, env=env,
                                  mode=mode,
                                  directory_markers=directory_markers)


def vertex_hook_env(jobs_dir: str):
  """The Trainer step's environment that sends its job to local_vertex."""
  return {vertex_executor.JOB_SERVICE_ENV: local_vertex.HOOK,
          local_vertex.JOBS_DIR_ENV: jobs_dir,
          'PYTHONPATH': HERE}


def check_pushed_and_serving(result: harness.RunResult, prepared: Prepared,
                             case: Case) -> str:
  """Asserts the Pusher pushed under the (local) bucket and the model serves."""
  pushed = result.artifact(pipeline_lib.PUSHER, 'pushed_model')['metadata']
  assert pushed['pushed'] == 1.0, pushed
  # KFP mode keeps what the launcher records: remote URIs.
  destination = harness.map_prefixes(json.dumps(pushed['pushed_destination']),
                                     {BUCKET: prepared.bucket + '/'})[1:-1]
  assert destination.startswith(
      os.path.join(prepared.bucket, 'root', 'serving_model') + '/')
  blessing = result.artifact(pipeline_lib.EVALUATOR, 'blessing')['metadata']
  assert blessing['blessed'] == 1.0
  assert_serves_raw_text(destination, case.text_column)
  return destination


@pytest.fixture(scope='module')
def kubeflow_prepared(tmp_path_factory):
  return prepare(KUBEFLOW, tmp_path_factory.mktemp('kubeflow'))


@pytest.mark.e2e
@pytest.mark.slow
def test_kubeflow_pipeline_runs_on_open_source_kfp_to_a_served_model(
    kubeflow_prepared, tmp_path):
  """The kubeflow file under the KFP backend's contract (kfp_backend).

  (Until issue 33 this file ran in the harness's Vertex mode, which types
  artifacts as Vertex AI does; the kubeflow target is for open-source KFP, so
  it runs in KFP mode only. The Vertex mode runs the vertex file below.)
  """
  shutil.copytree(kubeflow_prepared.bucket, tmp_path / 'bucket')
  prepared = Prepared(kubeflow_prepared.pipeline_file,
                      str(tmp_path / 'bucket'), str(tmp_path / 'harness'))
  run = harness_run(prepared, mode='kfp')
  result = run.run()
  # Every task ran, in an order where producers come first.
  assert list(result.outputs) == harness.task_order(
      run.spec['root']['dag']['tasks'])
  assert len(result.outputs) == len(pipeline_lib.COMPONENT_IDS) + 1
  # A first run: the resolvers find no baseline.
  assert [result.outputs[r] for r in RESOLVERS] == [{'model_blessing': []},
                                                    {'model': []}]
  check_pushed_and_serving(result, prepared, KUBEFLOW)
  # (What a second run's resolvers select is checked on the vertex file
  # below, in the Vertex mode: how the open-source backend evaluates the
  # compiled resolver queries was not checked, kubeflow/README.md.)
  # Every step ran through our entrypoint, and each artifact's files reached
  # the bucket through the launcher's upload: no directory marker is left
  # for a downstream download to trip on.
  executors = run.spec['deploymentSpec']['executors']
  commands = {e['container']['command'][2] for e in executors.values()
              if 'container' in e}
  assert commands == {'tfx_autostrategy.kubeflow.kfp_entrypoint'}
  model = result.artifact(pipeline_lib.TRAINER, 'model')
  assert model['uri'] == (f'{BUCKET}root/{result.run_id}/'
                          f'{pipeline_lib.TRAINER}/model')
  [bucket] = run.buckets
  assert 'Format-Serving/saved_model.pb' in bucket.objects(model['uri'])
  assert [k for k in bucket.objects(model['uri'])
          if k == '' or k.endswith('/')] == []
  # Inputs reached the steps as the driver passes them: read back from
  # MLMD, named by their MLMD ids, with an empty type schema.
  examples = run.mlmd.runtime_artifact(1)
  assert (examples['name'], examples['type']) == ('1', {'instanceSchema': ''})
  assert examples['metadata']['display_name'] == 'examples'


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize('case', [
    pytest.param(VERTEX_RENAMED, id='cpu-x2-renamed-columns'),
])
def test_vertex_pipeline_trains_on_two_worker_processes_and_serves(
    case, tmp_path):
  prepared = prepare(case, tmp_path)
  jobs = str(tmp_path / 'jobs')
  run = harness_run(prepared, env=vertex_hook_env(jobs))
  result = run.run()
  # A first run: the resolvers find no baseline.
  assert [result.outputs[r] for r in RESOLVERS] == [{'model_blessing': []},
                                                    {'model': []}]
  check_pushed_and_serving(result, prepared, case)

  # What a second run on this root would get from its resolvers: this run's
  # blessed model, through the compiled queries.
  executors = run.spec['deploymentSpec']['executors']
  store = run._store()  # pylint: disable=protected-access
  queries = [executors[f'{r}_executor']['resolver']['outputArtifactQueries']
             for r in RESOLVERS]
  [blessing] = harness.resolve(queries[0]['model_blessing']['filter'], {},
                               store)
  [baseline] = harness.resolve(queries[1]['model']['filter'],
                               {'input': [blessing]}, store)
  assert baseline == result.artifact(pipeline_lib.TRAINER, 'model')

  # One custom job, a chief and a worker that trained together.
  [job] = os.listdir(jobs)
  with open(os.path.join(jobs, job, 'custom_job.json')) as f:
    submitted = json.load(f)['jobSpec']
  assert [pool['replicaCount'] for pool in submitted['workerPoolSpecs']
         ] == ['1', '1']  # int64: a JSON string
  expected = dict(case.scheduling)
  assert {k: submitted['scheduling'][k] for k in expected} == expected
  plans = {}
  for replica in ('workerpool0-0', 'workerpool1-0'):
    with open(os.path.join(jobs, job, f'{replica}.stderr')) as f:
      [plan] = re.findall(r'autostrategy: (\{.*"strategy".*\})$', f.read(),
                          re.MULTILINE)
    plans[replica] = json.loads(plan)
  assert {r: (p['strategy'], p['num_workers'], p['is_chief'])
          for r, p in plans.items()} == {
              'workerpool0-0': ('MultiWorkerMirroredStrategy', 2, True),
              'workerpool1-0': ('MultiWorkerMirroredStrategy', 2, False)}
  assert plans['workerpool0-0']['global_batch_size'] == 2 * 16
  # Exactly one serving export: the chief's, in the Trainer's model.
  model = result.artifact(pipeline_lib.TRAINER, 'model')['uri']
  trainer_dir = os.path.dirname(model)
  exports = glob.glob(os.path.join(trainer_dir, '**', 'saved_model.pb'),
                      recursive=True)
  assert exports == [os.path.join(model, 'Format-Serving', 'saved_model.pb')]


@pytest.mark.slow
def test_a_broken_step_fails_naming_the_task(kubeflow_prepared, tmp_path):
  with open(kubeflow_prepared.pipeline_file) as f:
    text = f.read()
  broken_path = str(tmp_path / 'broken.yaml')
  right = 'tfx.components.example_gen.csv_example_gen.executor.Executor'
  assert text.count(right) == 1
  with open(broken_path, 'w') as f:
    f.write(text.replace(right, right.replace('csv_example_gen',
                                              'csv_exmaple_gen')))
  shutil.copytree(kubeflow_prepared.bucket, tmp_path / 'bucket')
  broken = Prepared(broken_path, str(tmp_path / 'bucket'),
                    str(tmp_path / 'harness'))
  with pytest.raises(harness.StepFailed) as failure:
    harness_run(broken).run()
  print(failure.value)  # the report quotes it
  assert failure.value.task == 'CsvExampleGen'
  assert failure.value.returncode == 1
  assert str(failure.value).startswith(
      'task CsvExampleGen failed: executor exit code 1; last lines of its '
      'stderr:\n')
  assert failure.value.stderr_tail.endswith(
      '\nImportError: Could not import '
      'tfx.components.example_gen.csv_exmaple_gen.executor.Executor')


@pytest.mark.slow
def test_a_failing_worker_fails_the_step_with_the_jobs_error(tmp_path):
  with open(compile_case(VERTEX_TWO_WORKERS, str(tmp_path))) as f:
    job = json.load(f)
  # A setting the remote executor refuses: both replicas exit 1 at start.
  properties = container_exec_properties(job)
  settings = dict(json.loads(properties['trainer_settings']),
                  model='no-such-model')
  properties['trainer_settings'] = json.dumps(settings)
  inputs = {key: [harness_artifact(cls, tmp_path / key)] for key, cls in (
      ('examples', 'Examples'), ('transform_graph', 'TransformGraph'),
      ('schema', 'Schema'), ('statistics', 'ExampleStatistics'))}
  outputs = {key: [harness_artifact(cls, tmp_path / key)] for key, cls in (
      ('model', 'Model'), ('model_run', 'ModelRun'))}
  service = local_vertex.LocalJobService(str(tmp_path / 'jobs'))
  with pytest.raises(RuntimeError, match=(
      r'customJobs/1 did not succeed \(JOB_STATE_FAILED\): The replica '
      r'workerpool[01]-0 exited with a non-zero status of 1\. Last error log: '
      r"ValueError: model must be one of .* got 'no-such-model'$")):
    vertex_executor.Executor(
        job_service=service,
        poll_interval_seconds=service.poll_interval_seconds).Do(
            inputs, outputs, properties)
  # Both pools ran (chief and worker).
  assert sorted(os.listdir(tmp_path / 'jobs' / 'job-1')) == [
      'custom_job.json', 'workerpool0-0.stderr', 'workerpool0-0.stdout',
      'workerpool1-0.stderr', 'workerpool1-0.stdout']
  job_name = 'projects/proj/locations/europe-west4/customJobs/1'
  assert service.get_custom_job(job_name).state == (
      local_vertex.State.JOB_STATE_FAILED)


def harness_artifact(type_name, path):
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  artifact = getattr(standard_artifacts, type_name)()
  artifact.uri = str(path)
  return artifact
