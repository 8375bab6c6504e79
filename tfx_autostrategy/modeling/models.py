"""Keras text classifiers over the fixed-length ids produced by Transform.

Every builder returns an uncompiled `tf.keras.Model` whose inputs are named
after the transformed features and whose output is one float32 probability
per example, whatever the mixed-precision policy: serving stays float32.
Callers build and compile inside `strategy.scope()`.
"""

from typing import Callable, Dict

import tensorflow as tf

from tfx_autostrategy.modeling import embedding_training
from tfx_autostrategy.modeling import hf_checkpoint
from tfx_autostrategy.modeling import hub_encoder
from tfx_autostrategy.modeling import pretrained_dir
from tfx_autostrategy import settings as settings_lib


# The peak learning rate when TrainerSettings.learning_rate is 0: the models
# trained from scratch take large steps; fine-tuning a pretrained encoder
# takes BERT's small ones (2e-5..5e-5), or it forgets what it knew.
DEFAULT_LEARNING_RATES = {'bow': 2e-3, 'transformer': 2e-3, 'hub': 3e-5}
# The fine-tuning recipe (BERT's): dropout before the classifier, AdamW with
# weight decay on the matrices and embeddings only, linear warm-up over the
# first 10% of the steps, then linear decay to 0.
HUB_DROPOUT = 0.1
HUB_WEIGHT_DECAY = 0.01
HUB_WARMUP_FRACTION = 0.1
# Variable-name patterns without weight decay (LayerNorm scales and offsets,
# biases).
NO_WEIGHT_DECAY = ('layer_norm', 'LayerNorm', 'bias')


def _inputs(text_settings: settings_lib.TextSettings,
            weights: bool = False) -> Dict[str, tf.keras.Input]:
  """The model's inputs; `weights` adds the n-grams' TF-IDF weights."""
  inputs = {
      settings_lib.TEXT_IDS:
          tf.keras.Input(shape=(text_settings.sequence_length,), dtype=tf.int64,
                         name=settings_lib.TEXT_IDS)
  }
  if text_settings.char_ngram_min:
    inputs[settings_lib.CHAR_NGRAMS] = tf.keras.Input(
        shape=(text_settings.char_ngram_length,), dtype=tf.int64,
        name=settings_lib.CHAR_NGRAMS)
    if weights:
      inputs[settings_lib.CHAR_NGRAM_WEIGHTS] = tf.keras.Input(
          shape=(text_settings.char_ngram_length,), dtype=tf.float32,
          name=settings_lib.CHAR_NGRAM_WEIGHTS)
  return inputs


def _probability(x: tf.Tensor) -> tf.Tensor:
  # The output layer computes in float32 so that mixed_bfloat16/float16
  # training still serves float32 probabilities.
  return tf.keras.layers.Dense(
      1, activation='sigmoid', dtype='float32', name='probability')(x)


class MaskedMean(tf.keras.layers.Layer):
  """Mean over the unmasked steps; all-padding rows (empty text) give zeros.

  Keras's GlobalAveragePooling1D divides by the mask count, which is 0 for an
  empty comment: one NaN poisons the loss and then every weight.
  """

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self.supports_masking = True

  def call(self, inputs, mask=None):
    if mask is None:
      return tf.reduce_mean(inputs, axis=1)
    weights = tf.cast(mask, inputs.dtype)[:, :, tf.newaxis]
    total = tf.reduce_sum(inputs * weights, axis=1)
    count = tf.reduce_sum(weights, axis=1)
    return total / tf.maximum(count, tf.ones_like(count))

  def compute_mask(self, inputs, mask=None):
    return None


class WeightedLinear(tf.keras.layers.Layer):
  """`scale * sum_i weight_i * coefficient[id_i]`: a linear model over TF-IDF.

  One coefficient per id, initialised at zero; with the Transform's
  L2-normalised TF-IDF weights this is the logistic regression over n-grams
  that is hard to beat on small data sets. `scale` multiplies the step the
  optimizer takes on the logit (Adam's steps do not depend on the gradient's
  size): the embedding bag's learning rate is too small for a linear model
  that starts at zero. Computes in float32 whatever the precision policy.
  """

  def __init__(self, vocab_size: int, scale: float = 10.0, **kwargs):
    kwargs.setdefault('dtype', 'float32')
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.scale = scale

  def build(self, input_shape):
    self.coefficients = self.add_weight(
        name='coefficients', shape=(self.vocab_size,), initializer='zeros')
    super().build(input_shape)

  def call(self, inputs):
    ids, weights = inputs
    picked = tf.gather(self.coefficients, ids)
    return self.scale * tf.reduce_sum(
        picked * tf.cast(weights, picked.dtype), axis=1, keepdims=True)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, scale=self.scale)
    return config


def _masked_mean(ids: tf.Tensor, vocab_size: int, dim: int, name: str,
                 dropout: float = 0.0) -> tf.Tensor:
  """Mean of the embeddings of the non-padding ids.

  `dropout` drops whole embedding channels of each example, the regulariser
  that keeps a bag of embeddings from memorising rare n-grams. The mean is
  linear, so dropping a channel at every step of the embedded sequence
  (SpatialDropout1D, the model before issue 19) is dropping it in the mean:
  the same model, with a `[batch, dim]` mask instead of one as large as the
  `[batch, length, dim]` embeddings (which halved the training rate).
  """
  embedded = tf.keras.layers.Embedding(
      vocab_size, dim, mask_zero=True, name=name + '_embedding')(ids)
  pooled = MaskedMean(name=name + '_mean')(embedded)
  if dropout:
    pooled = tf.keras.layers.Dropout(dropout, name=name + '_dropout')(pooled)
  return pooled


def build_bow(text_settings: settings_lib.TextSettings,
              trainer_settings: settings_lib.TrainerSettings) -> tf.keras.Model:
  """fastText-style bag of embeddings beside a linear model over TF-IDF.

  The deep part averages 128-d embeddings of the word ids and of the
  character n-gram ids, with heavy dropout on the averages (wide embeddings
  with heavy dropout beat narrow ones, which overfit after one or two
  epochs). The wide part (with n-grams enabled) is a linear model over the
  n-grams' TF-IDF weights; the two logits add. On the real data sets of
  bench/QUALITY.md the sum beats a TF-IDF + logistic regression baseline
  where the embedding bag alone did not (by 0.06 AUC on Chinese reviews).
  """
  del trainer_settings  # The bag-of-embeddings model has no extra settings.
  dim, dropout = 128, 0.5
  inputs = _inputs(text_settings, weights=True)
  features = [
      _masked_mean(inputs[settings_lib.TEXT_IDS],
                   text_settings.word_vocab_size, dim, 'words', dropout)
  ]
  if settings_lib.CHAR_NGRAMS in inputs:
    features.append(
        _masked_mean(inputs[settings_lib.CHAR_NGRAMS],
                     text_settings.char_vocab_size, dim, 'char_ngrams',
                     dropout))
  x = (tf.keras.layers.Concatenate()(features)
       if len(features) > 1 else features[0])
  x = tf.keras.layers.Dropout(dropout)(x)
  x = tf.keras.layers.Dense(64, activation='relu')(x)
  if settings_lib.CHAR_NGRAM_WEIGHTS not in inputs:
    return tf.keras.Model(inputs, _probability(x), name='bow')
  deep = tf.keras.layers.Dense(1, dtype='float32', name='deep_logit')(x)
  wide = WeightedLinear(text_settings.char_vocab_size, name='ngram_tfidf')(
      [inputs[settings_lib.CHAR_NGRAMS],
       inputs[settings_lib.CHAR_NGRAM_WEIGHTS]])
  logit = tf.keras.layers.Add(dtype='float32', name='logit')([deep, wide])
  probability = tf.keras.layers.Activation(
      'sigmoid', dtype='float32', name='probability')(logit)
  return tf.keras.Model(inputs, probability, name='bow')


class PositionalEmbedding(tf.keras.layers.Layer):
  """Token embedding plus a learned position embedding; 0 ids are masked."""

  def __init__(self, sequence_length: int, vocab_size: int, dim: int, **kwargs):
    super().__init__(**kwargs)
    self.sequence_length = sequence_length
    self.vocab_size = vocab_size
    self.dim = dim
    self.tokens = tf.keras.layers.Embedding(vocab_size, dim)
    self.positions = tf.keras.layers.Embedding(sequence_length, dim)

  def call(self, ids):
    positions = tf.range(self.sequence_length)
    return self.tokens(ids) + self.positions(positions)

  def compute_mask(self, ids, mask=None):
    return tf.not_equal(ids, 0)

  def get_config(self):
    config = super().get_config()
    config.update(sequence_length=self.sequence_length,
                  vocab_size=self.vocab_size, dim=self.dim)
    return config


def build_transformer(text_settings: settings_lib.TextSettings,
                      trainer_settings: settings_lib.TrainerSettings
                     ) -> tf.keras.Model:
  """A small Transformer encoder: attention, feed-forward, masked pooling."""
  del trainer_settings
  dim, heads = 64, 2
  inputs = _inputs(text_settings)
  ids = inputs[settings_lib.TEXT_IDS]
  # The embedding's mask (id 0 is padding) propagates through attention,
  # the residual adds and layer norms down to the pooling.
  x = PositionalEmbedding(text_settings.sequence_length,
                          text_settings.word_vocab_size, dim)(ids)
  attended = tf.keras.layers.MultiHeadAttention(
      num_heads=heads, key_dim=dim // heads)(x, x)
  x = tf.keras.layers.LayerNormalization()(
      tf.keras.layers.Add()([x, attended]))
  ffn = tf.keras.layers.Dense(dim * 2, activation='relu')(x)
  x = tf.keras.layers.LayerNormalization()(
      tf.keras.layers.Add()([x, tf.keras.layers.Dense(dim)(ffn)]))
  x = MaskedMean(name='encoder_mean')(x)
  features = [x]
  if settings_lib.CHAR_NGRAMS in inputs:
    features.append(
        _masked_mean(inputs[settings_lib.CHAR_NGRAMS],
                     text_settings.char_vocab_size, dim, 'char_ngrams'))
  x = (tf.keras.layers.Concatenate()(features)
       if len(features) > 1 else features[0])
  x = tf.keras.layers.Dropout(0.1)(x)
  return tf.keras.Model(inputs, _probability(x), name='transformer')


def build_hub(text_settings: settings_lib.TextSettings,
              trainer_settings: settings_lib.TrainerSettings) -> tf.keras.Model:
  """Fine-tunes a pretrained encoder: its text summary -> dropout -> logit.

  `hub_model_path` is a TF Hub / Kaggle SavedModel directory or a Hugging
  Face checkpoint directory (converted once by `hf_checkpoint.encoder_path`;
  the trainer does that before the distribution strategy's scope). The
  encoder follows the TF Hub BERT-family convention: `input_word_ids`,
  `input_mask`, `input_type_ids` in, `pooled_output` out. `pooled_output` is
  the model's trained pooler over the first special token (`[CLS]` / `<s>`)
  where it has one, else that token's hidden state (DistilBERT): what the
  model was pretrained to summarise the text into. A sentence-transformers
  checkpoint declares its own summary instead (`PretrainedDir.pooling`, e.g.
  all-MiniLM-L6-v2's mean over the real tokens), which the head then reads:
  on 800 film-review snippets a logistic regression on MiniLM's mean-pooled
  states scores ROC-AUC 0.81 on 400 held-out ones, on its `pooled_output`
  0.70, on its `[CLS]` state 0.74.

  With `tokenizer=pretrained` (the checkpoint's own tokenizer) the inputs
  are the Transform's ids, attention mask and type ids. Other tokenizers
  give ids only; the mask is then `ids != 0` (only right for an encoder
  whose pad id is 0 and whose ids these are: the lenient test encoder).
  """
  encoder = hub_encoder.SavedModelEncoder(
      hf_checkpoint.encoder_path(
          trainer_settings.hub_model_path,
          precision=tf.keras.mixed_precision.global_policy().name),
      name='encoder')
  shape = (text_settings.sequence_length,)
  inputs = {settings_lib.TEXT_IDS: tf.keras.Input(
      shape=shape, dtype=tf.int64, name=settings_lib.TEXT_IDS)}
  if text_settings.tokenizer == 'pretrained':
    for name in (settings_lib.TEXT_MASK, settings_lib.TEXT_TYPE_IDS):
      inputs[name] = tf.keras.Input(shape=shape, dtype=tf.int64, name=name)
    encoder_inputs = hub_encoder.PretrainedInputs()(inputs)
  else:
    encoder_inputs = hub_encoder.BertInputs()(inputs[settings_lib.TEXT_IDS])
  encoded = encoder(encoder_inputs)
  summary = encoded['pooled_output']
  if text_settings.tokenizer == 'pretrained':
    pooling = pretrained_dir.declared_pooling(trainer_settings.hub_model_path)
    if pooling:  # What the checkpoint was trained to summarise into.
      summary = hub_encoder.TokenPooling(pooling, name=f'{pooling}_pooling')(
          encoded['sequence_output'], encoder_inputs['input_mask'])
  x = tf.keras.layers.Dropout(HUB_DROPOUT, name='head_dropout')(summary)
  return tf.keras.Model(inputs, _probability(x), name='hub')


BUILDERS: Dict[str, Callable[..., tf.keras.Model]] = {
    'bow': build_bow,
    'transformer': build_transformer,
    'hub': build_hub,
}


def build(text_settings: settings_lib.TextSettings,
          trainer_settings: settings_lib.TrainerSettings) -> tf.keras.Model:
  """Builds the model named by `trainer_settings.model` (uncompiled)."""
  return BUILDERS[trainer_settings.model](text_settings, trainer_settings)


class WarmupLinearDecay(tf.keras.optimizers.schedules.LearningRateSchedule):
  """Linear warm-up from 0 to `peak` over `warmup_steps`, then linear to 0."""

  def __init__(self, peak: float, total_steps: int, warmup_steps: int):
    super().__init__()
    self.peak = peak
    self.total_steps = max(int(total_steps), 1)
    self.warmup_steps = max(int(warmup_steps), 1)

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    warmup = step / self.warmup_steps
    decay = ((self.total_steps - step) /
             max(self.total_steps - self.warmup_steps, 1))
    return self.peak * tf.clip_by_value(tf.minimum(warmup, decay), 0.0, 1.0)

  def get_config(self):
    return {'peak': self.peak, 'total_steps': self.total_steps,
            'warmup_steps': self.warmup_steps}


def learning_rate_for(trainer_settings: settings_lib.TrainerSettings) -> float:
  """The peak learning rate: the setting, or the model's default if 0."""
  return (trainer_settings.learning_rate or
          DEFAULT_LEARNING_RATES[trainer_settings.model])


def fine_tuning_optimizer(peak: float, decay_steps: int
                         ) -> tf.keras.optimizers.Optimizer:
  """AdamW with BERT's warm-up and decay; no decay on LayerNorm and biases."""
  learning_rate = peak
  if decay_steps:
    learning_rate = WarmupLinearDecay(
        peak, decay_steps, round(decay_steps * HUB_WARMUP_FRACTION))
  optimizer = tf.keras.optimizers.AdamW(
      learning_rate, weight_decay=HUB_WEIGHT_DECAY, epsilon=1e-6)
  optimizer.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY))
  return optimizer


def compile_model(model: tf.keras.Model,
                  trainer_settings: settings_lib.TrainerSettings,
                  steps_per_execution: int,
                  decay_steps: int = 0,
                  jit_compile: bool = False) -> None:
  """Compiles for binary classification; call inside `strategy.scope()`.

  With `decay_steps` (the number of training steps) the learning rate
  decays to zero, so the exported last epoch is not the overfitted one a
  constant rate leaves behind. The models trained from scratch use
  `LazyAdam` (Adam that updates only the embedding rows a batch looked up,
  not the whole table every step: 4x the training rate of the `bow` model on
  2 CPU cores, issue 19) with a cosine decay; `hub` fine-tunes with
  `fine_tuning_optimizer`. `jit_compile` compiles the train step with XLA
  (TPUs always do; an op without an XLA kernel fails at the first step,
  naming the op).
  """
  peak = learning_rate_for(trainer_settings)
  if trainer_settings.model == 'hub':
    optimizer = fine_tuning_optimizer(peak, decay_steps)
  else:
    learning_rate = peak
    if decay_steps:
      learning_rate = tf.keras.optimizers.schedules.CosineDecay(
          peak, decay_steps)
    optimizer = embedding_training.LazyAdam(learning_rate)
  model.compile(
      optimizer=optimizer,
      loss=tf.keras.losses.BinaryCrossentropy(),
      metrics=[tf.keras.metrics.AUC(name='auc'),
               tf.keras.metrics.BinaryAccuracy(name='accuracy')],
      steps_per_execution=steps_per_execution,
      jit_compile=jit_compile)
