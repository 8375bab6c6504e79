"""The fine-tuning head and recipe of `--model hub` (models.build_hub)."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from support import tiny_checkpoint

from tfx_autostrategy.distribute import distribution_plan
from tfx_autostrategy.modeling import models
from tfx_autostrategy import settings as settings_lib


def test_warmup_then_linear_decay():
  schedule = models.WarmupLinearDecay(1e-4, total_steps=100, warmup_steps=10)
  values = [float(schedule(step)) for step in (0, 5, 10, 55, 100, 120)]
  np.testing.assert_allclose(values, [0.0, 5e-5, 1e-4, 5e-5, 0.0, 0.0],
                             atol=1e-12)


def test_default_learning_rates():
  hub = settings_lib.TrainerSettings(model='hub', hub_model_path='x')
  assert models.learning_rate_for(hub) == 3e-5
  assert models.learning_rate_for(settings_lib.TrainerSettings()) == 2e-3
  assert models.learning_rate_for(
      settings_lib.TrainerSettings(learning_rate=1e-4)) == 1e-4
  with pytest.raises(ValueError, match='learning_rate must be >= 0'):
    settings_lib.TrainerSettings(learning_rate=-1.0)


def test_adamw_decays_matrices_and_embeddings_not_layer_norms_or_biases():
  names = ['layer_0/query/kernel', 'embeddings/word', 'layer_0/query/bias',
           'embeddings/layer_norm/gamma', 'layer_0/output_layer_norm/beta']
  variables = [tf.Variable(tf.fill([3], 2.0), name=n) for n in names]
  optimizer = models.fine_tuning_optimizer(0.1, decay_steps=0)
  # A zero gradient moves nothing but the weight decay: w -= w * lr * decay.
  optimizer.apply_gradients([(tf.zeros([3]), v) for v in variables])
  after = {n: float(v[0]) for n, v in zip(names, variables)}
  assert after == pytest.approx({
      'layer_0/query/kernel': 2.0 * (1 - 0.1 * 0.01),
      'embeddings/word': 2.0 * (1 - 0.1 * 0.01),
      'layer_0/query/bias': 2.0,
      'embeddings/layer_norm/gamma': 2.0,
      'layer_0/output_layer_norm/beta': 2.0}, abs=1e-7)


LENGTH = 8


def _data(n, seed=0):
  """BERT-style rows: [CLS]=2 pieces [SEP]=3, padding 0; label: has id 5."""
  rng = np.random.default_rng(seed)
  ids = np.zeros([n, LENGTH], np.int64)
  mask = np.zeros_like(ids)
  for row in range(n):
    real = rng.integers(1, LENGTH - 1)
    ids[row, 0] = 2
    ids[row, 1:real + 1] = rng.integers(4, 12, size=real)
    ids[row, real + 1] = 3
    mask[row, :real + 2] = 1
  label = (ids == 5).any(axis=1).astype(np.int64)
  return {settings_lib.TEXT_IDS: ids, settings_lib.TEXT_MASK: mask,
          settings_lib.TEXT_TYPE_IDS: np.zeros_like(ids)}, label


def _separable_data(n, seed=0):
  """Rows of the same layout whose label is which ids fill them: 4-6 or 9-11.

  A signal the tiny random encoder can pick up within a few epochs (whether
  a row holds one id 5 it could not, reliably, in 6); the loss must fall far
  below chance (ln 2) to show the encoder's tokens reach the classifier.
  """
  rng = np.random.default_rng(seed)
  ids = np.zeros([n, LENGTH], np.int64)
  mask = np.zeros_like(ids)
  label = rng.integers(0, 2, size=n)
  for row in range(n):
    real = rng.integers(1, LENGTH - 1)
    ids[row, 0] = 2
    ids[row, 1:real + 1] = rng.choice((4, 5, 6) if label[row] else (9, 10, 11),
                                      size=real)
    ids[row, real + 1] = 3
    mask[row, :real + 2] = 1
  return {settings_lib.TEXT_IDS: ids, settings_lib.TEXT_MASK: mask,
          settings_lib.TEXT_TYPE_IDS: np.zeros_like(ids)}, label.astype(
              np.int64)


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
  root = str(tmp_path_factory.mktemp('tiny_bert'))
  tiny_checkpoint.write(root, 'bert')
  return root


def _settings(checkpoint, learning_rate=0.0):
  text = settings_lib.TextSettings(
      sequence_length=LENGTH, tokenizer='pretrained',
      pretrained_model=checkpoint, char_ngram_min=0)
  trainer = settings_lib.TrainerSettings(
      model='hub', hub_model_path=checkpoint, learning_rate=learning_rate)
  return text, trainer


@pytest.mark.slow
def test_the_head_reads_the_real_tokens_and_fine_tunes(checkpoint, tmp_path,
                                                       monkeypatch):
  monkeypatch.setenv('AUTOSTRATEGY_ENCODER_CACHE', str(tmp_path))
  text, trainer = _settings(checkpoint, learning_rate=1e-2)
  model = models.build(text, trainer)
  assert sorted(model.input_names) == sorted(
      [settings_lib.TEXT_IDS, settings_lib.TEXT_MASK,
       settings_lib.TEXT_TYPE_IDS])
  # The encoder's 2 x 16 layer tensors, 5 embedding ones, the pooler's 2 and
  # the classifier's kernel and bias are all trained.
  assert len(model.trainable_weights) == 2 * 16 + 5 + 2 + 2
  features, label = _separable_data(256)
  steps = 6 * 256 // 32
  models.compile_model(model, trainer, steps_per_execution=1,
                       decay_steps=steps)
  assert isinstance(model.optimizer, tf.keras.optimizers.AdamW)
  history = model.fit(features, label, batch_size=32, epochs=6, verbose=0)
  # Nothing is seeded: in 10 runs the last epoch's loss was 0.05-0.21, the
  # first's 0.62-0.91 (chance: ln 2 = 0.69).
  losses = history.history['loss']
  assert losses[-1] < 0.45 and losses[-1] < losses[0], losses
  # Padding is masked by the real length: other ids there change nothing.
  sample = {k: v[:16] for k, v in features.items()}
  noisy = dict(sample)
  noisy[settings_lib.TEXT_IDS] = np.where(
      sample[settings_lib.TEXT_MASK] == 1, sample[settings_lib.TEXT_IDS], 7)
  np.testing.assert_allclose(model.predict(sample, verbose=0),
                             model.predict(noisy, verbose=0), atol=1e-5)
  # ... while the real tokens do.
  shifted = dict(sample)
  shifted[settings_lib.TEXT_IDS] = np.where(
      sample[settings_lib.TEXT_MASK] == 1, 5, 0)
  assert np.abs(model.predict(sample, verbose=0) -
                model.predict(shifted, verbose=0)).max() > 1e-3


@pytest.mark.slow
def test_xla_train_step_under_mixed_bfloat16(checkpoint, tmp_path,
                                             monkeypatch):
  """What the TPU plan does: bfloat16 compute, the train step under XLA."""
  monkeypatch.setenv('AUTOSTRATEGY_ENCODER_CACHE', str(tmp_path))
  text, trainer = _settings(checkpoint)
  distribution_plan.apply_precision('mixed_bfloat16')
  try:
    model = models.build(text, trainer)
    models.compile_model(model, trainer, steps_per_execution=2,
                         decay_steps=4, jit_compile=True)
    features, label = _data(64)
    history = model.fit(features, label, batch_size=16, epochs=1, verbose=0)
    out = model.predict({k: v[:4] for k, v in features.items()}, verbose=0)
  finally:
    distribution_plan.apply_precision('float32')
  assert np.isfinite(history.history['loss'][0])
  assert out.dtype == np.float32 and np.isfinite(out).all()
  # The encoder was converted for bfloat16 (cached beside the float32 one).
  assert any(name.endswith('-mixed_bfloat16-v2')
             for name in tf.io.gfile.listdir(str(tmp_path)))


@pytest.mark.parametrize('mode', ['mean', 'cls', 'max', 'mean_sqrt_len'])
def test_the_head_reads_the_pooling_the_checkpoint_declares(
    checkpoint, mode, tmp_path, monkeypatch):
  """sentence-transformers' modules.json + Pooling config: that summary of
  the token states feeds the classifier, computed over the real tokens."""
  monkeypatch.setenv('AUTOSTRATEGY_ENCODER_CACHE', str(tmp_path / 'cache'))
  declared = str(tmp_path / 'declared')
  shutil.copytree(checkpoint, declared)
  with open(os.path.join(declared, 'modules.json'), 'w') as f:
    json.dump([{'idx': 0, 'name': '0', 'path': '',
                'type': 'sentence_transformers.models.Transformer'},
               {'idx': 1, 'name': '1', 'path': '1_Pooling',
                'type': 'sentence_transformers.models.Pooling'}], f)
  os.makedirs(os.path.join(declared, '1_Pooling'))
  with open(os.path.join(declared, '1_Pooling', 'config.json'), 'w') as f:
    json.dump({f'pooling_mode_{key}': key == {
        'mean': 'mean_tokens', 'cls': 'cls_token', 'max': 'max_tokens',
        'mean_sqrt_len': 'mean_sqrt_len_tokens'}[mode]
               for key in ('cls_token', 'mean_tokens', 'max_tokens',
                           'mean_sqrt_len_tokens')}, f)
  model = models.build(*_settings(declared))
  assert model.get_layer(f'{mode}_pooling') is not None
  features, _ = _data(6, seed=1)
  states = model.get_layer('encoder')(
      {'input_word_ids': tf.constant(features[settings_lib.TEXT_IDS], tf.int32),
       'input_mask': tf.constant(features[settings_lib.TEXT_MASK], tf.int32),
       'input_type_ids': tf.zeros([6, LENGTH], tf.int32)},
      training=False)['sequence_output'].numpy()
  mask = features[settings_lib.TEXT_MASK].astype(bool)
  expected = []
  for row in range(6):
    real = states[row][mask[row]]  # The real tokens' states, in NumPy.
    expected.append({'mean': real.mean(0), 'cls': states[row, 0],
                     'max': real.max(0),
                     'mean_sqrt_len': real.sum(0) / np.sqrt(len(real))}[mode])
  kernel, bias = model.get_layer('probability').get_weights()
  logits = np.stack(expected) @ kernel[:, 0] + bias[0]
  np.testing.assert_allclose(model.predict(features, verbose=0)[:, 0],
                             1 / (1 + np.exp(-logits)), rtol=1e-4, atol=1e-5)
