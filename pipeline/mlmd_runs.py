"""The one reader of a local run's MLMD store.

`latest_run` gives the newest pipeline run's executions, each with its node
name and the artifacts on its input and output events (what `autostrategy
run` prints, `autostrategy report` draws and an interrupted run cancels);
`latest_finished` gives each named node's newest COMPLETE or CACHED
execution in any run (the Transform output `autostrategy rehearse` reuses).
Only metadata is read here: the files behind the artifacts' URIs are the
callers'.

ml_metadata and TFX are imported inside the functions, so importing this
module is cheap.
"""

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

# An event's key (e.g. 'transformed_examples', 'baseline_model') -> the
# artifacts on it, each with its type's name ('Examples', 'ModelBlessing').
Artifacts = Dict[str, List[Tuple[str, Any]]]


@dataclasses.dataclass(frozen=True)
class NodeExecution:
  """One execution of a pipeline node, as MLMD recorded it.

  Attributes:
    node: the component id (e.g. 'Trainer').
    execution: the `metadata_store_pb2.Execution`.
    inputs: the artifacts it read, by input key.
    outputs: the artifacts it wrote, by output key.
  """
  node: str
  execution: Any
  inputs: Artifacts
  outputs: Artifacts

  def input(self, key: str) -> Optional[Any]:
    """The (last) MLMD artifact on input `key`, or None."""
    found = self.inputs.get(key) or []
    return found[-1][1] if found else None

  def output(self, key: str) -> Optional[Any]:
    """The (last) MLMD artifact on output `key`, or None."""
    found = self.outputs.get(key) or []
    return found[-1][1] if found else None

  def output_of_type(self, type_name: str) -> Optional[Any]:
    """The last output artifact of type `type_name` (any key), or None."""
    found = [artifact for artifacts in self.outputs.values()
             for name, artifact in artifacts if name == type_name]
    return found[-1] if found else None


def connect(metadata_path: str):
  """The `ml_metadata.MetadataStore` of a local run's SQLite file."""
  import ml_metadata as mlmd  # pylint: disable=g-import-not-at-top
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  return mlmd.MetadataStore(
      tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path))


def _node_names(store) -> Dict[int, str]:
  return {c.id: c.name.split('.')[-1]
          for c in store.get_contexts_by_type('node')}


def _read(store, execution, node_names: Dict[int, str],
          type_names: Dict[int, str]) -> NodeExecution:
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  node = next((node_names[c.id]
               for c in store.get_contexts_by_execution(execution.id)
               if c.id in node_names), str(execution.id))
  events = store.get_events_by_execution_ids([execution.id])
  artifacts = {a.id: a for a in store.get_artifacts_by_id(
      [e.artifact_id for e in events])}
  sides: Dict[int, Artifacts] = {metadata_store_pb2.Event.INPUT: {},
                                 metadata_store_pb2.Event.OUTPUT: {}}
  for event in events:
    if event.type not in sides or event.artifact_id not in artifacts:
      continue
    key = next((step.key for step in event.path.steps if step.key), '')
    artifact = artifacts[event.artifact_id]
    sides[event.type].setdefault(key, []).append(
        (type_names.get(artifact.type_id, ''), artifact))
  return NodeExecution(node, execution,
                       inputs=sides[metadata_store_pb2.Event.INPUT],
                       outputs=sides[metadata_store_pb2.Event.OUTPUT])


def _type_names(store) -> Dict[int, str]:
  return {t.id: t.name for t in store.get_artifact_types()}


def latest_run(metadata_path: str) -> Tuple[Any, List[NodeExecution]]:
  """The store and the executions of its newest pipeline run, oldest first.

  Raises:
    LookupError: the store holds no pipeline run.
  """
  store = connect(metadata_path)
  runs = store.get_contexts_by_type('pipeline_run')
  if not runs:
    raise LookupError(f'{metadata_path}: no pipeline run recorded')
  latest = max(runs, key=lambda c: (c.create_time_since_epoch, c.id))
  node_names, type_names = _node_names(store), _type_names(store)
  executions = sorted(store.get_executions_by_context(latest.id),
                      key=lambda e: (e.create_time_since_epoch, e.id))
  return store, [_read(store, execution, node_names, type_names)
                 for execution in executions]


def latest_finished(metadata_path: str, nodes: Sequence[str]
                    ) -> Dict[str, Optional[NodeExecution]]:
  """Each node's newest COMPLETE or CACHED execution in any run (or None)."""
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  store = connect(metadata_path)
  done = (metadata_store_pb2.Execution.COMPLETE,
          metadata_store_pb2.Execution.CACHED)
  node_names, type_names = _node_names(store), _type_names(store)
  found: Dict[str, Optional[NodeExecution]] = {}
  for node in nodes:
    executions = [e for context_id, name in node_names.items() if name == node
                  for e in store.get_executions_by_context(context_id)
                  if e.last_known_state in done]
    found[node] = None
    if executions:
      newest = max(executions,
                   key=lambda e: (e.last_update_time_since_epoch, e.id))
      found[node] = _read(store, newest, node_names, type_names)
  return found
