"""Structured settings shared by the pipeline, Transform and the Trainer.

TFX component parameters only carry primitives, so structured settings travel
as JSON: `to_json` produces it and `from_json` parses it (a `custom_config`,
itself JSON, carries the plain dict of `to_dict`, which `from_json` parses
too), and nothing else in the code base builds or reads them by hand.
"""

import dataclasses
import json
from typing import Any, Dict, Type, TypeVar

T = TypeVar('T')

# Names of the transformed features the Trainer consumes.
TEXT_IDS = 'text_ids'
CHAR_NGRAMS = 'char_ngrams'
# TF-IDF weight of each id in CHAR_NGRAMS (float32, 0 at padding).
CHAR_NGRAM_WEIGHTS = 'char_ngram_weights'
# With a pretrained checkpoint's tokenizer (TextSettings.pretrained_model),
# TEXT_IDS are its ids with its special tokens and pad id, and these come too
# (all [batch, sequence_length] int64; components/transform/pretrained_tokens):
# 1 for real tokens (special ones included), 0 for padding;
TEXT_MASK = 'text_mask'
# the segment ids (all 0: one segment).
TEXT_TYPE_IDS = 'text_type_ids'
LABEL = 'label'

MODELS = ('bow', 'transformer', 'hub')
ACCELERATORS = ('auto', 'tpu', 'gpu', 'cpu')
TOKENIZERS = ('words', 'sentencepiece', 'pretrained')
JIT_COMPILE_CHOICES = ('auto', 'on', 'off')
# Keras mixed precision policies a Trainer (and a converted checkpoint) runs.
PRECISIONS = ('float32', 'mixed_float16', 'mixed_bfloat16')


@dataclasses.dataclass(frozen=True)
class TextSettings:
  """How raw text becomes fixed-length ids (read by Transform and serving).

  Attributes:
    text_column: raw CSV column holding the text.
    label_column: raw CSV column holding the 0/1 label.
    id_column: raw CSV column holding the row id ('' if there is none).
    slice_column: raw CSV column to slice metrics by ('' for none).
    sequence_length: number of word/piece ids per example after padding.
    vocab_size: top-k words kept in the vocabulary.
    vocab_min_frequency: words seen fewer times are out of vocabulary.
    num_oov_buckets: hash buckets for out-of-vocabulary words.
    char_ngram_min: shortest character n-gram (0 disables n-grams).
    char_ngram_max: longest character n-gram.
    char_ngram_vocab_size: top-k character n-grams kept in their vocabulary
      (n-grams outside it are dropped, not hashed).
    char_ngram_min_frequency: n-grams found in fewer training texts are
      dropped (a rare n-gram is noise to a linear model).
    char_ngram_length: number of n-gram ids per example after padding.
    tokenizer: 'words' (vocabulary), 'sentencepiece' (a SentencePiece model
      file, ids + 1, 0 is padding) or 'pretrained' (the tokenizer of the
      checkpoint in `pretrained_model`, with its special tokens and pad id;
      Transform then also outputs TEXT_MASK and TEXT_TYPE_IDS).
    sentencepiece_model: path of a SentencePiece model file.
    pretrained_model: a Hugging Face checkpoint or TF Hub SavedModel
      directory (tfx_autostrategy/modeling/pretrained_dir.py) whose tokenizer Transform
      uses (tokenizer='pretrained').
  """
  text_column: str = 'comment_text'
  label_column: str = 'toxic'
  id_column: str = 'id'
  slice_column: str = 'lang'
  sequence_length: int = 64
  vocab_size: int = 20000
  vocab_min_frequency: int = 2
  num_oov_buckets: int = 64
  char_ngram_min: int = 2
  char_ngram_max: int = 5
  char_ngram_vocab_size: int = 100000
  char_ngram_min_frequency: int = 2
  char_ngram_length: int = 512
  tokenizer: str = 'words'
  sentencepiece_model: str = ''
  pretrained_model: str = ''

  def __post_init__(self):
    if self.sequence_length < 1:
      raise ValueError(f'sequence_length must be >= 1, got {self.sequence_length}')
    if self.tokenizer not in TOKENIZERS:
      raise ValueError(
          f'tokenizer must be one of {TOKENIZERS}, got {self.tokenizer!r}')
    if self.tokenizer == 'sentencepiece' and not self.sentencepiece_model:
      raise ValueError('tokenizer=sentencepiece needs sentencepiece_model')
    if (self.tokenizer == 'pretrained') != bool(self.pretrained_model):
      raise ValueError('tokenizer=pretrained and pretrained_model go together')
    if self.pretrained_model and self.sentencepiece_model:
      raise ValueError(
          f'sentencepiece_model {self.sentencepiece_model!r} conflicts with '
          f'pretrained_model {self.pretrained_model!r}, whose own tokenizer '
          'is used')
    if self.char_ngram_min and self.char_ngram_max < self.char_ngram_min:
      raise ValueError('char_ngram_max must be >= char_ngram_min')

  @property
  def word_vocab_size(self) -> int:
    """Size of the id space of `TEXT_IDS` (0 is padding)."""
    return self.vocab_size + self.num_oov_buckets + 1

  @property
  def char_vocab_size(self) -> int:
    """Size of the id space of `CHAR_NGRAMS` (0 is padding)."""
    return self.char_ngram_vocab_size + 1


@dataclasses.dataclass(frozen=True)
class TrainerSettings:
  """How the Trainer trains; primitives only, carried by one JSON parameter.

  Attributes:
    model: one of `MODELS`.
    epochs: passes over the training split.
    per_replica_batch_size: examples per replica per step.
    learning_rate: optimizer peak learning rate; 0 = the model's default
      (models.DEFAULT_LEARNING_RATES: 2e-3, or 3e-5 to fine-tune a
      pretrained encoder).
    accelerator: one of `ACCELERATORS`.
    steps_per_execution: Keras steps per tf.function call (0 = device default).
    precision: one of `PRECISIONS` ('' = device default).
    hub_model_path: SavedModel directory of a pretrained encoder (model=hub).
    input_cache_mb: memory for keeping decoded examples after the first epoch
      (train first, then eval); a split that does not fit is streamed from
      the TFRecords every epoch. 0 = always stream.
    jit_compile: XLA-compile the train step: 'auto' (on for TPUs and GPUs,
      off on CPU), 'on' or 'off' (impossible on TPU).
    backup_every_steps: BackupAndRestore also saves every this many steps;
      0 = at epoch ends only; -1 = device default (every
      distribution_plan.TPU_BACKUP_EVERY_STEPS steps on TPU, which gets no
      preemption notice; epoch ends elsewhere).
  """
  model: str = 'bow'
  epochs: int = 3
  per_replica_batch_size: int = 32
  learning_rate: float = 0.0
  accelerator: str = 'auto'
  steps_per_execution: int = 0
  precision: str = ''
  hub_model_path: str = ''
  input_cache_mb: int = 1024
  jit_compile: str = 'auto'
  backup_every_steps: int = -1

  def __post_init__(self):
    if self.model not in MODELS:
      raise ValueError(f'model must be one of {MODELS}, got {self.model!r}')
    if self.accelerator not in ACCELERATORS:
      raise ValueError(
          f'accelerator must be one of {ACCELERATORS}, got {self.accelerator!r}')
    if self.epochs < 1:
      raise ValueError(f'epochs must be >= 1, got {self.epochs}')
    if self.per_replica_batch_size < 1:
      raise ValueError(
          f'per_replica_batch_size must be >= 1, got {self.per_replica_batch_size}')
    if self.steps_per_execution < 0:
      raise ValueError(
          f'steps_per_execution must be >= 0, got {self.steps_per_execution}')
    if self.precision and self.precision not in PRECISIONS:
      raise ValueError(f'precision must be one of {PRECISIONS} or empty, got '
                       f'{self.precision!r}')
    if self.learning_rate < 0:
      raise ValueError(f'learning_rate must be >= 0, got {self.learning_rate}')
    if self.input_cache_mb < 0:
      raise ValueError(
          f'input_cache_mb must be >= 0, got {self.input_cache_mb}')
    if self.jit_compile not in JIT_COMPILE_CHOICES:
      raise ValueError(f'jit_compile must be one of {JIT_COMPILE_CHOICES}, '
                       f'got {self.jit_compile!r}')
    if self.backup_every_steps < -1:
      raise ValueError('backup_every_steps must be >= 0 (or -1 for the device '
                       f'default), got {self.backup_every_steps}')
    if self.model == 'hub' and not self.hub_model_path:
      raise ValueError('model=hub needs hub_model_path')


def to_dict(settings: Any) -> Dict[str, Any]:
  """A settings dataclass as the plain dict a `custom_config` carries."""
  return dataclasses.asdict(settings)


def to_json(settings: Any) -> str:
  """Serialises a settings dataclass to the JSON carried by TFX parameters."""
  return json.dumps(to_dict(settings), sort_keys=True)


def from_json(cls: Type[T], text: Any) -> T:
  """Parses JSON (or an already-parsed dict) into the settings dataclass `cls`.

  Unknown keys are an error, so a misspelt setting never silently falls back to
  its default. An instance of `cls` (parsed already, e.g. by the Trainer's
  executor for `run_fn`) is returned as it is.
  """
  if isinstance(text, cls):
    return text
  values: Dict[str, Any] = json.loads(text) if isinstance(text, str) else dict(text or {})
  known = {f.name for f in dataclasses.fields(cls)}
  unknown = sorted(set(values) - known)
  if unknown:
    raise ValueError(f'unknown {cls.__name__} keys: {unknown}')
  return cls(**values)
