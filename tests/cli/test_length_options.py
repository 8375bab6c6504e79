"""`--sequence-length auto` / `--char-ngram-length auto` in `run` and `compile`.

`run`: through the real preflight (`run_preflight.check`, what `autostrategy
run` calls before TFX is imported); the full run's printed line is asserted
in tests/pipeline/test_local_e2e.py. `compile`: the real `autostrategy
compile` with data readable at compile time (a file:// URI, read through
tf.io.gfile as gs:// would be) and with data it cannot read.
"""

import contextlib
import csv
import json
import os

import pytest

from tfx_autostrategy import cli
from tfx_autostrategy.cli import run_preflight

# 20 training rows: 19 of 'a b c' (3 words, 9 distinct n-grams of lengths
# 2-5) and one of 30 different words (over 100 distinct n-grams); eval rows
# are longer and must not count.
TRAIN_TEXTS = ['a b c'] * 19 + [' '.join(f'w{i}' for i in range(30))]
EVAL_TEXTS = [' '.join(['long'] * 200)] * 4


def write_comments(path, texts):
  """A Jigsaw CSV (id, comment_text, toxic) of `texts`, labels alternating."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w', newline='', encoding='utf-8') as f:
    writer = csv.writer(f)
    writer.writerow(['id', 'comment_text', 'toxic'])
    for i, text in enumerate(texts):
      writer.writerow([i, text, i % 2])


@pytest.fixture
def data(tmp_path):
  root = tmp_path / 'data'
  write_comments(str(root / 'train' / 'part.csv'), TRAIN_TEXTS)
  write_comments(str(root / 'eval' / 'part.csv'), EVAL_TEXTS)
  return str(root)


def _preflight(data, tmp_path, *flags):
  args = cli.build_parser().parse_args(
      ['run', '--data', data, '--output', str(tmp_path / 'out'),
       '--per-replica-batch-size', '4', *flags])
  with contextlib.ExitStack() as lock:
    return run_preflight.check(args, lock)


def test_run_picks_auto_lengths_from_the_training_texts(data, tmp_path):
  checked = _preflight(data, tmp_path)
  assert checked.lengths.line == (
      'lengths: --sequence-length auto -> 8 words (95th percentile 3; '
      'truncates 5.0 % of 20 training texts), --char-ngram-length auto -> '
      '16 n-grams (95th percentile 9; truncates 5.0 %)')
  assert (checked.config.text.sequence_length,
          checked.config.text.char_ngram_length) == (8, 16)
  assert checked.lengths.summary['sequence_length'] == {
      'length': 8, 'auto': True, 'percentile': 3, 'capped_at': 0,
      'texts': 20, 'truncated_share': 0.05}


def test_run_explicit_lengths_win_and_print_nothing(data, tmp_path):
  checked = _preflight(data, tmp_path, '--sequence-length', '24',
                       '--char-ngram-length', '48')
  assert checked.lengths.line == ''
  assert (checked.config.text.sequence_length,
          checked.config.text.char_ngram_length) == (24, 48)
  assert checked.lengths.summary == {
      'sequence_length': {'length': 24, 'auto': False},
      'char_ngram_length': {'length': 48, 'auto': False}}
  one = _preflight(data, tmp_path / 'b', '--sequence-length', '24')
  assert one.lengths.line == (
      'lengths: --sequence-length 24 (given), --char-ngram-length auto -> 16 '
      'n-grams (95th percentile 9; truncates 5.0 % of 20 training texts)')


def test_length_option_rejects_words_other_than_auto(capsys):
  with pytest.raises(SystemExit) as exit_info:
    cli.build_parser().parse_args(['run', '--sequence-length', 'long'])
  assert exit_info.value.code == 2
  assert ("argument --sequence-length: expected 'auto' or a whole number, "
          "got 'long'") in capsys.readouterr().err


COMPILE = ('compile', '--target', 'kubeflow', '--pipeline-root',
           'gs://bucket/root', '--image', 'gcr.io/proj/autostrategy:1')


def test_compile_resolves_auto_from_readable_data(data, tmp_path, capsys):
  output = str(tmp_path / 'pipeline.json')
  code = cli.main([*COMPILE, '--data', 'file://' + data, '--presplit',
                   '--output', output, '--sequence-length', '32'])
  out = capsys.readouterr().out
  assert code == 0, out
  assert ('lengths: --sequence-length 32 (given), --char-ngram-length auto '
          '-> 16 n-grams (95th percentile 9; truncates 5.0 % of 20 training '
          'texts)\n') in out
  tasks = json.load(open(output))['pipelineSpec']['root']['dag']['tasks']
  config = json.loads(tasks['Transform']['inputs']['parameters'][
      'custom_config']['runtimeValue']['constant'])
  text = config['text']
  text = json.loads(text) if isinstance(text, str) else text
  assert (text['sequence_length'], text['char_ngram_length']) == (32, 16)


def test_compile_fails_on_unreadable_data_naming_the_path(tmp_path, capsys):
  missing = 'file://' + str(tmp_path / 'nowhere')
  output = tmp_path / 'pipeline.json'
  code = cli.main([*COMPILE, '--data', missing, '--output', str(output)])
  assert code == 2
  assert capsys.readouterr().err == (
      f'error: --data {missing}: no training CSV files match {missing}/*.csv, '
      'so the lengths cannot be picked from the data at compile time; pass a '
      'number instead of auto: --sequence-length 64 --char-ngram-length 512\n')
  assert not output.exists()


def test_sentencepiece_sequence_length_auto_is_the_fixed_default(data,
                                                                 tmp_path):
  # The preflight cannot count SentencePiece pieces; n-grams are counted.
  checked = _preflight(data, tmp_path, '--sentencepiece-model', 'sp.model')
  assert checked.lengths.line == (
      'lengths: --sequence-length 64 (SentencePiece pieces are not counted; '
      'the fixed default), --char-ngram-length auto -> 16 n-grams (95th '
      'percentile 9; truncates 5.0 % of 20 training texts)')
  assert (checked.config.text.sequence_length,
          checked.config.text.char_ngram_length) == (64, 16)
