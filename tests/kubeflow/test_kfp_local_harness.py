"""The local KFP harness's own logic: order, resolver queries, placeholders.

Cheap (no step runs); the compiled pipelines themselves run in
test_compiled_pipelines.py.
"""

import pytest

import kfp_local_harness as harness

BLESSING_FILTER = ('schema_title="tfx.ModelBlessing" AND state=LIVE AND '
                   'metadata.blessed.number_value=1')
MODEL_FILTER = ('schema_title="tfx.Model" AND state=LIVE AND name="{{$.inputs.'
                "artifacts['input'].metadata['current_model_id']}}\"")
MODEL_TYPE = {'instanceSchema': 'title: tfx.Model\ntype: object\n'}
BLESSING_TYPE = {'schemaTitle': 'tfx.ModelBlessing'}


def stored(name, artifact_type, **metadata):
  return {'name': name, 'uri': f'/root/{name}', 'type': artifact_type,
          'metadata': metadata, 'state': 'LIVE', 'run': 'run-1', 'task': 't'}


def test_tasks_run_after_their_dependencies_and_producers():
  tasks = {
      'Pusher': {'dependentTasks': ['Evaluator']},
      'Evaluator': {'inputs': {'artifacts': {'model': {'taskOutputArtifact': {
          'producerTask': 'Trainer', 'outputArtifactKey': 'model'}}}}},
      'Trainer': {'dependentTasks': ['Gen']},
      'Gen': {},
      'A-resolver': {},
  }
  assert harness.task_order(tasks) == ['A-resolver', 'Gen', 'Trainer',
                                       'Evaluator', 'Pusher']
  with pytest.raises(harness.HarnessError, match='dependency cycle'):
    harness.task_order({'a': {'dependentTasks': ['b']},
                        'b': {'dependentTasks': ['a']}})


def test_first_run_resolves_no_baseline():
  assert harness.resolve(BLESSING_FILTER, {}, []) == []
  # No blessing resolved: the model query's placeholder selects nothing.
  assert harness.resolve(MODEL_FILTER, {'input': []},
                         [stored('m1', MODEL_TYPE)]) == []


def test_latest_blessed_model_is_resolved_through_its_blessing():
  store = [
      stored('m1', MODEL_TYPE),
      stored('b1', BLESSING_TYPE, blessed=1.0, current_model_id='m1'),
      stored('m2', MODEL_TYPE),
      stored('b2', BLESSING_TYPE, blessed=1.0, current_model_id='m2'),
      stored('m3', MODEL_TYPE),
      stored('b3', BLESSING_TYPE, blessed=0.0, current_model_id='m3'),
  ]
  [blessing] = harness.resolve(BLESSING_FILTER, {}, store)
  assert blessing['name'] == 'b2'
  # Only RuntimeArtifact fields reach an ExecutorInput.
  assert sorted(blessing) == ['metadata', 'name', 'type', 'uri']
  [model] = harness.resolve(MODEL_FILTER, {'input': [blessing]}, store)
  assert (model['name'], model['uri']) == ('m2', '/root/m2')


def test_unknown_filter_terms_and_placeholders_are_refused():
  with pytest.raises(harness.HarnessError, match="not understood: 'uri~"):
    harness.resolve('schema_title="tfx.Model" AND uri~"x"', {}, [
        stored('m1', MODEL_TYPE)])
  with pytest.raises(harness.HarnessError, match='placeholder not supported'):
    harness.resolve('name="{{$.inputs.parameters[\'x\']}}"', {}, [])
  with pytest.raises(harness.HarnessError,
                     match=r"T: placeholder \{\{\$\.outputs"):
    harness.LocalPipelineRun._substitute(  # pylint: disable=protected-access
        'T', "{{$.outputs.artifacts['m'].uri}}", '{}', {})


def test_remote_prefixes_map_where_a_string_starts_also_in_nested_json():
  path_map = {'gs://b/': '/l/b/', '/pipeline/': '/repo/'}
  text = ('{"uri": "gs://b/root/x", "p": "{\\"base\\": \\"gs://b/s\\"}", '
          '"s": "/pipeline/schemas/a", "keep": "/x/pipeline/y gs://b/z"}')
  assert harness.map_prefixes(text, path_map) == (
      '{"uri": "/l/b/root/x", "p": "{\\"base\\": \\"/l/b/s\\"}", '
      '"s": "/repo/schemas/a", "keep": "/x/pipeline/y gs://b/z"}')
