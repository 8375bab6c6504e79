"""`run --model hub` on a TF Hub-style BERT SavedModel: its own WordPiece
tokenizer through the whole pipeline, and the exported model on raw text.

The encoder is tests/support/tiny_encoder.py (it accepts any ids) with a
real vocabulary, MiniLM's, as assets/vocab.txt: what is checked here is the
tokenizer's way through the pipeline (preflight, Transform, Trainer, export,
serving), not a pretrained network.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import run_cli
from tfx_autostrategy.modeling import pretrained_dir

from support import tiny_encoder

SERVE = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    if sys.argv[2] == 'with_text':
      import tensorflow_text  # registers the tokenizer ops
    model = tf.saved_model.load(sys.argv[1])
    examples = [tf.train.Example(features=tf.train.Features(feature={
        'comment_text': tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[text.encode()]))})).SerializeToString()
                for text in ['Hello, World!', '']]
    features = model.signatures['transform_features'](
        examples=tf.constant(examples))
    served = model.signatures['serving_default'](examples=tf.constant(examples))
    print(json.dumps({
        'ids': features['text_ids'].numpy().tolist(),
        'mask': features['text_mask'].numpy().tolist(),
        'probabilities': served['probabilities'].numpy().tolist()}))
""")


def _serve(model_dir, mode):
  return subprocess.run([sys.executable, '-c', SERVE, model_dir, mode],
                        capture_output=True, text=True, timeout=300,
                        check=False)


@pytest.mark.e2e
@pytest.mark.slow
def test_tf_hub_bert_savedmodel_tokenizes_with_its_vocabulary(
    minilm_dir, tmp_path):
  encoder = tiny_encoder.save(str(tmp_path / 'bert_en_uncased'))
  os.makedirs(os.path.join(encoder, 'assets'), exist_ok=True)
  vocabulary = pretrained_dir.vocabulary(
      os.path.join(minilm_dir, 'tokenizer.json'))
  with open(os.path.join(encoder, 'assets', 'vocab.txt'), 'w',
            encoding='utf-8') as handle:
    handle.write('\n'.join(vocabulary) + '\n')
  data = str(tmp_path / 'data')
  subprocess.run([sys.executable, '-m', 'tfx_autostrategy.sample_data',
                  '--rows', '400', '--seed', '3', '--output', data],
                 check=True)
  output = str(tmp_path / 'out')
  proc = run_cli(
      'run', '--data', data, '--output', output, '--model', 'hub',
      '--hub-model-path', encoder, '--epochs', '1',
      '--per-replica-batch-size', '16', '--auc-threshold', '0', '--json')
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert '--sequence-length auto -> ' in proc.stdout
  line = next(l for l in proc.stdout.splitlines() if l.startswith('lengths:'))
  assert ' tokens (95th percentile ' in line, line
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  length = result['text_lengths']['sequence_length']
  assert length % 8 == 0 and 8 <= length <= 512
  with open(os.path.join(output, 'summary.json'), encoding='utf-8') as handle:
    assert json.load(handle)['text_lengths']['sequence_length']['auto']
  served = _serve(result['pushed_model'], 'with_text')
  assert served.returncode == 0, served.stderr[-3000:]
  out = json.loads(served.stdout.strip().splitlines()[-1])
  # [CLS] hello , world ! [SEP] in bert-base-uncased ids, then [PAD].
  assert out['ids'][0] == [101, 7592, 1010, 2088, 999, 102] + [0] * (
      length - 6)
  assert out['ids'][1] == [101, 102] + [0] * (length - 2)
  assert out['mask'][0] == [1] * 6 + [0] * (length - 6)
  assert all(0.0 <= p <= 1.0 for p in out['probabilities'])
  # A serving process must import tensorflow_text (README, Serving).
  bare = _serve(result['pushed_model'], 'without_text')
  assert bare.returncode != 0
  assert "Op type not registered 'NormalizeUTF8'" in bare.stderr
