"""`--model hub` on a real Hugging Face checkpoint, end to end, via the CLI.

sentence-transformers/all-MiniLM-L6-v2 (the `minilm_dir` fixture): the
pipeline tokenises with its tokenizer, the Trainer converts its safetensors
into a SavedModel encoder and fine-tunes it, the pushed model serves raw
text. A small slice and one epoch: the learning itself belongs on real data
(bench/QUALITY.md). The TPU path (mixed_bfloat16, the train step under XLA)
is checked on a tiny checkpoint in tests/components/test_fine_tuning.py:
XLA on CPU did not finish compiling MiniLM's train step in 10 minutes here.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROWS = 300
LENGTH = 32

SERVE = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # the WordPiece ops of the Transform graph
    assert 'tfx_autostrategy' not in sys.modules
    model = tf.saved_model.load(sys.argv[1])
    texts = ['you are a stupid idiot', 'thank you for the kind help', '',
             'Crème brûlée à Zürich, 東京, Москва! ' * 20]
    examples = [tf.train.Example(features=tf.train.Features(feature={
        'comment_text': tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[t.encode()]))})).SerializeToString() for t in texts]
    out = model.signatures['serving_default'](examples=tf.constant(examples))
    print(json.dumps({'values': out['probabilities'].numpy().tolist(),
                      'dtype': out['probabilities'].dtype.name,
                      'variables': len(model.variables)}))
""")


def _serve(model_dir):
  proc = subprocess.run([sys.executable, '-c', SERVE, model_dir],
                        capture_output=True, text=True, timeout=600,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope='module')
def hub_run(minilm_dir, tmp_path_factory):
  root = tmp_path_factory.mktemp('hub_e2e')
  data = root / 'data'
  subprocess.run([sys.executable, '-m', 'tfx_autostrategy.sample_data',
                  '--rows', str(ROWS), '--seed', '7', '--output', str(data)],
                 check=True, capture_output=True)
  env = dict(os.environ, AUTOSTRATEGY_ENCODER_CACHE=str(root / 'encoders'))
  output = str(root / 'out')
  proc = run_cli('run', '--data', str(data), '--output', output,
                 '--model', 'hub', '--hub-model-path', minilm_dir,
                 '--epochs', '1', '--sequence-length', str(LENGTH),
                 '--per-replica-batch-size', '16', '--auc-threshold', '0',
                 '--json', env=env, timeout=1800)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1]), output, env, root


def test_run_fine_tunes_the_checkpoint_and_serves_raw_text(hub_run):
  summary, _, _, root = hub_run
  assert summary['text_lengths']['sequence_length'] == LENGTH
  # The Trainer converted the checkpoint once, into the cache.
  [converted] = os.listdir(root / 'encoders')
  assert converted.endswith('-float32-v1')
  served = _serve(summary['pushed_model'])
  assert served['dtype'] == 'float32'
  values = served['values']
  assert len(values) == 4 and all(0.0 <= v <= 1.0 for v in values)
  # Different texts (empty and over-long ones included) get different
  # scores from the encoder: it reads the tokens.
  assert len({round(v, 6) for v in values}) == 4
  # MiniLM-L6's 103 tensors, the classifier's 2, AdamW's state is not
  # exported; the Transform adds its own (vocabulary tables are not
  # variables).
  assert served['variables'] >= 103 + 2


def test_rehearse_refuses_an_encoder_the_transform_did_not_tokenise_for(
    hub_run, tmp_path):
  _, output, env, _ = hub_run
  proc = run_cli('rehearse', '--accelerator', 'tpu-v3-8', '--model', 'hub',
                 '--output', output, '--hub-model-path', str(tmp_path),
                 env=env, timeout=600)
  assert proc.returncode == 2
  assert 'is not the checkpoint the Transform output' in proc.stderr
