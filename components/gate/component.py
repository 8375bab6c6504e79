"""AnomaliesGate: stops the pipeline when ExampleValidator found anomalies.

Stock ExampleValidator records anomalies but no component acts on them, so a
drifted CSV trains anyway. This gate sits between ExampleValidator and
Transform and fails the run, listing every anomaly, unless overridden.
"""

import os
from typing import List

from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.dsl.component.experimental.annotations import InputArtifact
from tfx.dsl.component.experimental.annotations import Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.types import standard_artifacts

ANOMALIES_FILE = 'SchemaDiff.pb'


class AnomaliesFoundError(RuntimeError):
  """ExampleValidator reported anomalies and the run may not go on."""


def describe_anomalies(anomalies_artifact) -> List[str]:
  """One line per anomaly: split, feature, and the validator's description."""
  lines = []
  for split in artifact_utils.decode_split_names(anomalies_artifact.split_names):
    path = os.path.join(
        artifact_utils.get_split_uri([anomalies_artifact], split),
        ANOMALIES_FILE)
    anomalies = anomalies_pb2.Anomalies()
    anomalies.ParseFromString(fileio.open(path, 'rb').read())
    for feature, info in sorted(anomalies.anomaly_info.items()):
      lines.append(f'split {split!r}, column {feature!r}: {_describe(info)}')
    if anomalies.HasField('dataset_anomaly_info'):
      lines.append(f'split {split!r}, dataset: '
                   f'{_describe(anomalies.dataset_anomaly_info)}')
  return lines


def _describe(info) -> str:
  """'Short (long)', or just the long text when it repeats the short one."""
  short, long = info.short_description, info.description
  if not long or long == short:
    return short
  if long.startswith(short):
    return long
  return f'{short} ({long})'


@component
def AnomaliesGate(  # pylint: disable=invalid-name
    anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
    allow_anomalies: Parameter[bool] = False) -> None:
  """Raises AnomaliesFoundError when any split has an anomaly.

  Args:
    anomalies: ExampleValidator output.
    allow_anomalies: log the anomalies and let the run go on.
  """
  lines = describe_anomalies(anomalies)
  if not lines:
    return
  message = ('ExampleValidator found %d anomal%s against the curated schema:\n  '
             % (len(lines), 'y' if len(lines) == 1 else 'ies') + '\n  '.join(lines))
  if allow_anomalies:
    import absl.logging  # pylint: disable=g-import-not-at-top
    absl.logging.warning('%s\n(continuing: allow_anomalies is set)', message)
    return
  raise AnomaliesFoundError(
      message + '\nFix the data or update schemas/ (or pass --allow-anomalies).')
