"""Executes a compiled KFP v2 pipeline file on local disk, as the launcher does.

Test code, not an orchestrator: it exists so that `make test` runs the file
`autostrategy compile` writes, step by step, before a cluster ever sees it.
What it does is what the KFP v2 launcher / Vertex AI Pipelines backend does
with each task of the PipelineSpec:

- tasks in dependency order (`dependentTasks` and the producers of input
  artifacts), ties by name;
- a container task runs its OWN `command` + `args` from the deployment spec
  (only the interpreter `python` becomes this venv's), in its own process,
  with `{{$}}` replaced by an ExecutorInput JSON: input artifacts are the
  producers' outputs WITH the metadata their executor output file wrote,
  parameters are the spec's constants, output URIs lie under the pipeline
  root, `outputs.outputFile` next to them; a `lifecycle.preCacheCheck` hook
  (ExampleGen's driver) runs first with the same ExecutorInput, as Vertex AI
  does;
- a resolver task evaluates its `outputArtifactQueries` filter against every
  artifact earlier runs on the same local root produced (a small JSON
  store), so a first run has no baseline and a second one finds the first
  run's blessed model; an importer task yields its constant URI.

That is the Vertex AI mode. The KFP mode (`mode='kfp'`) follows the
open-source KFP v2 backend instead (kfp_backend has the sources): no
`preCacheCheck` hook; outputs recorded in a real SQLite MLMD after each step
and inputs read back from it, named by their MLMD ids, with an empty type
schema; the launcher's download of every input into the pod's `/gcs/...`
(GCS directory markers written as files) and upload of each output's local
path; the output file inside the pod; output URIs
`{root}/{run}/{task}/{key}`.

Remote URIs of the file (gs://...) and the image's paths map to local
directories through `path_map`, for the test only: the compiler keeps
refusing local paths. The image itself is not built: its code is this
checkout's installed package and its environment the Dockerfile's (Keras 2
via `tf_env.subprocess_env`). A step that exits non-zero or writes no
executor output file raises `StepFailed`, naming the task, its exit code and
its last stderr lines.

About 470 lines, past the usual 300: one launcher (ordering, ExecutorInput,
container steps, resolver queries, importer, in both modes) reads best in
one place; what is specific to the KFP backend lives in kfp_backend.
"""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
import yaml

import kfp_backend

from tfx_autostrategy.kubeflow import kfp_entrypoint
from tfx_autostrategy import tf_env

STORE_FILE = 'kfp_local_artifacts.json'
MLMD_FILE = 'kfp_mlmd.sqlite'
MODES = ('vertex', 'kfp')
# The image's environment (kubeflow/Dockerfile's ENV), besides Keras 2;
# but not PYTHONDONTWRITEBYTECODE: the image's pip install compiled the
# bytecode at build time, this venv's uv install did not, and without it
# every step recompiles TensorFlow's and TFX's sources (measured: a TFX
# import took 2-3x as long).
IMAGE_ENV = {'TF_CPP_MIN_LOG_LEVEL': '2', 'PYTHONUNBUFFERED': '1'}
_PASSED_ENV = ('PATH', 'HOME', 'LANG', 'LC_ALL', 'TMPDIR', 'USER')
_PLACEHOLDER = re.compile(r'\{\{\$[^}]*\}\}')
_PARAMETER = re.compile(r"\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}")
_INPUT_METADATA = re.compile(
    r"\{\{\$\.inputs\.artifacts\['([^']+)'\]\.metadata\['([^']+)'\]\}\}")
_FILTER_TERM = re.compile(
    r'^(?:schema_title="(?P<title>[^"]*)"|state=(?P<state>\w+)'
    r'|name="(?P<name>[^"]*)"'
    r'|metadata\.(?P<key>\w+)\.(?P<kind>number|string)_value='
    r'(?P<value>"[^"]*"|[-\d.]+))$')


class HarnessError(RuntimeError):
  """The pipeline file uses something the harness (or KFP) cannot run."""


class StepFailed(RuntimeError):
  """A task's process failed: names the task, its exit code and its stderr."""

  def __init__(self, task: str, returncode: Optional[int], stderr_tail: str,
               reason: str = ''):
    self.task, self.returncode, self.stderr_tail = task, returncode, stderr_tail
    super().__init__(
        f'task {task} failed: {reason or f"exit code {returncode}"}; last '
        f'lines of its stderr:\n{stderr_tail}')


@dataclasses.dataclass
class RunResult:
  """What a run left: each task's output artifacts (RuntimeArtifact dicts)."""
  run_id: str
  outputs: Dict[str, Dict[str, List[Dict[str, Any]]]]
  seconds: Dict[str, float]
  logs: Dict[str, str]

  def artifact(self, task: str, key: str) -> Dict[str, Any]:
    [artifact] = self.outputs[task][key]
    return artifact


def load_pipeline_spec(path: str) -> Dict[str, Any]:
  """The PipelineSpec of a `.json` PipelineJob or a `.yaml` KFP package."""
  with open(path) as f:
    if path.endswith(('.yaml', '.yml')):
      spec = next(yaml.safe_load_all(f))
    else:
      spec = json.load(f)['pipelineSpec']
  # What KFP's backend does first: the spec must parse as a PipelineSpec.
  json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())
  return spec


def task_order(tasks: Mapping[str, Any]) -> List[str]:
  """Task names in dependency order (ties by name)."""
  needs = {}
  for name, task in tasks.items():
    deps = set(task.get('dependentTasks', []))
    for ref in task.get('inputs', {}).get('artifacts', {}).values():
      if 'taskOutputArtifact' in ref:
        deps.add(ref['taskOutputArtifact']['producerTask'])
    needs[name] = deps
  order = []
  while needs:
    ready = sorted(n for n, deps in needs.items() if not deps - set(order))
    if not ready:
      raise HarnessError(f'dependency cycle among {sorted(needs)}')
    order.append(ready[0])
    del needs[ready[0]]
  return order


def map_prefixes(text: str, path_map: Mapping[str, str]) -> str:
  """JSON `text` with each mapped prefix that starts a string replaced.

  Strings nested in string values (a JSON proto in a parameter) count too:
  their opening quote is escaped, so the prefix still follows a `"`.
  """
  if not path_map:
    return text
  pattern = '(?<=")(' + '|'.join(re.escape(p) for p in sorted(
      path_map, key=len, reverse=True)) + ')'
  return re.sub(pattern, lambda m: path_map[m[1]], text)


def schema_title(artifact_type: Mapping[str, Any]) -> str:
  if 'schemaTitle' in artifact_type:
    return artifact_type['schemaTitle']
  return yaml.safe_load(artifact_type['instanceSchema'])['title']


def matches(artifact: Mapping[str, Any], query: str) -> bool:
  """Whether a stored artifact passes a resolver's filter (AND of terms)."""
  for term in query.split(' AND '):
    found = _FILTER_TERM.match(term.strip())
    if not found:
      raise HarnessError(f'resolver filter term not understood: {term!r}')
    if found['title'] is not None:
      ok = schema_title(artifact['type']) == found['title']
    elif found['state'] is not None:
      ok = artifact.get('state', 'LIVE') == found['state']
    elif found['name'] is not None:
      ok = artifact.get('name') == found['name']
    else:
      value = artifact.get('metadata', {}).get(found['key'])
      want = (found['value'].strip('"') if found['kind'] == 'string'
              else float(found['value']))
      ok = value == want
    if not ok:
      return False
  return True


def resolve(query: str, inputs: Mapping[str, List[Dict[str, Any]]],
            store: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
  """The latest stored artifact that `query` selects, as Vertex AI resolves.

  A placeholder on an input that resolved to nothing selects nothing.
  """
  def metadata(found):
    artifacts = inputs.get(found[1]) or []
    if not artifacts:
      raise LookupError
    return str(artifacts[0].get('metadata', {}).get(found[2], ''))
  try:
    query = _INPUT_METADATA.sub(metadata, query)
  except LookupError:
    return []
  if _PLACEHOLDER.search(query):
    raise HarnessError(f'resolver placeholder not supported: {query!r}')
  selected = [a for a in store if matches(a, query)]
  return [{k: a[k] for k in ('name', 'uri', 'type', 'metadata')}
          for a in selected[-1:]]


class LocalPipelineRun:
  """Runs one compiled pipeline file on a local root.

  Args:
    pipeline_file: `.json` PipelineJob or `.yaml` KFP package.
    root: local directory: runs, logs and the artifact store live here.
    path_map: prefix -> local directory, applied to every ExecutorInput
      (e.g. {'gs://bucket/': '/tmp/x/bucket/'}).
    env: extra environment of every step (e.g. a test hook).
    task_timeout: seconds a step may take.
    mode: 'vertex' (inputs typed and carrying their producer's metadata, as
      Vertex AI Pipelines passes them) or 'kfp' (the open-source KFP v2
      backend: see kfp_backend).
    directory_markers: in 'kfp' mode, whether directories that steps create
      in the bucket are GCS directory marker objects (TF <= 2.16).
  """

  def __init__(self, pipeline_file: str, root: str,
               path_map: Mapping[str, str],
               env: Optional[Mapping[str, str]] = None,
               task_timeout: float = 900, mode: str = 'vertex',
               directory_markers: bool = True):
    if mode not in MODES:
      raise HarnessError(f'mode must be one of {MODES}, got {mode!r}')
    self.spec = load_pipeline_spec(pipeline_file)
    self.root = os.path.abspath(root)
    self.path_map = dict(path_map)
    self.extra_env = dict(env or {})
    self.task_timeout = task_timeout
    self.mode = mode
    self.store_path = os.path.join(self.root, STORE_FILE)
    self.buckets = [kfp_backend.Bucket(remote, local, self.root,
                                       directory_markers)
                    for remote, local in self.path_map.items()
                    if '://' in remote]
    self._mlmd = None
    self._mlmd_ids: Dict[Any, List[int]] = {}

  def local(self, text: str) -> str:
    return map_prefixes(text, self.path_map)

  def remote(self, text: str) -> str:
    """`text` with the local directories mapped back to their prefixes."""
    return map_prefixes(text, {v: k for k, v in self.path_map.items()})

  @property
  def mlmd(self) -> kfp_backend.Mlmd:
    if self._mlmd is None:
      self._mlmd = kfp_backend.Mlmd(os.path.join(self.root, MLMD_FILE))
    return self._mlmd

  def _bucket(self, uri: str) -> Optional[kfp_backend.Bucket]:
    return next((b for b in self.buckets if uri.startswith(b.remote_prefix)),
                None)

  def _store(self) -> List[Dict[str, Any]]:
    if not os.path.exists(self.store_path):
      return []
    with open(self.store_path) as f:
      return json.load(f)

  def _save(self, store: List[Dict[str, Any]]) -> None:
    with open(self.store_path + '.tmp', 'w') as f:
      json.dump(store, f, indent=1)
    os.replace(self.store_path + '.tmp', self.store_path)

  def environment(self) -> Dict[str, str]:
    """A container's environment: the image's variables, little else."""
    base = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
    return tf_env.subprocess_env(base, **IMAGE_ENV, **self.extra_env)

  def run(self) -> RunResult:
    """Runs every task; raises StepFailed at the first failing one."""
    os.makedirs(self.root, exist_ok=True)
    store = self._store()
    run_id = f'run-{len({a["run"] for a in store}) + 1}'
    pipeline = self.spec['pipelineInfo']['name']
    root = self.spec['defaultPipelineRoot'].rstrip('/')
    # KFP's driver: {pipeline root}/{run id}/{task}/{output key}.
    run_root = (f'{root}/{run_id}' if self.mode == 'kfp' else
                f'{root}/{pipeline}/{run_id}')
    result = RunResult(run_id, {}, {}, {})
    tasks = self.spec['root']['dag']['tasks']
    for name in task_order(tasks):
      started = time.monotonic()
      task = tasks[name]
      component = self.spec['components'][task['componentRef']['name']]
      executor = self.spec['deploymentSpec']['executors'][
          component['executorLabel']]
      inputs = self._inputs(task, result)
      if 'resolver' in executor:
        outputs = {key: resolve(query['filter'], inputs, store)
                   for key, query in
                   executor['resolver']['outputArtifactQueries'].items()}
      elif 'importer' in executor:
        outputs = {'artifact': [self._imported(name, executor['importer'],
                                               run_id)]}
      else:
        outputs = self._run_container(name, task, component,
                                      executor['container'], inputs,
                                      f'{run_root}/{name}', run_id, result)
        for artifacts in outputs.values():
          store.extend(dict(a, run=run_id, task=name, state='LIVE')
                       for a in artifacts)
        self._save(store)
      result.outputs[name] = outputs
      result.seconds[name] = round(time.monotonic() - started, 1)
    return result

  def _inputs(self, task, result: RunResult) -> Dict[str, List[Dict]]:
    inputs = {}
    for key, ref in task.get('inputs', {}).get('artifacts', {}).items():
      if 'taskOutputArtifact' not in ref:
        raise HarnessError(f'input artifact {key}: {ref} not supported')
      producer = ref['taskOutputArtifact']
      ids = self._mlmd_ids.get((result.run_id, producer['producerTask'],
                                producer['outputArtifactKey']))
      if self.mode == 'kfp' and ids is not None:
        # The driver reads the producer's outputs back from MLMD.
        inputs[key] = [self.mlmd.runtime_artifact(i) for i in ids]
      else:
        inputs[key] = result.outputs[producer['producerTask']].get(
            producer['outputArtifactKey'], [])
    return inputs

  def _imported(self, task: str, importer, run_id: str) -> Dict[str, Any]:
    return {'name': f'local/artifacts/{run_id}.{task}.artifact',
            'uri': importer['artifactUri']['runtimeParameter'
                                           if 'runtimeParameter' in
                                           importer['artifactUri']
                                           else 'constant'],
            'type': importer['typeSchema'],
            'metadata': importer.get('metadata', {})}

  def _run_container(self, name, task, component, container, inputs,
                     task_root, run_id, result):
    kfp = self.mode == 'kfp'
    parameters = {}
    for key, ref in task.get('inputs', {}).get('parameters', {}).items():
      if 'runtimeValue' not in ref:
        raise HarnessError(f'{name}: parameter {key}: {ref} not supported')
      parameters[key] = ref['runtimeValue']['constant']
    outputs = {
        key: [{'name': '' if kfp else f'local/artifacts/{run_id}.{name}.{key}',
               'uri': f'{task_root}/{key}', 'type': definition['artifactType'],
               'metadata': {}}]
        for key, definition in component.get('outputDefinitions', {}).get(
            'artifacts', {}).items()}
    pod = os.path.join(self.root, 'pods', run_id, name)
    if kfp:
      # The launcher's output file is local to the pod
      # (component.OutputMetadataFilepath).
      shutil.rmtree(pod, ignore_errors=True)
      output_file = os.path.join(pod, 'tmp', 'kfp_outputs',
                                 'output_metadata.json')
    else:
      output_file = f'{task_root}/executor_output.json'
    executor_input = {
        'inputs': {
            'artifacts': {k: {'artifacts': v} for k, v in inputs.items() if v},
            'parameterValues': parameters},
        'outputs': {'artifacts': {k: {'artifacts': v}
                                  for k, v in outputs.items()},
                    'outputFile': output_file}}
    json_format.ParseDict(executor_input, pipeline_spec_pb2.ExecutorInput())
    invocation = self.local(json.dumps(executor_input))
    local_output_file = self.local(json.dumps(output_file))[1:-1]
    log_dir = os.path.join(self.root, 'logs', run_id)
    os.makedirs(log_dir, exist_ok=True)
    os.makedirs(os.path.dirname(local_output_file), exist_ok=True)
    env = self.environment()
    if kfp:
      self._download_inputs(name, inputs, pod)
      env[kfp_entrypoint.LOCAL_PATHS_ENV] = json.dumps({
          bucket.directory + '/': kfp_backend.local_path_for_uri(
              bucket.remote_prefix, pod) for bucket in self.buckets})
    # Vertex AI runs ExampleGen's driver (`lifecycle.preCacheCheck`) first;
    # KFP's backend never reads the field.
    hooks = [('preCacheCheck', container['lifecycle']['preCacheCheck'])
             ] if 'preCacheCheck' in container.get('lifecycle', {}) and (
                 not kfp) else []
    for stage, spec in hooks + [('executor', container)]:
      argv = [self._substitute(name, arg, invocation, parameters)
              for arg in list(spec['command']) + list(spec.get('args', []))]
      if argv[0] == 'python':
        argv[0] = sys.executable
      log = os.path.join(log_dir, f'{name}.{stage}')
      result.logs[name] = log + '.stderr'
      with open(log + '.stdout', 'w') as out, open(log + '.stderr', 'w') as err:
        # Its own session: a timeout ends the step's children too (a pod's
        # processes end with the pod).
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env,
                                cwd=os.path.dirname(local_output_file),
                                start_new_session=True)
        try:
          proc.wait(timeout=self.task_timeout)
        except subprocess.TimeoutExpired:
          os.killpg(proc.pid, signal.SIGKILL)
          proc.wait()
          raise StepFailed(name, None, _tail(log + '.stderr'),
                           f'{stage} ran longer than {self.task_timeout} s'
                           ) from None
      if proc.returncode:
        raise StepFailed(name, proc.returncode, _tail(log + '.stderr'),
                         f'{stage} exit code {proc.returncode}')
    if not os.path.exists(local_output_file):
      raise StepFailed(name, 0, _tail(log + '.stderr'),
                       f'exit code 0 but no executor output file '
                       f'{local_output_file}')
    with open(local_output_file) as f:
      text = f.read()
    written = json.loads(self.remote(text) if kfp else text)
    json_format.ParseDict(written, pipeline_spec_pb2.ExecutorOutput())
    for key, artifacts in written.get('artifacts', {}).items():
      # The launcher keeps the artifact's type and identity, and takes what
      # the executor wrote (URI, metadata) from the output file.
      [launched] = outputs[key]
      outputs[key] = [dict(launched, uri=a.get('uri') or launched['uri'],
                           metadata=a.get('metadata', {}))
                      for a in artifacts['artifacts']]
    if kfp:
      self._upload_and_record(name, outputs, pod, run_id)
    return outputs

  def _download_inputs(self, name, inputs, pod) -> None:
    """The launcher's download of every input artifact into the pod."""
    for key, artifacts in inputs.items():
      for artifact in artifacts[:1]:
        bucket = self._bucket(artifact['uri'])
        if bucket is None:
          continue
        try:
          bucket.download(key, artifact['uri'], pod)
        except kfp_backend.LauncherError as e:
          raise StepFailed(name, None, '', f'launcher: {e}') from None

  def _upload_and_record(self, name, outputs, pod, run_id) -> None:
    """The launcher's upload of the outputs, then their MLMD records."""
    for key, artifacts in outputs.items():
      bucket = self._bucket(artifacts[0]['uri'])
      if bucket is not None:
        bucket.upload(artifacts[0]['uri'], pod)
      self._mlmd_ids[(run_id, name, key)] = [
          self.mlmd.record(key, artifact) for artifact in artifacts]

  @staticmethod
  def _substitute(task, arg, invocation, parameters) -> str:
    arg = arg.replace('{{$}}', invocation)
    arg = _PARAMETER.sub(lambda m: str(parameters[m[1]]), arg)
    # A placeholder left over would reach the executor verbatim.
    leftover = _PLACEHOLDER.search(arg.replace(invocation, ''))
    if leftover:
      raise HarnessError(f'{task}: placeholder {leftover[0]} not supported')
    return arg


def _tail(path: str, lines: int = 15) -> str:
  with open(path, errors='replace') as f:
    return ''.join(f.readlines()[-lines:]).rstrip()
