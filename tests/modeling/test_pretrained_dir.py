"""describe(): a model directory's conventions from its files, or a refusal."""

import json
import os
import subprocess
import sys

import pytest

from tfx_autostrategy.modeling import pretrained_dir

# A cased and an uncased BERT vocabulary, as TF Hub's assets/vocab.txt.
_SPECIAL = ['[PAD]', '[unused0]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
_CASED = _SPECIAL + ['the', 'The', 'Paris', '##s', ',']
_UNCASED = _SPECIAL + ['the', 'paris', '##s', ',', 'é']


def _write(path, name, content):
  full = os.path.join(path, name)
  os.makedirs(os.path.dirname(full), exist_ok=True)
  with open(full, 'w', encoding='utf-8') as handle:
    handle.write(content if isinstance(content, str) else json.dumps(content))
  return full


def _savedmodel(tmp_path, vocab):
  path = str(tmp_path / 'hub')
  _write(path, 'saved_model.pb', '')
  _write(path, 'assets/vocab.txt', '\n'.join(vocab) + '\n')
  return path


def test_real_minilm_checkpoint(minilm_dir):
  described = pretrained_dir.describe(minilm_dir)
  assert described == pretrained_dir.PretrainedDir(
      path=minilm_dir, kind='huggingface', model_type='bert',
      tokenizer='wordpiece',
      vocab_path=os.path.join(minilm_dir, 'tokenizer.json'),
      lower_case=True, strip_accents=True, cls_id=101, sep_id=102, pad_id=0,
      unk_id=100, unk_token='[UNK]', max_position_embeddings=512,
      config_path=os.path.join(minilm_dir, 'config.json'),
      weights_path=os.path.join(minilm_dir, 'model.safetensors'),
      # sentence-transformers' modules.json -> 1_Pooling/config.json.
      pooling='mean')
  assert described.max_length == 512
  vocabulary = pretrained_dir.vocabulary(described.vocab_path)
  assert len(vocabulary) == 30522
  assert vocabulary[101] == '[CLS]' and vocabulary[2023] == 'this'


def test_tf_hub_savedmodel_casing_from_its_vocabulary(tmp_path):
  cased = pretrained_dir.describe(_savedmodel(tmp_path / 'c', _CASED))
  assert (cased.kind, cased.model_type, cased.tokenizer) == (
      'savedmodel', 'bert', 'wordpiece')
  assert (cased.lower_case, cased.strip_accents) == (False, False)
  assert (cased.cls_id, cased.sep_id, cased.pad_id, cased.unk_id) == (
      3, 4, 0, 2)
  assert cased.max_length == 0  # unknown
  uncased = pretrained_dir.describe(_savedmodel(tmp_path / 'u', _UNCASED))
  assert (uncased.lower_case, uncased.strip_accents) == (True, True)
  assert uncased.vocab_path.endswith(os.path.join('assets', 'vocab.txt'))


def test_huggingface_vocab_txt_and_tokenizer_config(tmp_path):
  path = str(tmp_path)
  _write(path, 'config.json', {'model_type': 'distilbert',
                               'max_position_embeddings': 512,
                               'pad_token_id': 0})
  _write(path, 'vocab.txt', '\n'.join(_CASED) + '\n')
  _write(path, 'tokenizer_config.json', {'do_lower_case': False})
  described = pretrained_dir.describe(path)
  assert (described.model_type, described.lower_case,
          described.strip_accents) == ('distilbert', False, False)
  assert described.vocab_path == os.path.join(path, 'vocab.txt')
  assert described.weights_path == ''  # no model.safetensors
  # Lower-casing without stripping accents, as some tokenizer.json say.
  _write(path, 'tokenizer.json', {'normalizer': {
      'type': 'BertNormalizer', 'lowercase': True, 'strip_accents': False},
                                  'model': {'type': 'WordPiece', 'vocab': {}}})
  described = pretrained_dir.describe(path)
  assert (described.lower_case, described.strip_accents) == (True, False)


def test_xlm_roberta_ids_follow_fairseq(tmp_path):
  path = str(tmp_path)
  _write(path, 'config.json', {'model_type': 'xlm-roberta',
                               'max_position_embeddings': 514})
  _write(path, 'sentencepiece.bpe.model', 'spm')
  described = pretrained_dir.describe(path)
  assert (described.tokenizer, described.cls_id, described.pad_id,
          described.sep_id, described.unk_id) == ('sentencepiece', 0, 1, 2, 3)
  assert described.lower_case is False
  assert described.max_length == 512


_MODULES = [{'idx': 0, 'name': '0', 'path': '',
             'type': 'sentence_transformers.models.Transformer'},
            {'idx': 1, 'name': '1', 'path': '1_Pooling',
             'type': 'sentence_transformers.models.Pooling'}]


@pytest.mark.parametrize('pooling_config, expected', [
    ({'pooling_mode_cls_token': True, 'pooling_mode_mean_tokens': False},
     'cls'),
    ({'pooling_mode_max_tokens': True}, 'max'),
    ({'pooling_mode_mean_sqrt_len_tokens': True}, 'mean_sqrt_len'),
    (None, ''),  # no modules.json: the model's pooled_output
])
def test_declared_pooling(tmp_path, pooling_config, expected):
  _write(str(tmp_path), 'config.json', {'model_type': 'bert'})
  _write(str(tmp_path), 'vocab.txt', '\n'.join(_CASED))
  if pooling_config is not None:
    _write(str(tmp_path), 'modules.json', _MODULES)
    _write(str(tmp_path), os.path.join('1_Pooling', 'config.json'),
           pooling_config)
  assert pretrained_dir.describe(str(tmp_path)).pooling == expected


@pytest.mark.parametrize('pooling_config, message', [
    ({'pooling_mode_cls_token': True, 'pooling_mode_mean_tokens': True},
     r"1_Pooling/config.json: pooling \['cls', 'mean'\] is not supported"),
    ({'pooling_mode_weightedmean_tokens': True},
     r"pooling \['pooling_mode_weightedmean_tokens'\] is not supported"),
    ({}, r"pooling none is not supported; one of pooling_mode_cls_token"),
])
def test_unsupported_pooling_is_refused(tmp_path, pooling_config, message):
  _write(str(tmp_path), 'config.json', {'model_type': 'bert'})
  _write(str(tmp_path), 'vocab.txt', '\n'.join(_CASED))
  _write(str(tmp_path), 'modules.json', _MODULES)
  _write(str(tmp_path), os.path.join('1_Pooling', 'config.json'),
         pooling_config)
  with pytest.raises(ValueError, match=message):
    pretrained_dir.describe(str(tmp_path))


@pytest.mark.parametrize('files, message', [
    ({'config.json': {'model_type': 'gpt2'}},
     r"model_type 'gpt2' is not supported; supported: Hugging Face "
     r'checkpoints of model_type bert, distilbert, xlm-roberta'),
    ({'config.json': {'model_type': 'xlm-roberta'}, 'tokenizer.json': {}},
     r'needs its SentencePiece model sentencepiece.bpe.model'),
    ({'config.json': {'model_type': 'bert'},
      'tokenizer.json': {'model': {'type': 'BPE', 'vocab': {}}}},
     r"with a 'BPE' tokenizer is not supported \(WordPiece only\)"),
    ({'config.json': {'model_type': 'bert'}},
     r'needs vocab.txt or tokenizer.json'),
    ({'config.json': {'model_type': 'bert'}, 'vocab.txt': 'a\nb\n'},
     r"special tokens \['\[CLS\]', '\[PAD\]', '\[SEP\]', '\[UNK\]'\] are "
     r'not in the vocabulary'),
    ({'config.json': {'model_type': 'bert', 'pad_token_id': 5},
      'vocab.txt': '\n'.join(_CASED)},
     r"pad_token_id 5 is not the id of the pad token '\[PAD\]' \(0\)"),
    ({'config.json': {'model_type': 'bert'},
      'tokenizer.json': {'model': {'type': 'WordPiece',
                                   'vocab': {'[CLS]': 0, '[SEP]': 2}}}},
     r'vocabulary ids are not 0..1 \(id 2 of'),
    ({'config.json': '{not json'}, r'config.json is not valid JSON'),
    ({'saved_model.pb': ''}, r'SavedModel without assets/vocab.txt'),
    ({'weights.bin': ''}, r'has neither config.json .* nor saved_model.pb'),
])
def test_unsupported_directories_are_refused(tmp_path, files, message):
  for name, content in files.items():
    _write(str(tmp_path), name, content)
  with pytest.raises(ValueError, match=message):
    pretrained_dir.describe(str(tmp_path))


def test_missing_directory_is_refused(tmp_path):
  with pytest.raises(ValueError, match='does not exist'):
    pretrained_dir.describe(str(tmp_path / 'nowhere'))


def test_importable_and_usable_without_tensorflow(minilm_dir):
  script = ('import sys\n'
            'from tfx_autostrategy.modeling import pretrained_dir\n'
            f'd = pretrained_dir.describe({minilm_dir!r})\n'
            'assert d.cls_id == 101, d\n'
            "assert 'tensorflow' not in sys.modules\n")
  proc = subprocess.run([sys.executable, '-c', script], capture_output=True,
                        text=True, timeout=120, check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
