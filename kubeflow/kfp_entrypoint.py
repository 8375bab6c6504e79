"""Every `--target kubeflow` step's command: TFX's executor entrypoint, made
to survive the open-source KFP v2 backend.

TFX's `kubeflow_v2_run_executor` expects what Vertex AI Pipelines passes. The
open-source KFP v2 driver and launcher (kubeflow/README.md, "What a step
receives on open-source KFP v2", has the sources) differ in two ways that
break it, and this module handles both before and after calling it, without
patching TFX:

1. **Input types.** The driver reads a task's input artifacts back from MLMD
   with an empty instance schema (TFX: `AttributeError: 'NoneType' object
   has no attribute 'get'`), and other KFP front ends give them `system.*`
   titles TFX cannot import (`system.Model`, `system.Dataset`, which also
   merge distinct TFX types). The compiled command carries the component's
   inputs spec (`--json_serialized_inputs_spec_args`), so each input gets
   its type back from there. An input the spec does not type, or that
   arrived as a different TFX type, fails the step with one line naming the
   task, the input and the type it got.
2. **Output layout.** The launcher downloads every input artifact before a
   step by listing its objects and writing each as a file; TensorFlow's GCS
   filesystem (up to TF 2.16, which TFX 1.16 pins) writes a zero-byte
   `dir/` object for each directory it creates, which the download turns
   into a file, so a downstream step fails before it starts. Here each
   output is written to the launcher's local path for its URI (`/gcs/...`,
   `/minio/...`, `/s3/...`), which the launcher uploads file by file after
   the step (no markers); the executor output file gets the remote URIs
   back. With Dataflow (`--runner=DataflowRunner`) outputs stay remote: the
   workers cannot write to the pod's disk.

Vertex AI keeps TFX's own entrypoint (the compiler only rewrites
`--target kubeflow` steps). Test hook: AUTOSTRATEGY_KFP_LOCAL_PATHS, a JSON
map of URI prefix -> local prefix replacing the launcher's (the local
harness's pod directory).
"""

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

LOCAL_PATHS_ENV = 'AUTOSTRATEGY_KFP_LOCAL_PATHS'
# component/launcher_v2.go localPathForURI.
LAUNCHER_LOCAL_PATHS = {'gs://': '/gcs/', 'minio://': '/minio/',
                        's3://': '/s3/'}
# KFP's generic titles and the TFX types each may stand for.
SYSTEM_TITLES = {
    'system.Artifact': None,  # any
    'system.Dataset': ('tfx.Examples', 'tfx.Dataset'),
    'system.Model': ('tfx.Model', 'tfx.PushedModel'),
}


class UntypedInput(ValueError):
  """An input artifact whose TFX type cannot be recovered."""


def type_title(artifact_type: Optional[Mapping[str, Any]]) -> str:
  """The schema title of an ArtifactTypeSchema dict ('' when it has none)."""
  artifact_type = artifact_type or {}
  if artifact_type.get('schemaTitle'):
    return artifact_type['schemaTitle']
  schema = yaml.safe_load(artifact_type.get('instanceSchema') or '') or {}
  return schema.get('title', '') if isinstance(schema, dict) else ''


def restore_input_types(task: str, executor_input: Dict[str, Any],
                        inputs_spec: Mapping[str, Any]) -> None:
  """Gives each input artifact its type from the component's inputs spec.

  Raises:
    UntypedInput: an input the spec does not declare, or one that arrived as
      a type the spec's type cannot be (another TFX type, or a `system.*`
      title that does not cover it).
  """
  declared = inputs_spec.get('artifacts', {})
  artifacts = executor_input.get('inputs', {}).get('artifacts', {})
  for key, artifact_list in sorted(artifacts.items()):
    for artifact in artifact_list.get('artifacts', []):
      got = type_title(artifact.get('type'))
      spec_type = declared.get(key, {}).get('artifactType')
      want = type_title(spec_type)
      covers = SYSTEM_TITLES.get(got, ())
      if not want:
        problem = 'the inputs spec declares no type for it'
      elif got and got != want and not (got in SYSTEM_TITLES and (
          covers is None or want in covers)):
        problem = f'the inputs spec types it {want!r}'
      else:
        artifact['type'] = dict(spec_type)
        continue
      raise UntypedInput(
          f'task {task}: input artifact {key!r} arrived with type '
          f'{got or "(empty schema)"!r}, which cannot be typed: {problem}')


def local_paths() -> Dict[str, str]:
  if os.environ.get(LOCAL_PATHS_ENV):
    return json.loads(os.environ[LOCAL_PATHS_ENV])
  return dict(LAUNCHER_LOCAL_PATHS)


def localize_outputs(executor_input: Dict[str, Any],
                     prefixes: Mapping[str, str]) -> Dict[str, str]:
  """Points each output artifact at its local path; local -> remote URI."""
  moved = {}
  outputs = executor_input.get('outputs', {}).get('artifacts', {})
  for artifact_list in outputs.values():
    for artifact in artifact_list.get('artifacts', []):
      uri = artifact.get('uri', '')
      prefix = next((p for p in sorted(prefixes, key=len, reverse=True)
                     if uri.startswith(p)), None)
      if prefix is None:
        continue
      local = prefixes[prefix] + uri[len(prefix):]
      os.makedirs(os.path.dirname(local.rstrip('/')), exist_ok=True)
      artifact['uri'] = local
      moved[local] = uri
  return moved


def restore_output_uris(output_file: str, moved: Mapping[str, str]) -> None:
  """The executor output file with the remote URIs the launcher uploads to."""
  from tfx.dsl.io import fileio  # pylint: disable=g-import-not-at-top
  with fileio.open(output_file, 'r') as f:
    written = json.loads(f.read())
  for artifact_list in written.get('artifacts', {}).values():
    for artifact in artifact_list.get('artifacts', []):
      artifact['uri'] = moved.get(artifact.get('uri'), artifact.get('uri'))
  with fileio.open(output_file, 'w') as f:
    f.write(json.dumps(written))


def uses_dataflow(beam_args: List[str]) -> bool:
  joined = ' '.join(beam_args).replace('--runner ', '--runner=')
  return '--runner=DataflowRunner' in joined


def parse_args(argv: List[str]) -> Tuple[argparse.Namespace, List[str]]:
  """Our `--task_name`, then TFX's own flags (the rest are Beam's)."""
  parser = argparse.ArgumentParser(prog='kfp_entrypoint')
  parser.add_argument('--task_name', required=True)
  parser.add_argument('--executor_class_path', required=True)
  parser.add_argument('--json_serialized_invocation_args', required=True)
  parser.add_argument('--json_serialized_inputs_spec_args', default='')
  return parser.parse_known_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
  args, beam_args = parse_args(sys.argv[1:] if argv is None else argv)
  executor_input = json.loads(args.json_serialized_invocation_args)
  inputs_spec = json.loads(args.json_serialized_inputs_spec_args or '{}')
  try:
    restore_input_types(args.task_name, executor_input, inputs_spec)
  except UntypedInput as e:
    print(f'kfp_entrypoint: {e}', file=sys.stderr)
    return 1
  moved = ({} if uses_dataflow(beam_args) else
           localize_outputs(executor_input, local_paths()))
  args.json_serialized_invocation_args = json.dumps(executor_input)
  # TFX's entrypoint, on the restored ExecutorInput (its private function:
  # the module's `main` only takes argv; pinned by the lock's TFX 1.16).
  from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor  # pylint: disable=g-import-not-at-top
  kubeflow_v2_run_executor._run_executor(args, beam_args)  # pylint: disable=protected-access
  if moved:
    restore_output_uris(executor_input['outputs']['outputFile'], moved)
  return 0


if __name__ == '__main__':
  sys.exit(main())
