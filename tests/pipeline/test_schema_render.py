"""The schema a run uses: rendered once, carried by InlineSchemaGen.

The local run and `autostrategy compile` render the curated schema with the
user's column names through `schema_render`; InlineSchemaGen's executor
writes that text where Transform, StatisticsGen, the validator and the
Trainer read it.
"""

import os

from google.protobuf import text_format
import pytest
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.types import standard_artifacts
from tfx.utils import io_utils

from tfx_autostrategy.components.inline_schema import component
from tfx_autostrategy.pipeline import local_runner
from tfx_autostrategy.pipeline import pipeline as pipeline_lib
from tfx_autostrategy.pipeline import schema_render
from tfx_autostrategy.preflight import csv_check
from tfx_autostrategy import settings

INT, BYTES = schema_pb2.INT, schema_pb2.BYTES
RENAMED = settings.TextSettings(text_column='body', label_column='is_bad',
                                id_column='row_id', slice_column='language')


def features(text):
  schema = text_format.Parse(text, schema_pb2.Schema())
  return [(f.name, f.type) for f in schema.feature]


@pytest.mark.parametrize('text_settings, id_is_int, expected', [
    (settings.TextSettings(), False, [
        ('id', BYTES), ('comment_text', BYTES), ('toxic', INT),
        ('lang', BYTES)]),
    (RENAMED, True, [
        ('row_id', INT), ('body', BYTES), ('is_bad', INT),
        ('language', BYTES)]),
    (settings.TextSettings(id_column='', slice_column=''), True, [
        ('comment_text', BYTES), ('toxic', INT)]),
])
def test_renders_the_curated_schema_with_the_users_columns(
    text_settings, id_is_int, expected):
  assert features(schema_render.render_schema_text(
      text_settings, id_is_int)) == expected


def test_renamed_label_keeps_the_curated_constraints():
  schema = text_format.Parse(schema_render.render_schema_text(RENAMED, False),
                             schema_pb2.Schema())
  label = next(f for f in schema.feature if f.name == 'is_bad')
  assert (label.int_domain.min, label.int_domain.max) == (0, 1)
  assert label.presence.min_fraction == 1.0


def test_local_run_writes_the_schema_it_carries(tmp_path):
  data = os.path.join(os.path.dirname(__file__), '..', 'testdata', 'csv',
                      'single')
  config = local_runner.build_config(
      data, str(tmp_path), RENAMED, settings.TrainerSettings(),
      csv_check.check_csv_dir(data))
  written = (tmp_path / 'schema' / 'schema.pbtxt').read_text()
  assert written == config.schema_text
  [schema_gen] = [c for c in pipeline_lib.create_pipeline(config).components
                  if c.id == pipeline_lib.SCHEMA_GEN]
  assert schema_gen.exec_properties == {'schema_text': written}


def run_executor(uri, text):
  schema = standard_artifacts.Schema()
  schema.uri = str(uri)
  executor = component.InlineSchemaGen.EXECUTOR_SPEC.executor_class()
  executor.Do({}, {'schema': [schema]}, {'schema_text': text})


def test_executor_writes_the_schema_where_downstream_components_read_it(
    tmp_path):
  text = schema_render.render_schema_text(RENAMED, True)
  run_executor(tmp_path / 'schema', text)
  assert os.listdir(tmp_path / 'schema') == ['schema.pbtxt']
  # TFX's reader, as Transform and the Trainer use it.
  read = io_utils.SchemaReader().read(
      io_utils.get_only_uri_in_dir(str(tmp_path / 'schema')))
  assert [(f.name, f.type) for f in read.feature] == features(text)


def test_executor_fails_on_a_text_that_is_not_a_schema(tmp_path):
  with pytest.raises(text_format.ParseError, match='featur'):
    run_executor(tmp_path / 'schema', 'featur { name: "x" }')
  assert not os.path.exists(tmp_path / 'schema' / 'schema.pbtxt')
