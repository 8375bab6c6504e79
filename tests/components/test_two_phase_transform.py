"""A user's two-phase `preprocessing_fn` through TFX's own Transform component.

`tft.tfidf` over `tft.compute_and_apply_vocabulary` needs two analysis
phases (the document frequencies are counted over the vocabulary's ids), and
TFX's Transform executor always runs them with the deep-copy optimisation.
Under apache-beam 2.74 (the lock before issue 32) this failed inside Beam with
`TypeError: AppliedPTransform.__init__() missing 2 required positional
arguments: 'environment_id' and 'annotations'`; on TFX 1.16's tested set
(Beam 2.59) it runs. Nothing here is ours but the module file: CsvExampleGen,
ImportSchemaGen and Transform run in `LocalDagRunner` with a SQLite MLMD store
on Beam's DirectRunner, and the weights are checked against values computed
by hand below.
"""

import glob
import math
import os
import textwrap

import pytest
import tensorflow as tf
from tfx import v1 as tfx

# Four training documents; the vocabulary's frequencies are all different
# (a: 5, b: 3, c: 2, d: 1), so its order is fixed: a=0, b=1, c=2, d=3.
TRAIN = ['a a b', 'a b c', 'a c d', 'a b']
EVAL = ['d d x']

# Smoothed IDF, ln((1 + N) / (1 + df)) + 1 with N = 4 documents:
# df(a) = 4, df(b) = 3, df(c) = 2, df(d) = 1.
IDF = {'a': 1.0, 'b': math.log(5 / 4) + 1, 'c': math.log(5 / 3) + 1,
       'd': math.log(5 / 2) + 1}
# tft.tfidf's term frequency is count / document length.
EXPECTED_TRAIN = [
    {'a': 2 / 3 * IDF['a'], 'b': 1 / 3 * IDF['b']},
    {'a': 1 / 3 * IDF['a'], 'b': 1 / 3 * IDF['b'], 'c': 1 / 3 * IDF['c']},
    {'a': 1 / 3 * IDF['a'], 'c': 1 / 3 * IDF['c'], 'd': 1 / 3 * IDF['d']},
    {'a': 1 / 2 * IDF['a'], 'b': 1 / 2 * IDF['b']},
]

MODULE = textwrap.dedent('''
    import tensorflow as tf
    import tensorflow_transform as tft

    VOCAB_SIZE = 4

    def preprocessing_fn(inputs):
      text = tf.squeeze(tf.sparse.to_dense(inputs['text'], default_value=''),
                        axis=1)
      tokens = tf.strings.split(text).to_sparse()
      ids = tft.compute_and_apply_vocabulary(
          tokens, top_k=VOCAB_SIZE, num_oov_buckets=0, default_value=-1,
          vocab_filename='words')
      # Out-of-vocabulary words (-1) are dropped before tf-idf.
      ids = tf.sparse.retain(ids, tf.greater_equal(ids.values, 0))
      index, weight = tft.tfidf(ids, VOCAB_SIZE)
      return {'tfidf_index': index, 'tfidf_weight': weight}
''')

SCHEMA = textwrap.dedent('''
    feature {
      name: "text"
      type: BYTES
      presence { min_fraction: 1.0 min_count: 1 }
    }
''')


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write(text)


def _pipeline(root):
  data = os.path.join(root, 'data')
  _write(os.path.join(data, 'train', 'part-0.csv'),
         'text\n' + ''.join(f'{row}\n' for row in TRAIN))
  _write(os.path.join(data, 'eval', 'part-0.csv'),
         'text\n' + ''.join(f'{row}\n' for row in EVAL))
  module_file = os.path.join(root, 'module', 'two_phase_preprocessing.py')
  _write(module_file, MODULE)
  schema_file = os.path.join(root, 'schema', 'schema.pbtxt')
  _write(schema_file, SCHEMA)

  example_gen = tfx.components.CsvExampleGen(
      input_base=data,
      input_config=tfx.proto.Input(splits=[
          tfx.proto.Input.Split(name='train', pattern='train/*'),
          tfx.proto.Input.Split(name='eval', pattern='eval/*')]))
  schema_gen = tfx.components.ImportSchemaGen(schema_file=schema_file)
  transform = tfx.components.Transform(
      examples=example_gen.outputs['examples'],
      schema=schema_gen.outputs['schema'],
      module_file=module_file)
  return tfx.dsl.Pipeline(
      pipeline_name='two-phase-transform',
      pipeline_root=os.path.join(root, 'pipeline_root'),
      components=[example_gen, schema_gen, transform],
      metadata_connection_config=(
          tfx.orchestration.metadata.sqlite_metadata_connection_config(
              os.path.join(root, 'metadata.sqlite'))),
      beam_pipeline_args=['--direct_running_mode=in_memory',
                          '--direct_num_workers=1'])


def _transformed_rows(root, split):
  pattern = os.path.join(root, 'pipeline_root', 'Transform',
                         'transformed_examples', '*', f'Split-{split}', '*.gz')
  files = sorted(glob.glob(pattern))
  assert files, pattern
  rows = []
  for record in tf.data.TFRecordDataset(files, compression_type='GZIP'):
    features = tf.train.Example.FromString(record.numpy()).features.feature
    rows.append((list(features['tfidf_index'].int64_list.value),
                 list(features['tfidf_weight'].float_list.value)))
  return rows


def _vocabulary(root):
  pattern = os.path.join(root, 'pipeline_root', 'Transform', 'transform_graph',
                         '*', 'transform_fn', 'assets', 'words')
  files = glob.glob(pattern)
  assert len(files) == 1, pattern
  with open(files[0]) as f:
    return [line.rstrip('\n') for line in f]


@pytest.mark.slow
def test_tfidf_over_a_vocabulary_runs_in_tfx_transform(tmp_path):
  root = str(tmp_path)
  tfx.orchestration.LocalDagRunner().run(_pipeline(root))

  vocabulary = _vocabulary(root)
  assert vocabulary == ['a', 'b', 'c', 'd']
  train = _transformed_rows(root, 'train')
  got = sorted(
      ({vocabulary[i]: w for i, w in zip(index, weight)}
       for index, weight in train), key=lambda row: sorted(row.items()))
  want = sorted(EXPECTED_TRAIN, key=lambda row: sorted(row.items()))
  assert len(got) == len(want) == 4
  for got_row, want_row in zip(got, want):
    assert got_row.keys() == want_row.keys()
    for term, weight in want_row.items():
      assert got_row[term] == pytest.approx(weight, rel=1e-5), (term, got_row)

  # The eval split is transformed with the training split's statistics:
  # 'x' is out of vocabulary and dropped before tf-idf, so 'd' is the
  # whole document (term frequency 2 / 2) and gets d's training IDF.
  (index, weight), = _transformed_rows(root, 'eval')
  assert [vocabulary[i] for i in index] == ['d']
  assert weight == pytest.approx([IDF['d']], rel=1e-5)
