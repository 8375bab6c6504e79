"""The MLMD reader (pipeline/mlmd_runs.py) on a real SQLite store.

The store is written here with ml_metadata's own API the way TFX's
LocalDagRunner lays a run out (a `pipeline_run` context per run, a `node`
context per component, executions with INPUT/OUTPUT events whose path's key
is the artifact's input or output name); the end-to-end runs in
tests/pipeline read real ones.
"""

import ml_metadata as mlmd
from ml_metadata.proto import metadata_store_pb2 as pb
import pytest
from tfx import v1 as tfx

from tfx_autostrategy.pipeline import mlmd_runs


class _Store:
  """A few TFX-shaped runs in an MLMD SQLite file."""

  def __init__(self, path):
    self.store = mlmd.MetadataStore(
        tfx.orchestration.metadata.sqlite_metadata_connection_config(path))
    self.types = {}
    for name in ('pipeline_run', 'node'):
      self.types[name] = self.store.put_context_type(
          pb.ContextType(name=name))
    self.execution_type = self.store.put_execution_type(
        pb.ExecutionType(name='Component'))
    for name in ('Examples', 'TransformGraph', 'Model'):
      self.types[name] = self.store.put_artifact_type(
          pb.ArtifactType(name=name))
    self.nodes = {}

  def run(self, name):
    context = pb.Context(type_id=self.types['pipeline_run'], name=name)
    [context.id] = self.store.put_contexts([context])
    return context

  def execute(self, run, node, state, inputs=(), outputs=()):
    """An execution of `node` in `run`; inputs/outputs: (key, type, uri)."""
    if node not in self.nodes:
      context = pb.Context(type_id=self.types['node'],
                           name=f'my_pipeline.{node}')
      [context.id] = self.store.put_contexts([context])
      self.nodes[node] = context
    execution = pb.Execution(type_id=self.execution_type,
                             last_known_state=state)
    pairs = []
    for kind, artifacts in ((pb.Event.INPUT, inputs),
                            (pb.Event.OUTPUT, outputs)):
      for key, type_name, uri in artifacts:
        event = pb.Event(type=kind)
        event.path.steps.add().key = key
        event.path.steps.add().index = 0
        pairs.append((pb.Artifact(type_id=self.types[type_name], uri=uri),
                      event))
    execution_id, _, _ = self.store.put_execution(
        execution, pairs, [run, self.nodes[node]])
    return execution_id


@pytest.fixture
def store(tmp_path):
  return _Store(str(tmp_path / 'metadata.sqlite')), str(
      tmp_path / 'metadata.sqlite')


def test_latest_run_reads_the_newest_runs_executions(store):
  fake, path = store
  old = fake.run('run-1')
  fake.execute(old, 'Transform', pb.Execution.COMPLETE,
               outputs=[('transformed_examples', 'Examples', '/old/ex')])
  new = fake.run('run-2')
  fake.execute(new, 'Transform', pb.Execution.CACHED,
               inputs=[('examples', 'Examples', '/raw')],
               outputs=[('transformed_examples', 'Examples', '/new/ex'),
                        ('transform_graph', 'TransformGraph', '/new/graph')])
  fake.execute(new, 'Trainer', pb.Execution.RUNNING,
               inputs=[('examples', 'Examples', '/new/ex')],
               outputs=[('model', 'Model', '/new/model')])

  _, executions = mlmd_runs.latest_run(path)
  assert [(r.node, r.execution.last_known_state) for r in executions] == [
      ('Transform', pb.Execution.CACHED), ('Trainer', pb.Execution.RUNNING)]
  transform, trainer = executions
  assert transform.input('examples').uri == '/raw'
  assert transform.output('transform_graph').uri == '/new/graph'
  assert transform.output('model') is None
  assert transform.outputs['transformed_examples'][0][0] == 'Examples'
  assert trainer.output_of_type('Model').uri == '/new/model'
  assert trainer.output_of_type('TransformGraph') is None


def test_latest_finished_skips_unfinished_executions_across_runs(store):
  fake, path = store
  first = fake.run('run-1')
  fake.execute(first, 'Transform', pb.Execution.COMPLETE,
               outputs=[('transform_graph', 'TransformGraph', '/1/graph')])
  second = fake.run('run-2')
  fake.execute(second, 'Transform', pb.Execution.FAILED,
               outputs=[('transform_graph', 'TransformGraph', '/2/graph')])
  fake.execute(second, 'Trainer', pb.Execution.RUNNING)

  found = mlmd_runs.latest_finished(path, ('Transform', 'Trainer', 'Pusher'))
  assert sorted(found) == ['Pusher', 'Trainer', 'Transform']
  assert found['Transform'].node == 'Transform'
  assert found['Transform'].output('transform_graph').uri == '/1/graph'
  assert found['Trainer'] is None and found['Pusher'] is None


def test_an_empty_store_has_no_latest_run(store):
  _, path = store
  with pytest.raises(LookupError, match='no pipeline run recorded'):
    mlmd_runs.latest_run(path)
