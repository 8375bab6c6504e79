"""What the open-source KFP v2 backend does around a step (test code).

kfp_local_harness's KFP mode uses this module; kubeflow/README.md ("What a
step receives on open-source KFP v2") lists the backend sources each part
follows (kubeflow/pipelines, backend/src/v2/, KFP 2.2 - 2.5):

- `Mlmd`: a real ML Metadata store (SQLite). The launcher records each
  output artifact after its step (metadata/client.go `RecordArtifact`: the
  type named by the schema's title, the merged metadata as custom
  properties plus `display_name` and `store_session_info`); the driver reads
  a downstream task's inputs back from it (`GetOutputArtifactsByExecutionId`
  + `OutputArtifact.ToRuntimeArtifact`): name = the MLMD id, the URI, the
  custom properties as metadata, and an instance schema that is EMPTY
  (`Schema: ""`, "TODO(Bobgy): figure out how to get schema").
- `Bucket`: the object store as the launcher sees it (objectstore/object_store.go).
  `download` lists every object under an input's key and writes each as a
  file under the pod's local path (`DownloadBlob`); `upload` copies a local
  output directory file by file (`UploadBlob`). A local directory stands in
  for the bucket; a directory in it that a step created itself (through
  `gs://`, i.e. TensorFlow's GCS filesystem, which up to TF 2.16 writes a
  zero-byte `dir/` object for every directory it creates) counts as such a
  marker object; directories that the launcher's upload created do not
  (nor any, with `directory_markers=False`: TF 2.17+ writes none).
- `local_path_for_uri`: the launcher's `/gcs/`, `/minio/`, `/s3/` mapping
  (component/launcher_v2.go `localPathForURI`), rooted at the pod directory.
"""

import json
import os
import shutil
from typing import Any, Dict, List, Mapping, Set

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
import yaml

LOCAL_PREFIXES = (('gs://', 'gcs/'), ('minio://', 'minio/'), ('s3://', 's3/'))
UPLOADED_FILE = 'kfp_uploaded_directories.json'


class LauncherError(RuntimeError):
  """The launcher failed around the step (download, upload, metadata)."""


def local_path_for_uri(uri: str, pod: str) -> str:
  """Where the launcher puts `uri` inside the pod (`pod` stands for /)."""
  for remote, local in LOCAL_PREFIXES:
    if uri.startswith(remote):
      return os.path.join(pod, local + uri[len(remote):])
  raise LauncherError(f'failed to generate local path for URI {uri}: '
                      'unsupported storage scheme')


def schema_title(artifact_type: Mapping[str, Any]) -> str:
  if 'schemaTitle' in artifact_type:
    return artifact_type['schemaTitle']
  return (yaml.safe_load(artifact_type.get('instanceSchema', '')) or {}).get(
      'title', '')


def _mlmd_value(value) -> metadata_store_pb2.Value:
  """metadata/converter.go `StructValueToMLMDValue`."""
  result = metadata_store_pb2.Value()
  if isinstance(value, bool):
    result.int_value = int(value)
  elif isinstance(value, (int, float)):
    result.double_value = float(value)
  elif isinstance(value, str):
    result.string_value = value
  elif isinstance(value, list):
    result.struct_value.update({'list': value})
  elif isinstance(value, dict):
    result.struct_value.update({'struct': value})
  else:
    raise LauncherError(f'unknown/unsupported value type {type(value)}')
  return result


def _json_value(value: metadata_store_pb2.Value):
  """metadata/converter.go `toRuntimeArtifact`'s property conversion."""
  kind = value.WhichOneof('value')
  if kind == 'string_value':
    return value.string_value
  if kind == 'double_value':
    return value.double_value
  if kind == 'int_value':
    return float(value.int_value)
  if kind == 'struct_value':
    from google.protobuf import json_format  # pylint: disable=g-import-not-at-top
    return json_format.MessageToDict(value.struct_value)
  raise LauncherError(f'unknown property type in MLMD artifact: {kind}')


class Mlmd:
  """The run's ML Metadata store: what the launcher records, the driver reads."""

  def __init__(self, path: str):
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = path
    config.sqlite.connection_mode = 3  # READWRITE_OPENCREATE
    self.store = metadata_store.MetadataStore(config)

  def record(self, key: str, artifact: Mapping[str, Any]) -> int:
    """Records an output artifact as the launcher does; returns its id."""
    title = schema_title(artifact['type'])
    if not title:
      raise LauncherError(f'output {key}: No title specified')
    type_id = self.store.put_artifact_type(
        metadata_store_pb2.ArtifactType(name=title))
    mlmd_artifact = metadata_store_pb2.Artifact(
        type_id=type_id, uri=artifact['uri'],
        state=metadata_store_pb2.Artifact.LIVE)
    for name, value in artifact.get('metadata', {}).items():
      mlmd_artifact.custom_properties[name].CopyFrom(_mlmd_value(value))
    for name, value in (('display_name', key), ('store_session_info', '{}')):
      if name not in mlmd_artifact.custom_properties:
        mlmd_artifact.custom_properties[name].string_value = value
    [artifact_id] = self.store.put_artifacts([mlmd_artifact])
    return artifact_id

  def runtime_artifact(self, artifact_id: int) -> Dict[str, Any]:
    """An upstream output as the driver puts it in a task's ExecutorInput."""
    [artifact] = self.store.get_artifacts_by_id([artifact_id])
    metadata = {k: _json_value(v) for k, v in artifact.properties.items()}
    metadata.update({k: _json_value(v)
                     for k, v in artifact.custom_properties.items()})
    return {'name': str(artifact.id), 'uri': artifact.uri,
            'metadata': metadata, 'type': {'instanceSchema': ''}}


class Bucket:
  """A local directory standing in for the bucket behind `remote_prefix`."""

  def __init__(self, remote_prefix: str, directory: str, root: str,
               directory_markers: bool = True):
    self.remote_prefix = remote_prefix
    self.directory_markers = directory_markers
    self.directory = directory.rstrip('/')
    self._uploaded_file = os.path.join(root, UPLOADED_FILE)

  def _uploaded(self) -> Set[str]:
    if not os.path.exists(self._uploaded_file):
      return set()
    with open(self._uploaded_file) as f:
      return set(json.load(f))

  def local(self, uri: str) -> str:
    return self.directory + '/' + uri[len(self.remote_prefix):]

  def objects(self, uri: str) -> List[str]:
    """Object keys under `uri` (relative), markers as `dir/`, sorted."""
    top = self.local(uri).rstrip('/')
    uploaded = self._uploaded()
    keys = []
    for directory, _, files in os.walk(top):
      relative = os.path.relpath(directory, top)
      relative = '' if relative == '.' else relative + '/'
      if self.directory_markers and os.path.abspath(
          directory) not in uploaded:
        keys.append(relative)  # TensorFlow's marker object `dir/`
      keys.extend(relative + name for name in files)
    return sorted(keys)

  def download(self, name: str, uri: str, pod: str) -> None:
    """`DownloadBlob`: each object under `uri` becomes a file in the pod."""
    local = local_path_for_uri(uri, pod)
    top = self.local(uri).rstrip('/')
    for key in self.objects(uri):
      destination = os.path.normpath(os.path.join(local, key))
      try:
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        if key == '' or key.endswith('/'):
          open(destination, 'w').close()  # a zero-byte object, as a file
        else:
          shutil.copyfile(os.path.join(top, key), destination)
      except OSError as e:
        raise LauncherError(
            f'failed to download input artifact "{name}" from remote storage '
            f'URI "{uri}": {e.strerror}: {e.filename}') from None

  def upload(self, uri: str, pod: str) -> bool:
    """`UploadBlob` of the output's local path; False when it has none."""
    local = local_path_for_uri(uri, pod)
    if not os.path.exists(local):
      return False  # "Local filepath ... does not exist": allowed
    top = self.local(uri).rstrip('/')
    created = []
    for directory, _, files in os.walk(local):
      target = os.path.join(top, os.path.relpath(directory, local))
      target = os.path.normpath(target)
      os.makedirs(target, exist_ok=True)
      created.append(os.path.abspath(target))
      for file in files:
        shutil.copyfile(os.path.join(directory, file),
                        os.path.join(target, file))
    uploaded = self._uploaded() | set(created)
    with open(self._uploaded_file, 'w') as f:
      json.dump(sorted(uploaded), f)
    return True
