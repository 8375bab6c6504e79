"""The local KFP harness's own logic: order, resolver queries, placeholders.

Cheap (no step runs); the compiled pipelines themselves run in
test_compiled_pipelines.py.
"""

import pytest

import kfp_backend
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


def test_kfp_driver_reads_inputs_back_from_mlmd_without_a_type(tmp_path):
  mlmd = kfp_backend.Mlmd(str(tmp_path / 'mlmd.sqlite'))
  examples_id = mlmd.record('examples', {
      'uri': 'gs://b/r/Gen/examples', 'type': {
          'instanceSchema': 'title: tfx.Examples\ntype: object\n'},
      'metadata': {'split_names': '["train"]', 'span': 0, 'ok': True,
                   'nested': {'a': 1}}})
  mlmd.record('blessing', {'uri': 'gs://b/r/Ev/blessing', 'type': {
      'schemaTitle': 'tfx.ModelBlessing'}, 'metadata': {}})
  assert mlmd.runtime_artifact(examples_id) == {
      'name': str(examples_id), 'uri': 'gs://b/r/Gen/examples',
      'type': {'instanceSchema': ''},
      'metadata': {'split_names': '["train"]', 'span': 0.0, 'ok': 1.0,
                   'nested': {'struct': {'a': 1.0}},
                   'display_name': 'examples', 'store_session_info': '{}'}}
  # The launcher names the MLMD type by the schema's title.
  assert sorted(t.name for t in mlmd.store.get_artifact_types()) == [
      'tfx.Examples', 'tfx.ModelBlessing']
  with pytest.raises(kfp_backend.LauncherError, match='No title specified'):
    mlmd.record('x', {'uri': 'gs://b/x', 'type': {'instanceSchema': ''}})


def test_kfp_launcher_downloads_directory_markers_as_files(tmp_path):
  bucket_dir = tmp_path / 'bucket'
  (bucket_dir / 'r/T/model/Format-Serving').mkdir(parents=True)
  (bucket_dir / 'r/T/model/Format-Serving/saved_model.pb').write_text('m')
  bucket = kfp_backend.Bucket('gs://b/', str(bucket_dir), str(tmp_path))
  uri = 'gs://b/r/T/model'
  # Written through gs:// by the step: every directory is a marker object.
  assert bucket.objects(uri) == ['', 'Format-Serving/',
                                 'Format-Serving/saved_model.pb']
  pod = str(tmp_path / 'pod')
  with pytest.raises(kfp_backend.LauncherError) as failure:
    bucket.download('model', uri, pod)
  assert str(failure.value) == (
      'failed to download input artifact "model" from remote storage URI '
      f'"gs://b/r/T/model": File exists: {pod}/gcs/b/r/T/model')
  # Without markers (TF >= 2.17), the same layout downloads.
  plain = kfp_backend.Bucket('gs://b/', str(bucket_dir), str(tmp_path),
                             directory_markers=False)
  plain.download('model', uri, str(tmp_path / 'pod2'))
  assert (tmp_path / 'pod2/gcs/b/r/T/model/Format-Serving/saved_model.pb'
          ).read_text() == 'm'


def test_kfp_launcher_uploads_a_local_output_without_markers(tmp_path):
  bucket = kfp_backend.Bucket('gs://b/', str(tmp_path / 'bucket'),
                              str(tmp_path))
  pod = str(tmp_path / 'pod')
  uri = 'gs://b/r/T/model'
  assert kfp_backend.local_path_for_uri(uri, pod) == f'{pod}/gcs/b/r/T/model'
  assert not bucket.upload(uri, pod)  # nothing written: allowed
  local = tmp_path / 'pod/gcs/b/r/T/model/Format-Serving/variables'
  local.mkdir(parents=True)
  (local / 'v.index').write_text('i')
  assert bucket.upload(uri, pod)
  assert bucket.objects(uri) == ['Format-Serving/variables/v.index']
  bucket.download('model', uri, str(tmp_path / 'pod2'))
  assert (tmp_path / 'pod2/gcs/b/r/T/model/Format-Serving/variables/v.index'
          ).read_text() == 'i'
  with pytest.raises(kfp_backend.LauncherError,
                     match='unsupported storage scheme'):
    kfp_backend.local_path_for_uri('file:///x', pod)
