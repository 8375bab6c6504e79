"""Tests of the conversion in scripts/fetch_real_data.py (no network)."""

import csv
import importlib.util
import os

import pytest

_SCRIPT = os.path.join(os.path.dirname(__file__), os.pardir, 'scripts',
                       'fetch_real_data.py')


def _load_script():
  # scripts/ is not a package; load the file itself rather than touching
  # sys.path.
  spec = importlib.util.spec_from_file_location('fetch_real_data', _SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


fetch = _load_script()


def _source(sentiment, text):
  return {'sentiment': sentiment, 'confidence': '1', 'text': text}


def test_dedup_key_ignores_case_whitespace_and_urls():
  assert (fetch.dedup_key('RT @united  Great\tflight http://t.co/abc')
          == fetch.dedup_key('rt @United great flight https://t.co/xyz'))
  assert fetch.dedup_key('great flight') != fetch.dedup_key('bad flight')


def test_convert_maps_labels_and_drops_neutral():
  rows = [_source('negative', 'worst airline ever'),
          _source('neutral', 'boarding now'),
          _source('positive', 'thanks for the upgrade')]
  train, evaluation, counts = fetch.convert(rows, eval_fraction=0.5)
  converted = sorted(train + evaluation, key=lambda row: row['id'])
  assert converted == [
      {'id': 'cf-1', 'comment_text': 'worst airline ever', 'toxic': '1',
       'lang': 'en'},
      {'id': 'cf-3', 'comment_text': 'thanks for the upgrade', 'toxic': '0',
       'lang': 'en'},
  ]
  assert counts['neutral'] == 1
  assert counts['source_rows'] == 3


def test_convert_keeps_first_duplicate_and_drops_conflicting_texts():
  rows = [_source('negative', 'Delayed again http://t.co/1'),
          _source('negative', 'delayed   again http://t.co/2'),
          _source('positive', 'on time!'),
          _source('negative', 'ON TIME!')]
  train, evaluation, counts = fetch.convert(rows)
  assert [row['id'] for row in train + evaluation] == ['cf-1']
  assert counts['duplicates'] == 2
  assert counts['conflicting_label_texts'] == 1


def test_convert_turns_line_breaks_into_spaces():
  train, evaluation, _ = fetch.convert(
      [_source('negative', 'lost my bag\rat lax\r\nagain')])
  assert [row['comment_text'] for row in train + evaluation] == [
      'lost my bag at lax again']


def test_convert_rejects_unknown_sentiment_naming_the_row():
  with pytest.raises(ValueError, match=r'data row 2: unknown sentiment '
                     r"'angry'"):
    fetch.convert([_source('positive', 'ok'), _source('angry', 'grr')])


def test_split_is_seeded_deterministic_and_near_the_fraction():
  rows = [_source('negative' if i % 3 else 'positive', f'tweet number {i} x')
          for i in range(2000)]
  first = fetch.convert(rows, seed=1, eval_fraction=0.2)
  assert fetch.convert(rows, seed=1, eval_fraction=0.2) == first
  # The split depends on the text, not on where the row is in the file.
  reordered = fetch.convert(list(reversed(rows)), seed=1, eval_fraction=0.2)
  assert ({row['comment_text'] for row in reordered[1]}
          == {row['comment_text'] for row in first[1]})
  assert 0.17 < len(first[1]) / 2000 < 0.23
  other_seed = fetch.convert(rows, seed=2, eval_fraction=0.2)
  assert {row['id'] for row in other_seed[1]} != {row['id'] for row in first[1]}


def test_read_source_decodes_mac_roman_and_quoted_fields():
  data = ('sentiment,confidence,text\r'
          'negative,0.9,"caf\u00e9, no\rthanks"\r').encode('mac_roman')
  assert fetch.read_source(data) == [
      {'sentiment': 'negative', 'confidence': '0.9',
       'text': 'caf\u00e9, no\rthanks'}]


def test_write_csv_round_trips_in_jigsaw_format(tmp_path):
  rows = [{'id': 'cf-1', 'comment_text': 'a, "quoted" comment', 'toxic': '1',
           'lang': 'en'}]
  path = str(tmp_path / 'train' / 'data.csv')
  fetch.write_csv(path, rows)
  with open(path, encoding='utf-8', newline='') as f:
    assert f.readline() == 'id,comment_text,toxic,lang\n'
    f.seek(0)
    assert list(csv.DictReader(f)) == rows
