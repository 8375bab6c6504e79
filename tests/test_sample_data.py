"""Tests of the synthetic sample-data generator (pure Python; no TensorFlow)."""

import collections
import csv
import os
import re
import time

import pytest

from tfx_autostrategy import sample_data
from tfx_autostrategy import sample_text

BUNDLED_SAMPLE = os.path.join(os.path.dirname(sample_data.__file__), 'sample',
                              sample_data.FILE_NAME)


@pytest.fixture(scope='module')
def rows():
  return list(sample_data.generate(3000, seed=0))


def read_csv(path):
  with open(path, encoding='utf-8', newline='') as f:
    return list(csv.reader(f))


def test_same_seed_same_rows_other_seed_other_rows():
  assert (list(sample_data.generate(200, seed=3)) ==
          list(sample_data.generate(200, seed=3)))
  assert (list(sample_data.generate(200, seed=3)) !=
          list(sample_data.generate(200, seed=4)))


def test_cli_output_is_byte_identical(tmp_path):
  for name in ('a', 'b'):
    assert sample_data.main(['--rows', '300', '--seed', '9', '--output',
                             str(tmp_path / name)]) == 0
  first = (tmp_path / 'a' / 'comments.csv').read_bytes()
  assert first == (tmp_path / 'b' / 'comments.csv').read_bytes()
  assert first.startswith(b'id,comment_text,toxic,lang\n')


def test_bundled_sample_is_what_the_generator_writes(tmp_path):
  # Guards against a stale checked-in file: `make sample` regenerates it.
  sample_data.main(['--rows', '3000', '--output', str(tmp_path)])
  with open(BUNDLED_SAMPLE, 'rb') as f:
    bundled = f.read()
  assert bundled == (tmp_path / 'comments.csv').read_bytes()
  assert len(bundled) < 1_000_000


def test_row_count_columns_and_types(rows):
  assert len(rows) == 3000
  assert all(tuple(row) == sample_data.COLUMNS for row in rows)
  assert {row['toxic'] for row in rows} == {0, 1}
  # bool is an int subclass; the CSV must hold 0/1, not True/False.
  assert {type(row['toxic']) for row in rows} == {int}
  assert list(sample_data.generate(0)) == []


def test_ids_are_unique_hex_and_independent_of_row_count(rows):
  ids = [row['id'] for row in rows]
  assert len(set(ids)) == len(ids)
  assert all(re.fullmatch(r'[0-9a-f]{16}', i) for i in ids)
  assert [r['id'] for r in sample_data.generate(50)] == ids[:50]
  assert ids[7] == sample_data.row_id(0, 7)
  assert sample_data.row_id(1, 7) != ids[7]


def test_positive_rate(rows):
  rate = sum(row['toxic'] for row in rows) / len(rows)
  assert 0.20 <= rate <= 0.30, rate


def test_all_languages_present(rows):
  counts = collections.Counter(row['lang'] for row in rows)
  assert set(counts) == set(sample_text.LANGUAGES)
  assert set(sample_text.LANGUAGES) >= {'en', 'es', 'it', 'tr', 'ru', 'fr',
                                        'pt', 'de'}
  # English is the largest language, as in Jigsaw.
  assert counts.most_common(1)[0][0] == 'en'
  assert {r['lang'] for r in sample_data.generate(200, langs=('tr', 'ru'))} == {
      'tr', 'ru'}


def test_text_is_multilingual_unicode(rows):
  text = ''.join(row['comment_text'] for row in rows)
  assert 'İ' in text and 'ı' in text  # Turkish dotted / dotless i
  assert re.search('[а-яё]', text)  # Cyrillic
  assert re.search('[éèàçãõñüöäß]', text)  # accented Latin
  assert re.search('[\U0001F300-\U0001FAFF]', text)  # emoji


def test_text_has_noise_urls_numbers_and_obfuscation(rows):
  text = '\n'.join(row['comment_text'] for row in rows)
  assert re.search(r'https?://|www\.', text)
  assert re.search(r'\b\d{4}\b', text)
  assert '1d10t' in text  # leet-speak insult
  assert re.search(r'(\w)\1\1', text)  # repeated letters
  assert re.search(r'\b[A-ZÀ-Þ]{3,} [A-ZÀ-Þ]{3,}\b', text)  # shouting


def test_empty_and_whitespace_comments_are_labelled_zero(rows):
  blank = [row for row in rows if not row['comment_text'].strip()]
  assert 10 <= len(blank) <= 100
  assert {row['toxic'] for row in blank} == {0}
  assert '' in {row['comment_text'] for row in blank}
  assert any(row['comment_text'] for row in blank)  # whitespace only


def test_csv_quoting_round_trips(rows, tmp_path):
  texts = [row['comment_text'] for row in rows]
  assert any(',' in t for t in texts)
  assert any('"' in t for t in texts)
  assert any('\n' in t for t in texts)
  path = str(tmp_path / 'out.csv')
  assert sample_data.write_csv(path, rows) == 3000
  table = read_csv(path)
  assert tuple(table[0]) == sample_data.COLUMNS
  assert table[1:] == [[r['id'], r['comment_text'], str(r['toxic']), r['lang']]
                       for r in rows]


def test_split_layout(tmp_path):
  counts = sample_data.write_dataset(str(tmp_path),
                                     sample_data.generate(1000, seed=2),
                                     split=True, shards=2)
  train = sorted(os.listdir(tmp_path / 'train'))
  assert train == ['comments-00000-of-00002.csv', 'comments-00001-of-00002.csv']
  assert sorted(os.listdir(tmp_path / 'eval')) == train
  assert sum(counts.values()) == 1000
  eval_rows = [row for name in train
               for row in read_csv(tmp_path / 'eval' / name)[1:]]
  assert 150 <= len(eval_rows) <= 250
  assert all(sample_data.is_eval_row(row[0]) for row in eval_rows)


def test_cli_split_flag(tmp_path, capsys):
  assert sample_data.main(['--rows', '100', '--output', str(tmp_path),
                           '--split']) == 0
  assert sorted(os.listdir(tmp_path)) == ['eval', 'train']
  assert 'train/comments.csv: ' in capsys.readouterr().out


@pytest.mark.parametrize('kwargs, message', [
    ({'rows': -1}, 'rows must be >= 0'),
    ({'rows': 5, 'langs': ('en', 'xx')}, r"unknown languages \['xx'\]"),
])
def test_invalid_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    sample_data.generate(**kwargs)


def test_cli_rejects_bad_arguments(tmp_path, capsys):
  with pytest.raises(SystemExit) as raised:
    sample_data.main(['--rows', '5', '--output', str(tmp_path), '--shards',
                      '0'])
  assert raised.value.code == 2
  assert 'shards must be >= 1' in capsys.readouterr().err


def test_streaming_write_is_fast(tmp_path):
  started = time.monotonic()
  sample_data.write_csv(str(tmp_path / 'big.csv'),
                        sample_data.generate(20_000))
  # About 0.5 s on an idle core (500k rows take ~12 s).
  assert time.monotonic() - started < 5


def test_tfidf_logistic_regression_auc_is_in_band(rows):
  """Learnable but not trivial: the difficulty the benchmarks rely on."""
  # Imported here: scikit-learn (in requirements.lock) takes about a second to
  # import, which the other tests of this module need not pay.
  from sklearn import linear_model  # pylint: disable=g-import-not-at-top
  from sklearn import metrics  # pylint: disable=g-import-not-at-top
  from sklearn.feature_extraction import text as feature_extraction  # pylint: disable=g-import-not-at-top
  train, test = rows[:2000], rows[2000:]
  vectorizer = feature_extraction.TfidfVectorizer()
  features = vectorizer.fit_transform([r['comment_text'] for r in train])
  model = linear_model.LogisticRegression(max_iter=1000).fit(
      features, [r['toxic'] for r in train])
  scores = model.predict_proba(
      vectorizer.transform([r['comment_text'] for r in test]))[:, 1]
  auc = metrics.roc_auc_score([r['toxic'] for r in test], scores)
  assert 0.80 <= auc <= 0.92, auc
