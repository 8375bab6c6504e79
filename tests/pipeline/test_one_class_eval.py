"""An eval split with one label: the AUC is undefined, never 0, and not blessed.

One real, small pipeline run (presplit data: a mixed training split and an
eval split of label-0 rows only, 1 epoch, short sequences) with
`--auc-threshold 0`, at which TFMA's AUC of 0 on such a split would pass:
the Evaluator's mean-label threshold refuses the blessing, the CLI reports
the AUC as undefined with the reason (null in JSON, 'undefined' in text) and
exits 2 (bad input), and nothing is pushed. Every language slice of that
split has one label too, and none of them adds a threshold failure: a
one-class slice cannot fail a run.

The preflight cases (one-class training data, exit 2 in a second) are in
test_bad_input.py's PREFLIGHT_CASES.
"""

import collections
import csv
import glob
import json
import os

import pytest

from conftest import run_cli

from tfx_autostrategy import sample_data

pytestmark = pytest.mark.e2e

TRAIN_ROWS = 160
EVAL_ROWS = 40
ARGS = ('--epochs', '1', '--per-replica-batch-size', '16',
        '--sequence-length', '32', '--auc-threshold', '0', '--json')


def write_split(directory, rows):
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, 'comments.csv'), 'w', newline='',
            encoding='utf-8') as f:
    writer = csv.writer(f, lineterminator='\n')
    writer.writerow(sample_data.COLUMNS)
    for row in rows:
      writer.writerow([row[c] for c in sample_data.COLUMNS])


def last_line(text):
  lines = [line for line in text.splitlines() if line.strip()]
  return lines[-1] if lines else ''


@pytest.fixture(scope='module')
def one_class_run(tmp_path_factory):
  """(process, --json result, summary.json, output dir, eval rows by lang)."""
  root = tmp_path_factory.mktemp('one_class_eval')
  data = str(root / 'data')
  train = list(sample_data.generate(TRAIN_ROWS, seed=21))
  assert {row['toxic'] for row in train} == {0, 1}
  negatives = [row for row in sample_data.generate(4 * EVAL_ROWS, seed=22)
               if row['toxic'] == 0][:EVAL_ROWS]
  assert len(negatives) == EVAL_ROWS
  write_split(os.path.join(data, 'train'), train)
  write_split(os.path.join(data, 'eval'), negatives)
  output = str(root / 'out')
  proc = run_cli('run', '--data', data, '--output', output, *ARGS)
  with open(os.path.join(output, 'summary.json')) as f:
    summary = json.load(f)
  by_lang = collections.Counter(row['lang'] for row in negatives)
  return proc, json.loads(last_line(proc.stdout)), summary, output, by_lang


def test_exit_2_names_the_undefined_auc_and_nothing_is_pushed(one_class_run):
  proc, result, summary, output, _ = one_class_run
  assert proc.returncode == 2, (proc.stdout[-3000:], proc.stderr[-3000:])
  assert last_line(proc.stderr) == (
      f'error: model not blessed: auc undefined: the eval split has only '
      f'label 0 ({EVAL_ROWS} rows); the eval data needs rows of both labels '
      '0 and 1; nothing was pushed')
  # The preflight saw it coming and said so before training.
  assert ("warning: split 'eval' has no rows with label 1; AUC is undefined "
          'there, so the model will not be blessed and nothing will be '
          'pushed') in proc.stdout
  assert 'below the threshold' not in proc.stderr
  assert result['blessed'] is False
  assert result['pushed_model'] is None
  assert summary['status'] == 'not_blessed'
  assert summary['pushed_model'] is None
  serving = os.path.join(output, 'serving_model')
  assert not os.path.isdir(serving) or not os.listdir(serving)


def test_auc_is_null_with_the_reason_in_json_and_summary(one_class_run):
  _, result, summary, _, by_lang = one_class_run
  for outcome in (result, summary):
    assert outcome['metrics']['auc'] is None
    assert outcome['metrics']['example_count'] == EVAL_ROWS
    assert outcome['metrics']['mean_label'] == 0.0
    # Measured metrics stay numbers: every row is a true or false negative.
    assert 0.0 <= outcome['metrics']['binary_accuracy'] <= 1.0
    expected = {'overall': f'the eval split has only label 0 ({EVAL_ROWS} '
                           'rows)'}
    for lang, rows in by_lang.items():
      expected[f'lang={lang}'] = (f'slice lang={lang} has only label 0 '
                                  f'({rows} row{"s" if rows != 1 else ""})')
      assert outcome['slices'][f'lang={lang}']['auc'] is None
      assert outcome['slices'][f'lang={lang}']['example_count'] == rows
    assert outcome['auc_undefined'] == expected
    assert outcome['baseline_metrics'] is None  # First run: no baseline.


def test_text_summary_says_undefined_not_zero(one_class_run):
  proc, _, _, _, by_lang = one_class_run
  lines = proc.stdout.splitlines()
  overall = next(line for line in lines
                 if line.startswith('metrics (eval split): '))
  assert 'auc=undefined' in overall, overall
  assert f'example_count={EVAL_ROWS:.4f}' in overall, overall
  assert lines[lines.index(overall) + 1] == (
      f'  auc undefined: the eval split has only label 0 ({EVAL_ROWS} rows)')
  lang = sorted(by_lang)[0]
  slice_line = next(line for line in lines
                    if line.startswith(f'  lang={lang}: '))
  assert slice_line.startswith(f'  lang={lang}: auc=undefined, '), slice_line
  rows = by_lang[lang]
  assert lines[lines.index(slice_line) + 1] == (
      f'    auc undefined: slice lang={lang} has only label 0 ({rows} '
      f'row{"s" if rows != 1 else ""})')
  assert 'auc=0.0000' not in proc.stdout


def test_only_the_overall_mean_label_refuses_the_blessing(one_class_run):
  # TFMA's own record of why it did not bless: the one-class overall split,
  # not the AUC (0 >= --auc-threshold 0 passes) and none of the one-class
  # language slices.
  import tensorflow_model_analysis as tfma  # pylint: disable=g-import-not-at-top
  _, _, _, output, _ = one_class_run
  evaluations = glob.glob(os.path.join(output, 'pipeline_root', 'Evaluator',
                                       'evaluation', '*'))
  assert len(evaluations) == 1, evaluations
  validation = tfma.load_validation_result(evaluations[0])
  assert validation.validation_ok is False
  failures = sorted(
      (tuple((k.column_name, k.bytes_value or k.int64_value)
             for k in per_slice.slice_key.single_slice_keys),
       failure.metric_key.name)
      for per_slice in validation.metric_validations_per_slice
      for failure in per_slice.failures)
  assert failures == [((), 'mean_label')], failures
