"""bench/quality.py across data sets: discovery, reports, Markdown, exit codes.

No pipeline runs here (that takes minutes per data set): the baseline runs
for real on tiny splits with `--skip-pipeline`, and the pipeline's results are
given as saved reports for `--report-only`.
"""

import csv
import json
import os

import pytest

from bench import quality
from bench import quality_tables


def _write_split(path, rows):
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, 'data.csv'), 'w', encoding='utf-8',
            newline='') as f:
    writer = csv.writer(f, lineterminator='\n')
    writer.writerow(['id', 'comment_text', 'toxic', 'lang'])
    writer.writerows(rows)


def _data_set(root, name, dataset_json=None):
  words = {1: 'awful terrible bad', 0: 'lovely great fine'}
  rows = [(str(i), f'{words[i % 2]} item{i}', str(i % 2), 'en')
          for i in range(40)]
  _write_split(os.path.join(root, name, 'train'), rows[:30])
  _write_split(os.path.join(root, name, 'eval'), rows[30:])
  if dataset_json:
    with open(os.path.join(root, name, 'dataset.json'), 'w') as f:
      json.dump(dataset_json, f)
  return os.path.join(root, name)


def test_discover_finds_one_set_or_every_subdirectory(tmp_path):
  root = str(tmp_path)
  single = _data_set(root, 'b_set')
  _data_set(root, 'a_set')
  os.makedirs(os.path.join(root, 'not_a_set', 'train'))
  assert quality_tables.discover(single) == [('b_set', single)]
  assert quality_tables.discover(root) == [
      ('a_set', os.path.join(root, 'a_set')),
      ('b_set', os.path.join(root, 'b_set'))]
  assert quality_tables.discover(root, ['b_set']) == [('b_set', single)]
  with pytest.raises(FileNotFoundError,
                     match=r'no data set named zz \(found: a_set, b_set\)'):
    quality_tables.discover(root, ['zz'])
  with pytest.raises(FileNotFoundError, match=r'not_a_set: no data set'):
    quality_tables.discover(os.path.join(root, 'not_a_set'))


def test_skip_pipeline_runs_the_baseline_on_every_set(tmp_path, capsys):
  data, out = str(tmp_path / 'data'), str(tmp_path / 'out')
  _data_set(data, 'first', {'lang': 'de', 'description': 'German mails',
                            'source': {'package': 'pkg'}})
  _data_set(data, 'second')
  assert quality.main(['--data', data, '--output', out, '--skip-pipeline',
                       '--baseline-c', '1']) == 0
  for name in ('first', 'second'):
    report = json.load(open(os.path.join(out, name, 'quality.json')))
    assert report['baseline']['auc'] == 1.0  # the words separate the labels
    assert report['data']['eval_rows'] == 10
    assert report['pipeline']['skipped'] is True
  table = open(os.path.join(out, 'quality.md'), encoding='utf-8').read()
  assert '| first | de | 10 | 50.0% | 1.0000 | n/a | n/a |' in table
  assert '### second' in table and 'German mails. Source:' in table
  assert '== first' in capsys.readouterr().out


_LOG = """2026-12-06 06:29:20,100 INFO root: autostrategy: epoch 1/2 started
Epoch 1/2
2026-12-06 06:30:00,000 INFO root: autostrategy: epoch 1/2 finished {}
2026-12-06 06:30:00,100 INFO root: autostrategy: epoch 2/2 started
2026-12-06 06:30:21,600 INFO root: autostrategy: epoch 2/2 finished {}
"""


def test_fit_seconds_spans_the_last_complete_run_of_epochs():
  assert quality_tables.fit_seconds(_LOG) == 61.5
  # A second run in the same log (the same output directory) counts alone.
  rerun = _LOG + _LOG.replace('06:29:20', '07:00:00').replace(
      '06:30:21,600', '07:00:30,000')
  assert quality_tables.fit_seconds(rerun) == 29.9
  assert quality_tables.fit_seconds(_LOG.rsplit('2026', 1)[0]) is None


def _saved_report(out, name, baseline, ours, trainer_seconds):
  os.makedirs(os.path.join(out, name, 'pipeline', 'logs'))
  with open(os.path.join(out, name, 'pipeline', 'logs', 'pipeline.log'),
            'w') as f:
    f.write(_LOG)
  with open(os.path.join(out, name, 'pipeline', 'summary.json'), 'w') as f:
    json.dump({'components': [
        {'component': 'AutoStrategyTrainer', 'state': 'COMPLETE',
         'seconds': trainer_seconds}]}, f)
  report = {'data': {'train_rows': 30, 'eval_rows': 10,
                     'train_positive_rate': 0.5, 'eval_positive_rate': 0.5},
            'baseline': {'auc': baseline, 'train_seconds': 1.5, 'c': 4.0,
                         'features': 99},
            'pipeline': {'auc': ours, 'wall_seconds': 300.0, 'exit_code': 0},
            'difference': None if ours is None else round(ours - baseline, 4),
            'passed': ours is not None and ours >= baseline,
            'pipeline_command': 'autostrategy run --data D'}
  with open(os.path.join(out, name, 'quality.json'), 'w') as f:
    json.dump(report, f)


def test_report_only_tables_and_exit_codes(tmp_path):
  data, out = str(tmp_path / 'data'), str(tmp_path / 'out')
  _data_set(data, 'first')
  _data_set(data, 'second')
  _saved_report(out, 'first', 0.9, 0.95, 120.25)
  _saved_report(out, 'second', 0.9, 0.85, 80.0)
  md = str(tmp_path / 'tables.md')
  args = ['--data', data, '--output', out, '--report-only', '--markdown', md]
  assert quality.main(args) == 1  # lower on 'second'
  table = open(md, encoding='utf-8').read()
  assert '| 0.9000 | 0.9500 | +0.0500 | 1.5 | 61.5 | 120.2 | 300.0 |' in table
  assert '| second | ? | 10 | 50.0% | 0.9000 | 0.8500 | -0.0500 |' in table
  assert quality.main(args + ['--only', 'first']) == 0
  _saved_report(out + '2', 'first', 0.9, None, 1.0)
  assert quality.main(['--data', data, '--output', out + '2', '--only',
                       'first', '--report-only']) == 2


def test_report_only_without_saved_reports_names_the_file(tmp_path, capsys):
  data = str(tmp_path / 'data')
  _data_set(data, 'first')
  assert quality.main(['--data', data, '--output', str(tmp_path / 'none'),
                       '--report-only']) == 2
  assert 'none/first/quality.json: missing or not JSON' in (
      capsys.readouterr().err)
