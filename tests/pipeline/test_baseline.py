"""A worse model never replaces the serving one: three real CLI runs, one OUT.

The Evaluator compares each candidate with the latest blessed model (the
Resolver's LatestBlessedModelStrategy); the first run has no baseline and is
judged by --auc-threshold alone.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import run_cli

pytestmark = pytest.mark.e2e

COMMON = ('--sequence-length', '64', '--per-replica-batch-size', '16',
          '--json')
NOT_BLESSED = re.compile(
    r"error: model not blessed: auc (\d\.\d{4}) is below the serving model's "
    r'(\d\.\d{4}) \(min gain 0\.0\); the serving model stays')


def versions(output):
  return sorted(os.listdir(os.path.join(output, 'serving_model')))


def result_of(proc):
  return json.loads(proc.stdout.strip().splitlines()[-1])


def blessing_rows(report_path):
  """The report's Blessing table as {row name: cell text}."""
  with open(report_path) as f:
    html = f.read()
  section = html.split('<h2>Blessing</h2>', 1)[1].split('</table>', 1)[0]
  cells = [re.sub(r'<[^>]+>', '', c) for c in
           re.findall(r'<td[^>]*>(.*?)</td>', section)]
  return dict(zip(cells[0::2], cells[1::2]))


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  root = tmp_path_factory.mktemp('baseline') / 'data'
  subprocess.run([sys.executable, '-m', 'tfx_autostrategy.sample_data',
                  '--rows', '800', '--seed', '11', '--output', str(root)],
                 check=True)
  return str(root)


def test_worse_model_is_refused_and_a_better_one_is_pushed(data, tmp_path):
  output = str(tmp_path / 'out')

  first = run_cli('run', '--data', data, '--output', output, '--epochs', '2',
                  *COMMON)
  assert first.returncode == 0, first.stderr[-3000:]
  good = result_of(first)
  assert good['pushed_model'] and good['blessed'] is True
  # No blessed model yet: judged by the absolute threshold alone.
  assert good['baseline_metrics'] is None
  assert versions(output) == [os.path.basename(good['pushed_model'])]
  served_files = sorted(os.listdir(good['pushed_model']))

  # Barely trained, and the absolute threshold is off: only the comparison
  # with the serving model can refuse it.
  second = run_cli('run', '--data', data, '--output', output, '--epochs', '1',
                   '--learning-rate', '1e-5', '--auc-threshold', '0', *COMMON)
  assert second.returncode == 3, second.stdout[-2000:] + second.stderr[-3000:]
  worse = result_of(second)
  assert worse['pushed_model'] is None and worse['blessed'] is False
  assert worse['baseline_metrics']['auc'] == pytest.approx(
      good['metrics']['auc'], abs=1e-6)
  assert worse['metrics']['auc'] < good['metrics']['auc'] - 0.05
  match = NOT_BLESSED.fullmatch(second.stderr.strip().splitlines()[-1])
  assert match, second.stderr[-2000:]
  assert float(match.group(1)) == pytest.approx(worse['metrics']['auc'],
                                                abs=1e-4)
  assert float(match.group(2)) == pytest.approx(good['metrics']['auc'],
                                                abs=1e-4)
  summary = json.load(open(os.path.join(output, 'summary.json')))
  assert summary['baseline_metrics']['auc'] == pytest.approx(
      good['metrics']['auc'], abs=1e-6)
  assert summary['metrics']['auc'] == pytest.approx(worse['metrics']['auc'])
  # The serving model stays, untouched.
  assert versions(output) == [os.path.basename(good['pushed_model'])]
  assert sorted(os.listdir(good['pushed_model'])) == served_files
  # The not-blessed run has a report that says why, with both models' AUC.
  assert worse['report'] == os.path.join(os.path.abspath(output),
                                         'report.html')
  rows = blessing_rows(worse['report'])
  assert rows['blessed'] == 'no'
  assert rows['candidate AUC'] == f"{worse['metrics']['auc']:.4f}"
  assert rows['baseline AUC'] == f"{good['metrics']['auc']:.4f}"
  assert rows['baseline (serving) model'] != 'none (first blessed model)'
  assert rows['pushed to'] == 'nothing was pushed'

  # Trained longer: not worse than the serving model, so it is pushed.
  third = run_cli('run', '--data', data, '--output', output, '--epochs', '4',
                  *COMMON)
  assert third.returncode == 0, third.stderr[-3000:]
  better = result_of(third)
  assert better['blessed'] is True
  assert better['baseline_metrics']['auc'] == pytest.approx(
      good['metrics']['auc'], abs=1e-6)
  assert better['metrics']['auc'] >= good['metrics']['auc']
  assert len(versions(output)) == 2
  assert better['pushed_model'] == os.path.join(output, 'serving_model',
                                                versions(output)[-1])
