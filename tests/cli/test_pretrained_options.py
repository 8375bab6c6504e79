"""`run --model hub --hub-model-path DIR`: DIR's tokenizer, chosen by itself.

Through the real preflight (`run_preflight.check`) and the real
`autostrategy` entry point for the refusals (exit code 2, one message).
"""

import contextlib
import json
import os

import pytest

from test_length_options import write_comments
from tfx_autostrategy import cli
from tfx_autostrategy.cli import run_preflight

# 'hello' is one WordPiece token of MiniLM's (uncased) vocabulary: 37 of
# them are 39 tokens with [CLS] and [SEP].
TRAIN_TEXTS = ['Hello ' * 37] * 19 + ['a']


def _data(root, texts):
  write_comments(str(root / 'train' / 'part.csv'), texts)
  write_comments(str(root / 'eval' / 'part.csv'), ['x ' * 600] * 4)
  return str(root)


def _args(data, tmp_path, *flags):
  return ['run', '--data', data, '--output', str(tmp_path / 'out'),
          '--per-replica-batch-size', '4', '--model', 'hub', *flags]


def _preflight(*argv):
  args = cli.build_parser().parse_args(list(argv))
  with contextlib.ExitStack() as lock:
    return run_preflight.check(args, lock)


def test_checkpoint_tokenizer_and_auto_length_in_its_tokens(minilm_dir,
                                                            tmp_path):
  data = _data(tmp_path / 'data', TRAIN_TEXTS)
  checked = _preflight(*_args(data, tmp_path, '--hub-model-path',
                              minilm_dir))
  text = checked.config.text
  assert (text.tokenizer, text.pretrained_model, text.sentencepiece_model,
          text.sequence_length) == ('pretrained', minilm_dir, '', 40)
  assert checked.lengths.line.startswith(
      'lengths: --sequence-length auto -> 40 tokens (95th percentile 39; '
      'truncates 0.0 % of 20 training texts), --char-ngram-length auto')


def test_auto_length_is_capped_at_the_checkpoints_positions(minilm_dir,
                                                            tmp_path):
  data = _data(tmp_path / 'data', ['hello ' * 600] * 20)
  checked = _preflight(*_args(data, tmp_path, '--hub-model-path',
                              minilm_dir))
  assert checked.config.text.sequence_length == 512
  assert checked.lengths.line.startswith(
      'lengths: --sequence-length auto -> 512 tokens (95th percentile 602, '
      'capped at 512; truncates 100.0 % of 20 training texts)')


def _refused(capsys, argv):
  code = cli.main(argv)
  err = capsys.readouterr().err
  assert code == 2, err
  assert err.startswith('error: ') and err.count('\n') == 1, err
  return err


def test_sentencepiece_model_conflicts_with_a_checkpoint(minilm_dir, tmp_path,
                                                         capsys):
  data = _data(tmp_path / 'data', TRAIN_TEXTS)
  err = _refused(capsys, _args(data, tmp_path, '--hub-model-path', minilm_dir,
                               '--sentencepiece-model', 'sp.model'))
  assert '--sentencepiece-model sp.model conflicts with --hub-model-path' in (
      err)
  assert 'own wordpiece tokenizer; drop --sentencepiece-model' in err


def test_length_beyond_the_checkpoints_positions_is_refused(minilm_dir,
                                                            tmp_path, capsys):
  data = _data(tmp_path / 'data', TRAIN_TEXTS)
  err = _refused(capsys, _args(data, tmp_path, '--hub-model-path', minilm_dir,
                               '--sequence-length', '520'))
  assert f'--sequence-length 520 exceeds the 512 positions of the bert ' \
         f'checkpoint at {minilm_dir}' in err


def test_unsupported_model_type_is_refused(tmp_path, capsys):
  model = tmp_path / 'gpt2'
  model.mkdir()
  (model / 'config.json').write_text(json.dumps({'model_type': 'gpt2'}))
  data = _data(tmp_path / 'data', TRAIN_TEXTS)
  err = _refused(capsys, _args(data, tmp_path, '--hub-model-path',
                               str(model)))
  assert "--hub-model-path: " in err
  assert "model_type 'gpt2' is not supported; supported: Hugging Face" in err


@pytest.mark.parametrize('with_spm', [False, True])
def test_savedmodel_without_a_vocabulary_needs_a_sentencepiece_model(
    tmp_path, capsys, with_spm):
  """The older way (an encoder of one's own) stays: ids from the spm model."""
  model = tmp_path / 'encoder'
  model.mkdir()
  (model / 'saved_model.pb').write_bytes(b'')
  data = _data(tmp_path / 'data', TRAIN_TEXTS)
  argv = _args(data, tmp_path, '--hub-model-path', str(model))
  if not with_spm:
    err = _refused(capsys, argv)
    assert 'SavedModel without assets/vocab.txt' in err
    return
  text = _preflight(*argv, '--sentencepiece-model', 'sp.model').config.text
  assert (text.tokenizer, text.pretrained_model) == ('sentencepiece', '')
  assert text.sentencepiece_model == os.path.abspath('sp.model')
