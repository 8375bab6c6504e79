"""`compile` with `run`'s data options: the user's columns reach every step.

One Vertex AI compile with renamed columns and non-default text settings,
parsed with KFP's protos: the schema the pipeline writes (InlineSchemaGen's
parameter), Transform's and the Trainer's text settings and the Evaluator's
label key and slice come from the options. Bad options fail through the real
CLI with exit 2.
"""

import json

from google.protobuf import json_format
from google.protobuf import text_format
import pytest
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.utils import import_utils

from conftest import run_cli
from test_compile import class_path
from test_compile import compile_and_parse
from test_compile import executor_of
from test_compile import options
from tfx_autostrategy.components.inline_schema import component
from tfx_autostrategy.kubeflow import compiler
from tfx_autostrategy.pipeline import pipeline as pipeline_lib
from tfx_autostrategy import settings

RENAMED = settings.TextSettings(
    text_column='body', label_column='is_bad', id_column='row_id',
    slice_column='language', sequence_length=48, char_ngram_length=256,
    vocab_size=5000, tokenizer='sentencepiece',
    sentencepiece_model='gs://bucket/spm/model.model')


@pytest.fixture(scope='module')
def renamed(tmp_path_factory):
  """(PipelineSpec, {task: {parameter: value}}) of the renamed compile."""
  path = tmp_path_factory.mktemp('renamed') / 'p.json'
  _, _, spec = compile_and_parse(options(text=RENAMED, id_type='int'), path)
  parameters = {
      task: {key: json_format.MessageToDict(value.runtime_value.constant)
             for key, value in spec.root.dag.tasks[task].inputs.parameters
             .items()}
      for task in spec.root.dag.tasks}
  return spec, parameters


def test_the_pipeline_writes_a_schema_with_the_users_columns(renamed):
  spec, parameters = renamed
  schema = text_format.Parse(
      parameters[pipeline_lib.SCHEMA_GEN]['schema_text'], schema_pb2.Schema())
  assert [(f.name, schema_pb2.FeatureType.Name(f.type))
          for f in schema.feature] == [
              ('row_id', 'INT'), ('body', 'BYTES'), ('is_bad', 'INT'),
              ('language', 'BYTES')]
  # The container imports the executor from the installed package.
  path = class_path(executor_of(spec, pipeline_lib.SCHEMA_GEN).container)
  assert path == ('tfx_autostrategy.components.inline_schema.component.'
                  'InlineSchemaGen_Executor')
  assert import_utils.import_class_by_path(path) is (
      component.InlineSchemaGen.EXECUTOR_SPEC.executor_class)


def test_transform_and_trainer_get_the_text_settings(renamed):
  _, parameters = renamed
  transform_config = json.loads(
      parameters[pipeline_lib.TRANSFORM]['custom_config'])
  assert settings.from_json(settings.TextSettings,
                            transform_config['text']) == RENAMED
  assert settings.from_json(
      settings.TextSettings,
      parameters[pipeline_lib.TRAINER]['text_settings']) == RENAMED


def test_evaluator_reads_the_label_and_slices_by_the_slice_column(renamed):
  _, parameters = renamed
  eval_config = json.loads(parameters[pipeline_lib.EVALUATOR]['eval_config'])
  assert [spec['label_key'] for spec in eval_config['model_specs']] == [
      'is_bad']
  assert [spec.get('feature_keys', []) for spec in
          eval_config['slicing_specs']] == [[], ['language']]


def test_a_local_schema_file_is_compiled_in_as_it_is(tmp_path):
  schema_file = tmp_path / 'schema.pbtxt'
  schema_file.write_text('feature { name: "t" type: BYTES }\n'
                         'feature { name: "y" type: INT }\n')
  assert compiler.schema_text(options(schema_file=str(schema_file))) == (
      schema_file.read_text())
  schema_file.write_text('feature { nme: "t" }\n')
  with pytest.raises(ValueError, match=rf'^{schema_file}: not a text-format '
                     'tensorflow_metadata Schema: .*nme'):
    compiler.schema_text(options(schema_file=str(schema_file)))


@pytest.mark.parametrize('overrides,match', [
    ({'text': settings.TextSettings(text_column='')},
     '--text-column must name a column, got an empty name'),
    ({'text': settings.TextSettings(label_column='comment_text')},
     "--text-column and --label-column both name column 'comment_text'"),
    ({'text': settings.TextSettings(slice_column='id')},
     "--id-column and --slice-column both name column 'id'"),
    ({'text': settings.TextSettings(tokenizer='sentencepiece',
                                    sentencepiece_model='/home/me/sp.model')},
     "--sentencepiece-model must be a remote URI .* '/home/me/sp.model'"),
    ({'id_type': 'float'}, "--id-type must be one of string, int, got 'float'"),
    ({'schema_file': 'gs://bucket/schema.pbtxt'},
     '--schema gs://bucket/schema.pbtxt: no such local file'),
])
def test_bad_data_options_are_rejected(overrides, match):
  with pytest.raises(ValueError, match=match):
    options(**overrides)


ARGS = ('compile', '--pipeline-root', 'gs://bucket/root', '--image',
        'gcr.io/proj/autostrategy:1', '--data', 'gs://bucket/data',
        '--project', 'proj', '--region', 'us-central1',
        # gs://bucket is not readable here: auto lengths would need it.
        '--sequence-length', '64', '--char-ngram-length', '512')


@pytest.mark.parametrize('args,message', [
    (('--target', 'vertex', '--label-column', 'body', '--text-column', 'body'),
     "error: --text-column and --label-column both name column 'body': each "
     'must be a different column\n'),
    (('--target', 'vertex', '--sequence-length', '0'),
     'error: sequence_length must be >= 1, got 0\n'),
    (('--target', 'vertex', '--job-timeout', '0'),
     "error: --job-timeout '0': expected a positive duration: seconds, or a "
     'number followed by s, m, h or d (e.g. 3600, 90m, 24h, 7d)\n'),
    (('--target', 'kubeflow', '--spot', '--job-timeout', '1h'),
     'error: --spot, --job-timeout: Vertex AI training job options, '
     'meaningless for --target kubeflow'),
])
def test_bad_values_exit_2_through_the_cli(tmp_path, args, message):
  output = tmp_path / 'p.json'
  proc = run_cli(*ARGS, *args, '--output', str(output), timeout=600)
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert message in proc.stderr, proc.stderr
  assert not output.exists()
