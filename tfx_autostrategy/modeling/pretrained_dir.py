"""What a pretrained model directory holds, decided from its files alone.

`--model hub --hub-model-path DIR` takes one directory and nothing else: the
Transform tokenises with DIR's own tokenizer (its vocabulary, casing, special
tokens and pad id) and the Trainer loads DIR's encoder. `describe(DIR)` says
which conventions apply, so both halves read them from one place. It reads
JSON and text files only, so it imports no TensorFlow (the CLI preflight
calls it before TensorFlow loads); a remote URI (`gs://...`) is read through
`tf.io.gfile`, imported then.

Two kinds of directory are recognised:

* a Hugging Face checkpoint: `config.json` (its `model_type`), weights in
  `model.safetensors`, and the tokenizer files. `bert` and `distilbert` use
  WordPiece: `vocab.txt`, or the vocabulary inside `tokenizer.json` (many
  checkpoints, e.g. sentence-transformers/all-MiniLM-L6-v2, ship only that);
  casing and accent stripping come from `tokenizer.json`'s `BertNormalizer`
  or else `tokenizer_config.json` (`do_lower_case`, `strip_accents`), with
  Hugging Face's defaults (lower-case; strip accents when lower-casing).
  `xlm-roberta` uses its SentencePiece model `sentencepiece.bpe.model` with
  fairseq's ids: `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3, every other piece
  its SentencePiece id + 1 (SentencePiece's own `<unk>`, id 0, becomes 3).
* a TF Hub / Kaggle BERT-family SavedModel (`saved_model.pb`) with
  `assets/vocab.txt` (inputs `input_word_ids`, `input_mask`,
  `input_type_ids`). Such a SavedModel keeps `do_lower_case` in a variable,
  which only TensorFlow can read; it is decided from the vocabulary instead:
  an uncased vocabulary has no upper-case letters outside its bracketed
  special tokens (`[CLS]`, `[unused0]`), a cased one has thousands.

A Hugging Face directory written by sentence-transformers also says how its
training summarised a text: `modules.json` names a Pooling module whose
`config.json` sets one `pooling_mode_*` (all-MiniLM-L6-v2: the mean of the
token states). That is the summary the checkpoint was trained to make
meaningful, so the classifier reads it (`pooling`); without it, the model's
`pooled_output` (its trained pooler over `[CLS]`/`<s>`).

Anything else is refused with a ValueError naming what is missing or
unsupported and the supported list.
"""

import dataclasses
import json
import os
from typing import Any, Dict, List, Optional

HUGGINGFACE = 'huggingface'
SAVEDMODEL = 'savedmodel'
WORDPIECE = 'wordpiece'
SENTENCEPIECE = 'sentencepiece'
# Hugging Face model_type -> its tokenizer.
MODEL_TYPES = {'bert': WORDPIECE, 'distilbert': WORDPIECE,
               'xlm-roberta': SENTENCEPIECE}
SUPPORTED = ('Hugging Face checkpoints of model_type '
             f"{', '.join(sorted(MODEL_TYPES))} (config.json, "
             'model.safetensors, vocab.txt or tokenizer.json for WordPiece, '
             'sentencepiece.bpe.model for xlm-roberta), and TF Hub / Kaggle '
             'BERT-family SavedModels with assets/vocab.txt')
# fairseq's dictionary, which XLM-R's ids follow.
XLMR_BOS, XLMR_PAD, XLMR_EOS, XLMR_UNK = 0, 1, 2, 3
XLMR_SENTENCEPIECE_FILE = 'sentencepiece.bpe.model'
# sentence-transformers' Pooling config key -> `PretrainedDir.pooling`.
POOLING_MODES = {'pooling_mode_cls_token': 'cls',
                 'pooling_mode_mean_tokens': 'mean',
                 'pooling_mode_max_tokens': 'max',
                 'pooling_mode_mean_sqrt_len_tokens': 'mean_sqrt_len'}
# Hugging Face's WordPiece gives [UNK] for a word longer than this (chars).
WORDPIECE_MAX_CHARS_PER_WORD = 100


@dataclasses.dataclass(frozen=True)
class PretrainedDir:
  """The conventions of a pretrained model directory.

  Attributes:
    path: the directory.
    kind: HUGGINGFACE or SAVEDMODEL.
    model_type: 'bert', 'distilbert' or 'xlm-roberta' (a TF Hub SavedModel
      with assets/vocab.txt is 'bert').
    tokenizer: WORDPIECE or SENTENCEPIECE.
    vocab_path: vocab.txt; or tokenizer.json, whose model.vocab holds the
      WordPiece vocabulary; or the SentencePiece model file.
    lower_case: the tokenizer lower-cases the text.
    strip_accents: the tokenizer removes accents (NFD, then drops
      non-spacing marks).
    cls_id: the first special token ([CLS], or <s> for XLM-R).
    sep_id: the closing special token ([SEP], or </s>).
    pad_id: the padding id.
    unk_id: the unknown-token id.
    unk_token: the unknown token's text (WordPiece; '' for SentencePiece).
    max_position_embeddings: from config.json; 0 if unknown.
    config_path: config.json ('' for a SavedModel).
    weights_path: model.safetensors ('' for a SavedModel or if absent).
    pooling: the text summary the checkpoint declares (sentence-transformers'
      Pooling module): 'cls', 'mean', 'max' or 'mean_sqrt_len' over the
      token states; '' when it declares none (use `pooled_output`).
  """
  path: str
  kind: str
  model_type: str
  tokenizer: str
  vocab_path: str
  lower_case: bool
  strip_accents: bool
  cls_id: int
  sep_id: int
  pad_id: int
  unk_id: int
  unk_token: str
  max_position_embeddings: int
  config_path: str = ''
  weights_path: str = ''
  pooling: str = ''

  @property
  def max_length(self) -> int:
    """Most tokens a sequence may have, special tokens included; 0: unknown.

    XLM-R numbers positions from pad_id + 1 (fairseq), so 514 position
    embeddings hold 512 tokens.
    """
    if not self.max_position_embeddings:
      return 0
    if self.model_type == 'xlm-roberta':
      return self.max_position_embeddings - self.pad_id - 1
    return self.max_position_embeddings


def _join(path: str, *names: str) -> str:
  return '/'.join([path.rstrip('/'), *names]) if '://' in path else (
      os.path.join(path, *names))


def _exists(path: str) -> bool:
  if '://' in path:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return tf.io.gfile.exists(path)
  return os.path.exists(path)


def _read_text(path: str) -> str:
  if '://' in path:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    with tf.io.gfile.GFile(path, 'rb') as handle:
      return handle.read().decode('utf-8')
  with open(path, encoding='utf-8') as handle:
    return handle.read()


def _read_json(path: str) -> Dict[str, Any]:
  try:
    value = json.loads(_read_text(path))
  except (ValueError, UnicodeDecodeError) as error:
    raise ValueError(f'{path} is not valid JSON ({error})') from None
  if not isinstance(value, dict):
    raise ValueError(f'{path} is not a JSON object')
  return value


def _optional_json(path: str) -> Dict[str, Any]:
  return _read_json(path) if _exists(path) else {}


def describe(path: str) -> PretrainedDir:
  """What the model directory `path` holds (see the module docstring).

  Raises:
    ValueError: `path` is not a directory of a supported kind, or its model
      type or tokenizer is unsupported; the message names the cause and the
      supported list.
  """
  if not path:
    raise ValueError('no pretrained model directory given')
  if not _exists(path):
    raise ValueError(f'pretrained model directory {path!r} does not exist')
  if _exists(_join(path, 'config.json')):
    return _describe_huggingface(path)
  if _exists(_join(path, 'saved_model.pb')):
    return _describe_savedmodel(path)
  raise ValueError(
      f'{path!r} has neither config.json (a Hugging Face checkpoint) nor '
      f'saved_model.pb (a SavedModel); supported: {SUPPORTED}')


def is_savedmodel(path: str) -> bool:
  """`path` is a SavedModel directory (whatever its tokenizer)."""
  return _exists(_join(path, 'saved_model.pb'))


def _describe_huggingface(path: str) -> PretrainedDir:
  config_path = _join(path, 'config.json')
  config = _read_json(config_path)
  model_type = config.get('model_type', '')
  if model_type not in MODEL_TYPES:
    raise ValueError(
        f'{config_path}: model_type {model_type!r} is not supported; '
        f'supported: {SUPPORTED}')
  weights = _join(path, 'model.safetensors')
  common = dict(
      path=path, kind=HUGGINGFACE, model_type=model_type,
      max_position_embeddings=int(config.get('max_position_embeddings') or 0),
      config_path=config_path, weights_path=weights if _exists(weights) else '',
      pooling=declared_pooling(path))
  if MODEL_TYPES[model_type] == SENTENCEPIECE:
    return _xlmr(path, common)
  return _wordpiece(path, config, common)


def declared_pooling(path: str) -> str:
  """The pooling a sentence-transformers `modules.json` declares, or ''."""
  modules_path = _join(path, 'modules.json')
  if not _exists(modules_path):
    return ''
  try:
    modules = json.loads(_read_text(modules_path))
  except (ValueError, UnicodeDecodeError) as error:
    raise ValueError(f'{modules_path} is not valid JSON ({error})') from None
  if not isinstance(modules, list):
    raise ValueError(f'{modules_path} is not a JSON list of modules')
  pooling = [m for m in modules if isinstance(m, dict)
             and str(m.get('type', '')).endswith('.Pooling')]
  if not pooling:
    return ''
  folder = [pooling[0]['path']] if pooling[0].get('path') else []
  config_path = _join(path, *folder, 'config.json')
  config = _read_json(config_path)
  modes = [mode for key, mode in POOLING_MODES.items() if config.get(key)]
  others = sorted(k for k, v in config.items()
                  if k.startswith('pooling_mode_') and v
                  and k not in POOLING_MODES)
  if len(modes) != 1 or others:
    raise ValueError(
        f'{config_path}: pooling {sorted(modes) + others or "none"} is not '
        'supported; one of pooling_mode_cls_token, pooling_mode_mean_tokens, '
        'pooling_mode_max_tokens, pooling_mode_mean_sqrt_len_tokens must be '
        'true (the classifier reads that summary of the token states)')
  return modes[0]


def _xlmr(path: str, common: Dict[str, Any]) -> PretrainedDir:
  model = _join(path, XLMR_SENTENCEPIECE_FILE)
  if not _exists(model):
    raise ValueError(
        f'{path!r}: an xlm-roberta checkpoint needs its SentencePiece model '
        f'{XLMR_SENTENCEPIECE_FILE} (a tokenizer.json alone is not '
        f'supported); supported: {SUPPORTED}')
  return PretrainedDir(
      tokenizer=SENTENCEPIECE, vocab_path=model, lower_case=False,
      strip_accents=False, cls_id=XLMR_BOS, sep_id=XLMR_EOS, pad_id=XLMR_PAD,
      unk_id=XLMR_UNK, unk_token='', **common)


def _wordpiece(path: str, config: Dict[str, Any],
               common: Dict[str, Any]) -> PretrainedDir:
  """A bert / distilbert checkpoint's WordPiece conventions."""
  tokenizer_json = _join(path, 'tokenizer.json')
  vocab_txt = _join(path, 'vocab.txt')
  fast = _optional_json(tokenizer_json)
  model = fast.get('model') or {}
  if _exists(vocab_txt):
    vocab_path = vocab_txt
  elif fast:
    if model.get('type') != 'WordPiece':
      raise ValueError(
          f'{tokenizer_json}: a {common["model_type"]} checkpoint with a '
          f'{model.get("type")!r} tokenizer is not supported (WordPiece '
          f'only); supported: {SUPPORTED}')
    vocab_path = tokenizer_json
  else:
    raise ValueError(
        f'{path!r}: a {common["model_type"]} checkpoint needs vocab.txt or '
        f'tokenizer.json (its WordPiece vocabulary); supported: {SUPPORTED}')
  slow = _optional_json(_join(path, 'tokenizer_config.json'))
  normalizer = fast.get('normalizer') or {}
  if normalizer.get('type') == 'BertNormalizer':
    lower_case = bool(normalizer.get('lowercase', True))
    strip_accents = normalizer.get('strip_accents')
  else:
    lower_case = bool(slow.get('do_lower_case', True))
    strip_accents = slow.get('strip_accents')
  if strip_accents is None:
    strip_accents = lower_case
  special = _special_tokens(slow, _optional_json(
      _join(path, 'special_tokens_map.json')))
  ids = token_ids(vocab_path, special.values())
  missing = sorted(token for token in special.values() if token not in ids)
  if missing:
    raise ValueError(f'{vocab_path}: the special tokens {missing} are not '
                     'in the vocabulary')
  pad_id = ids[special['pad']]
  configured_pad = config.get('pad_token_id')
  if configured_pad is not None and configured_pad != pad_id:
    raise ValueError(
        f'{common["config_path"]}: pad_token_id {configured_pad} is not the '
        f'id of the pad token {special["pad"]!r} ({pad_id})')
  return PretrainedDir(
      tokenizer=WORDPIECE, vocab_path=vocab_path, lower_case=lower_case,
      strip_accents=bool(strip_accents), cls_id=ids[special['cls']],
      sep_id=ids[special['sep']], pad_id=pad_id, unk_id=ids[special['unk']],
      unk_token=special['unk'], **common)


def _special_tokens(*configs: Dict[str, Any]) -> Dict[str, str]:
  """cls/sep/pad/unk token texts (BERT's defaults unless configured)."""
  tokens = {'cls': '[CLS]', 'sep': '[SEP]', 'pad': '[PAD]', 'unk': '[UNK]'}
  for config in reversed(configs):
    for role in tokens:
      value = config.get(f'{role}_token')
      if isinstance(value, dict):  # an AddedToken: {"content": ...}
        value = value.get('content')
      if isinstance(value, str) and value:
        tokens[role] = value
  return tokens


def _describe_savedmodel(path: str) -> PretrainedDir:
  vocab_txt = _join(path, 'assets', 'vocab.txt')
  if not _exists(vocab_txt):
    raise ValueError(
        f'{path!r} is a SavedModel without assets/vocab.txt: its tokenizer '
        'is unknown (for an encoder of your own, give its SentencePiece '
        f'model with --sentencepiece-model); supported: {SUPPORTED}')
  vocabulary_ = vocabulary(vocab_txt)
  lower_case = not any(
      token.lower() != token for token in vocabulary_
      if not (token.startswith('[') and token.endswith(']')))
  special = _special_tokens()
  ids = {token: index for index, token in enumerate(vocabulary_)}
  missing = sorted(token for token in special.values() if token not in ids)
  if missing:
    raise ValueError(f'{vocab_txt}: the special tokens {missing} are not in '
                     'the vocabulary (not a BERT-family WordPiece vocabulary)')
  return PretrainedDir(
      path=path, kind=SAVEDMODEL, model_type='bert', tokenizer=WORDPIECE,
      vocab_path=vocab_txt, lower_case=lower_case, strip_accents=lower_case,
      cls_id=ids['[CLS]'], sep_id=ids['[SEP]'], pad_id=ids['[PAD]'],
      unk_id=ids['[UNK]'], unk_token='[UNK]', max_position_embeddings=0)


def vocabulary(vocab_path: str) -> List[str]:
  """The WordPiece tokens in id order, from vocab.txt or tokenizer.json.

  Raises:
    ValueError: tokenizer.json's ids are not 0..n-1, or the file is empty.
  """
  if vocab_path.endswith('.json'):
    vocab = (_read_json(vocab_path).get('model') or {}).get('vocab') or {}
    tokens: List[Optional[str]] = [None] * len(vocab)
    for token, index in vocab.items():
      if not 0 <= index < len(tokens) or tokens[index] is not None:
        raise ValueError(f'{vocab_path}: the vocabulary ids are not 0..'
                         f'{len(tokens) - 1} (id {index} of {token!r})')
      tokens[index] = token
  else:
    # One token a line; a token may end in spaces, so only the line break goes.
    tokens = [line.rstrip('\r\n') for line in
              _read_text(vocab_path).split('\n')]
    if tokens and not tokens[-1]:
      tokens.pop()
  if not tokens:
    raise ValueError(f'{vocab_path}: the vocabulary is empty')
  return tokens  # type: ignore[return-value]


def token_ids(vocab_path: str, tokens) -> Dict[str, int]:
  """Ids of those of `tokens` that are in the vocabulary."""
  wanted = set(tokens)
  return {token: index for index, token in enumerate(vocabulary(vocab_path))
          if token in wanted}
