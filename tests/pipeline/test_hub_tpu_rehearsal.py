"""`autostrategy rehearse --machine tpu-v3-8 --model hub` on a real checkpoint.

The TPU path of a pretrained encoder: the Trainer's executor under the
tpu-v3-8 plan (8 logical CPU replicas standing in for the TPU cores,
`mixed_bfloat16`, the train step compiled with XLA), fit, export, and the
exported model serving raw text, with sentence-transformers/all-MiniLM-L6-v2
(the `minilm_dir` fixture) cut to its first layer
(`scripts/pretrained_checkpoints.py` `truncate`: the real embeddings, first
layer and pooler, byte for byte, config.json saying 1 layer, the original
tokenizer and pooling files). The whole 6-layer network did not finish XLA
compilation of its train step on this 2-core CPU in 10 minutes; one layer
compiles in about a minute. The first test shows the truncated copy is the
real network's first layer (its hidden states equal an independent NumPy
forward pass of the full checkpoint's tensors stopped after layer 0), not a
random one.

Upstream: `autostrategy run --model hub` on 128 train and 64 eval rows of
the film-review snippets of bench/QUALITY.md at `--sequence-length 16`, for
the Transform output tokenised with the checkpoint's own WordPiece.

Measured 2026-12-07 15:41-16:09 UTC (`pytest -n 0
tests/pipeline/test_hub_tpu_rehearsal.py`, 4 passed): 27.5 minutes of wall
time on the 2 shared cores at load average 4-10 (other sessions' rehearsals
ran beside it), 7.9 minutes of CPU time: the run 10 minutes, the rehearsal
16 (XLA compiling the bfloat16 train step and running its 32 steps 7, the
first replicated step with its tracing on 8 devices 5.7), serving 46 s, the
truncation check 33 s (largest hidden-state difference 9.6e-7). It is over
the 5 minutes wanted for `make test` at that load; alone, 2 cores would
give it about its CPU time, ~8 minutes (not measured). Hence `slow`.
"""

import json
import math
import os
import sys

import numpy as np
import pytest

from conftest import run_cli
from scripts import pretrained_checkpoints
from test_hub_e2e import _serve
from test_hub_e2e import _slice

from support import bert_reference

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LAYERS = 1
TRAIN_ROWS = 128
EVAL_ROWS = 64
SEQUENCE_LENGTH = 16
# 8 per core: the TPU tiling rule (a multiple of 8 examples per core).
PER_REPLICA_BATCH = 8
STEPS = 2  # One per epoch of the rehearsal's two.


@pytest.fixture(scope='module')
def truncated(minilm_dir, tmp_path_factory):
  return pretrained_checkpoints.truncate(
      minilm_dir, str(tmp_path_factory.mktemp('trunc') / f'MiniLM-L{LAYERS}'),
      LAYERS)


@pytest.fixture(scope='module')
def rehearsal(truncated, tmp_path_factory):
  """The run that makes the Transform output, then the TPU rehearsal."""
  root = tmp_path_factory.mktemp('hub_tpu')
  full = root / 'full'
  scripts = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir,
                         'scripts')
  import subprocess  # pylint: disable=g-import-not-at-top
  subprocess.run([sys.executable, os.path.join(scripts, 'fetch_real_data.py'),
                  '--output', str(full), '--only', 'rotten_tomatoes',
                  '--downloads', pretrained_checkpoints.default_downloads()],
                 check=True, capture_output=True)
  data = root / 'data'
  for split, rows in (('train', TRAIN_ROWS), ('eval', EVAL_ROWS)):
    _slice(full / 'rotten_tomatoes' / split / 'data.csv',
           str(data / split / 'data.csv'), rows)
  env = dict(os.environ, AUTOSTRATEGY_ENCODER_CACHE=str(root / 'encoders'))
  output = str(root / 'out')
  proc = run_cli('run', '--data', str(data), '--output', output,
                 '--model', 'hub', '--hub-model-path', truncated,
                 '--sequence-length', str(SEQUENCE_LENGTH), '--epochs', '1',
                 '--per-replica-batch-size', str(PER_REPLICA_BATCH),
                 '--auc-threshold', '0', '--json', env=env, timeout=1200)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  proc = run_cli('rehearse', '--machine', 'tpu-v3-8', '--model', 'hub',
                 '--hub-model-path', truncated, '--output', output,
                 '--steps', str(STEPS),
                 '--per-replica-batch-size', str(PER_REPLICA_BATCH),
                 '--json', env=env, timeout=1800)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  print(proc.stdout[-2500:])
  return json.loads(proc.stdout.strip().splitlines()[-1]), root


def test_the_truncated_copy_is_the_real_first_layer(minilm_dir, truncated,
                                                    tmp_path):
  from tfx_autostrategy.modeling import hf_checkpoint  # pylint: disable=g-import-not-at-top
  with open(os.path.join(truncated, 'config.json')) as f:
    config = json.load(f)
  assert config['num_hidden_layers'] == LAYERS
  full = bert_reference.read_safetensors(
      os.path.join(minilm_dir, 'model.safetensors'))
  kept = bert_reference.read_safetensors(
      os.path.join(truncated, 'model.safetensors'))
  # 6 embedding tensors (the position_ids buffer included), 16 per layer,
  # the pooler's 2.
  assert len(full) == 6 + 16 * 6 + 2 and len(kept) == 6 + 16 * LAYERS + 2
  for name, value in kept.items():
    assert np.array_equal(value, full[name]), name
  texts = ['The weather is lovely today.', 'a gorgeous, witty, seductive '
           'movie.', 'Crème brûlée in Zürich — 東京 and Москва!']
  ids, mask = bert_reference.token_ids(minilm_dir, texts)
  types = np.zeros_like(ids)
  # The converted truncated checkpoint, through the Trainer's converter...
  sequence, pooled = bert_reference.run_encoder(
      hf_checkpoint.export(truncated, str(tmp_path / 'encoder')), ids, mask,
      types)
  # ... against NumPy on the FULL checkpoint's tensors, stopped after the
  # first layer.
  want_sequence, want_pooled = bert_reference.forward(
      full, dict(config, num_hidden_layers=LAYERS), ids, mask, types)
  real = mask.astype(bool)
  largest = np.abs(sequence - want_sequence)[real].max()
  print(f'largest hidden-state difference, {LAYERS} layer(s): {largest:.2e}')
  assert sequence.shape == (3, ids.shape[1], 384)
  assert largest < 1e-4
  assert np.abs(pooled - want_pooled).max() < 1e-4
  # And it is the first layer, not the whole network: the 6 layers end
  # elsewhere.
  six, _ = bert_reference.forward(
      full, dict(config, num_hidden_layers=6), ids, mask, types)
  assert np.abs(six - want_sequence)[real].max() > 1.0


def test_rehearsal_plans_the_tpu_and_compiles_under_bfloat16(rehearsal):
  summary, _ = rehearsal
  expected = dict(accelerator='tpu-v3-8', kind='tpu',
                  strategy='TPUStrategy', num_replicas=8,
                  per_replica_batch_size=PER_REPLICA_BATCH,
                  global_batch_size=8 * PER_REPLICA_BATCH,
                  precision='mixed_bfloat16', jit_compile=True,
                  steps_trained=STEPS, serves=True, workers=1)
  assert {key: summary[key] for key in expected} == expected
  assert ('TPUStrategy over 8 TPU cores -> MirroredStrategy over 8 logical '
          'CPU devices') in summary['stand_ins']
  run_dir = os.path.dirname(os.path.dirname(summary['exported_model']))
  with open(os.path.join(run_dir, 'worker-0.log')) as f:
    log = f.read()
  # The chief compiled the bfloat16 train step with XLA and ran it.
  assert ('autostrategy: the train step compiled with XLA and ran '
          f'{summary["steps_per_execution"]} step(s) on one device') in log
  # It converted the checkpoint for the bfloat16 policy, with its pooling.
  [converted] = [name for name in os.listdir(rehearsal[1] / 'encoders')
                 if name.endswith('-mixed_bfloat16-v2')]
  assert os.path.exists(rehearsal[1] / 'encoders' / converted / 'modules.json')


def test_rehearsal_fit_ran_with_a_finite_loss(rehearsal):
  summary, _ = rehearsal
  run_dir = os.path.dirname(os.path.dirname(summary['exported_model']))
  with open(os.path.join(run_dir, 'model_run', 'history.json')) as f:
    history = json.load(f)
  assert len(history) == 2  # the rehearsal's two epochs, one step each
  losses = [epoch['loss'] for epoch in history]
  assert all(math.isfinite(loss) and 0.0 < loss < 5.0 for loss in losses)


def test_the_rehearsed_model_serves_raw_text(rehearsal):
  summary, _ = rehearsal
  assert len(summary['probabilities']) == 3
  assert all(0.0 <= p <= 1.0 for p in summary['probabilities'])
  # In a fresh process without this package: accented, CJK, Cyrillic,
  # empty and over-long texts too.
  served = _serve(summary['exported_model'])
  assert served['dtype'] == 'float32'
  values = served['values']
  assert len(values) == 4 and all(0.0 <= v <= 1.0 for v in values)
  # The encoder reads the tokens: different texts, different scores.
  assert len({round(v, 7) for v in values}) == 4
  # The layer's 16 tensors, 5 embedding ones, the pooler's 2 (kept, unused
  # by the mean-pooled head) and the classifier's 2.
  assert served['variables'] >= 16 * LAYERS + 5 + 2 + 2
