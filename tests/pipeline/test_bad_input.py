"""Bad input and faults: every failure named, nothing pushed, anomalies gate.

Each case runs the real `autostrategy run` in a subprocess and checks its exit
status, the last line of stderr (the cause, not Beam's log) and that no model
was pushed. Exit codes: 0 pushed, 1 a component failed, 2 rejected before
running, 3 not blessed (see tfx_autostrategy/cli/failures.py and the README's
failure-mode table).

Preflight rejections (exit 2) take about a second each: TFX is not imported
before the data is checked. The pipeline cases share runs to stay cheap (the
reason this file is one file of over 300 lines):

* schema drift (a new column and a changed type) stops at the AnomaliesGate;
* one output directory then sees three runs of a small data set that has
  empty and whitespace-only comments and a harmless new column:
  A. `--allow-anomalies` and a per-replica batch larger than the eval split:
     the gate lets it through, Transform runs, the Trainer stops naming the
     split, the count and the global batch (exit 1);
  B. the same with a batch that fits: upstream outputs come from the cache,
     the model trains on the empty comments and is pushed (exit 0);
  C. the same with an unreachable AUC threshold: not blessed, nothing new
     pushed, B's pushed model untouched, summary.json says so (exit 3).

Not repeated here: a killed Trainer resuming from its last epoch
(tests/components/test_trainer.py) and a multi-worker cluster whose worker
is missing failing within a bound instead of hanging
(tests/distribute/test_multiworker.py).
"""

import csv
import html
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import run_cli

from tfx_autostrategy.cli import failures
from tfx_autostrategy.preflight import csv_check
from tfx_autostrategy import sample_data

BAD = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'testdata',
                   'bad')
GOOD_SINGLE = os.path.join(os.path.dirname(os.path.dirname(__file__)),
                           'testdata', 'csv', 'single')
UPSTREAM = ('CsvExampleGen', 'ImportSchemaGen', 'StatisticsGen',
            'ExampleValidator', 'AnomaliesGate', 'Transform')
# Small, fast settings for the runs that train.
TRAIN_ARGS = ('--epochs', '1', '--per-replica-batch-size', '16')


def last_line(text):
  lines = [line for line in text.splitlines() if line.strip()]
  return lines[-1] if lines else ''


def pushed_versions(output):
  """Versioned model directories the Pusher wrote under the output."""
  serving = os.path.join(output, 'serving_model')
  return sorted(os.listdir(serving)) if os.path.isdir(serving) else []


def read_summary(output):
  with open(os.path.join(output, 'summary.json')) as f:
    return json.load(f)


def states(summary):
  return {c['component']: c['state'] for c in summary['components']}


def bad(name, *parts):
  return os.path.join(BAD, name, *parts)


# Fixture directory, extra options, regular expression the last stderr line
# must match in full (paths are relative, as the user typed them).
PREFLIGHT_CASES = {
    'unbalanced_quote': (
        bad('unbalanced_quote'), (),
        re.escape(f'error: {bad("unbalanced_quote", "comments.csv")}:3: '
                  'unbalanced quote: a quoted field opens on this line and is '
                  'still open at the end of the file (line 5): ') +
        r"""'q2,"You are an idiot, go away,1,en'"""),
    'wrong_field_count': (
        bad('wrong_field_count'), (),
        re.escape(f'error: {bad("wrong_field_count", "comments.csv")}:4: '
                  'expected 4 fields (id, comment_text, toxic, lang), found '
                  "5: 'f3,an unquoted, comma splits this text,1,en'")),
    'non_utf8_text': (
        bad('non_utf8'), (),
        re.escape(f'error: {bad("non_utf8", "comments.csv")}:3: invalid '
                  'UTF-8 byte 0xe9 at byte offset 75 of the file; re-encode '
                  'the file as UTF-8') + '.*'),
    'missing_text_column': (
        bad('missing_text_column'), (),
        re.escape(f'error: {bad("missing_text_column", "comments.csv")}:1: '
                  "header has no text column 'comment_text' (columns found: "
                  "['id', 'text', 'toxic', 'lang']); choose the text column "
                  'with --text-column')),
    'missing_label_column': (
        bad('missing_label_column'), (),
        re.escape(f'error: {bad("missing_label_column", "comments.csv")}:1: '
                  "header has no label column 'toxic' (columns found: "
                  "['id', 'comment_text', 'label', 'lang']); choose the label "
                  'column with --label-column')),
    'labels_outside_0_1': (
        bad('bad_labels'), (),
        re.escape(f'error: {bad("bad_labels", "comments.csv")}:3: label '
                  "column 'toxic' has values outside {0, 1}: '2' in 2 rows "
                  f'(first at {bad("bad_labels", "comments.csv")}:3); '
                  f"'-1' in 1 row (first at "
                  f'{bad("bad_labels", "comments.csv")}:4); '
                  f"'yes' in 1 row (first at "
                  f'{bad("bad_labels", "comments.csv")}:5)')),
    'one_class_training_data': (
        bad('one_class'), (),
        re.escape(f'error: {bad("one_class")}: the training data has only '
                  "label 0 in column 'toxic' (6 rows); a classifier needs "
                  'rows of both labels 0 and 1')),
    'one_class_presplit_train_split': (
        bad('one_class_presplit'), (),
        re.escape(f'error: {bad("one_class_presplit", "train")}: the '
                  "training data has only label 1 in column 'toxic' (4 rows); "
                  'a classifier needs rows of both labels 0 and 1')),
    'presplit_eval_smaller_than_a_batch': (
        bad('too_few_rows'), ('--per-replica-batch-size', '16'),
        re.escape(f'error: {bad("too_few_rows", "eval")}: split \'eval\' has '
                  '3 rows, fewer than one global batch of 16 '
                  '(--per-replica-batch-size 16 x 1 replica); every training '
                  'and evaluation step needs a full batch; use more data or a '
                  'smaller --per-replica-batch-size')),
    'all_rows_fewer_than_a_batch': (
        GOOD_SINGLE, ('--per-replica-batch-size', '8'),
        re.escape(f'error: {GOOD_SINGLE}: 7 rows in all (to be split 4:1 '
                  'into train and eval), fewer than one global batch of 8 '
                  '(--per-replica-batch-size 8 x 1 replica); ') + '.*'),
    'negative_input_cache': (
        GOOD_SINGLE, ('--input-cache-mb', '-1'),
        re.escape('error: input_cache_mb must be >= 0, got -1')),
}


# The CLI's entry point, then which heavy packages it imported.
PREFLIGHT_PROBE = '''
import sys
from tfx_autostrategy import cli
code = cli.main(sys.argv[1:])
print('imported:', sorted(m for m in ('tfx', 'tensorflow') if m in sys.modules))
sys.exit(code)
'''


@pytest.mark.parametrize('case', sorted(PREFLIGHT_CASES))
def test_bad_input_is_rejected_before_running(case, tmp_path):
  data, extra, pattern = PREFLIGHT_CASES[case]
  output = tmp_path / 'out'
  proc = subprocess.run(
      [sys.executable, '-c', PREFLIGHT_PROBE, 'run', '--data', data,
       '--output', str(output), *extra],
      capture_output=True, text=True, timeout=300, check=False)
  assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
  assert re.fullmatch(pattern, last_line(proc.stderr)), last_line(proc.stderr)
  # Rejected before anything ran: no output directory, so nothing pushed.
  assert not output.exists()
  # Fast because neither TFX nor TensorFlow is imported before the data is
  # checked.
  assert proc.stdout.strip().splitlines()[-1] == 'imported: []'


def test_unwritable_output_directory_is_named(tmp_path):
  blocker = tmp_path / 'a_file'
  blocker.write_text('not a directory')
  output = blocker / 'out'
  proc = run_cli('run', '--data', GOOD_SINGLE, '--output', str(output),
                 '--per-replica-batch-size', '1', timeout=300)
  assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
  assert last_line(proc.stderr) == (
      f'error: {output}: output directory is not writable (Not a directory); '
      'pass a writable --output')
  if os.geteuid() != 0:  # Permission bits do not stop root.
    locked = tmp_path / 'locked'
    locked.mkdir(mode=0o500)
    proc = run_cli('run', '--data', GOOD_SINGLE, '--output',
                   str(locked / 'out'), '--per-replica-batch-size', '1',
                   timeout=300)
    assert proc.returncode == 2
    assert last_line(proc.stderr).startswith(
        f'error: {locked / "out"}: output directory is not writable '
        '(Permission denied')


def test_error_text_shows_the_innermost_cause_first_and_last_lines():
  detail = '\n'.join(f'line {i}' for i in range(2, 21))
  try:
    try:
      raise ValueError('what failed\n' + detail)
    except ValueError as inner:
      raise RuntimeError('Beam wrapper: pipeline step failed') from inner
  except RuntimeError as outer:
    text = failures.error_text(outer)
  assert text.splitlines() == (
      ['ValueError: what failed', '  ... (9 more lines in the log)'] +
      [f'line {i}' for i in range(11, 21)])


def write_rows(directory, rows, columns=None):
  """Writes Jigsaw-format rows; `columns` (name -> f(i, row)) replaces or adds
  columns, keeping the order of the Jigsaw ones."""
  columns = columns or {}
  header = list(sample_data.COLUMNS) + [
      c for c in columns if c not in sample_data.COLUMNS]
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, 'comments.csv'), 'w', newline='',
            encoding='utf-8') as f:
    writer = csv.writer(f, lineterminator='\n')
    writer.writerow(header)
    for i, row in enumerate(rows):
      writer.writerow([columns[c](i, row) if c in columns else row[c]
                       for c in header])
  return str(directory)


def rows_with_empty_text(count, seed):
  """Generated rows, every 25th comment empty or whitespace only."""
  rows = [dict(row) for row in sample_data.generate(count, seed=seed)]
  for i in range(0, count, 25):
    rows[i]['comment_text'] = '' if i % 50 else ' \t  '
  return rows


@pytest.mark.e2e
def test_schema_drift_stops_the_run_before_transform(tmp_path):
  # 'lang' holds integers (schema: BYTES) and 'source' is not in the schema.
  data = write_rows(tmp_path / 'data', rows_with_empty_text(200, seed=3),
                    {'lang': lambda i, row: i % 7,
                     'source': lambda i, row: 'forum'})
  output = str(tmp_path / 'out')
  proc = run_cli('run', '--data', data, '--output', output, *TRAIN_ARGS,
                 '--json')
  assert proc.returncode == 1, (proc.stdout[-3000:], proc.stderr[-3000:])
  tail = proc.stderr.strip().splitlines()[-6:]
  assert tail == [
      'error: AnomaliesGate failed: AnomaliesFoundError: ExampleValidator '
      'found 4 anomalies against the curated schema:',
      "  split 'train', column 'lang': Unexpected data type (Expected data of "
      'type: BYTES but got INT)',
      "  split 'train', column 'source': New column (column in data but not "
      'in schema)',
      "  split 'eval', column 'lang': Unexpected data type (Expected data of "
      'type: BYTES but got INT)',
      "  split 'eval', column 'source': New column (column in data but not "
      'in schema)',
      'Fix the data or update schemas/ (or pass --allow-anomalies).',
  ], proc.stderr[-3000:]
  assert 'pipeline failed after' in proc.stdout
  assert 'in AnomaliesGate; no model was pushed in this run.' in proc.stdout
  summary = read_summary(output)
  assert summary['status'] == 'failed'
  assert summary['failed_component'] == 'AnomaliesGate'
  assert summary['pushed_model'] is None
  assert states(summary) == {
      # The baseline Resolver depends on nothing upstream: it always runs.
      'latest_blessed_model_resolver': 'COMPLETE',
      'CsvExampleGen': 'COMPLETE', 'ImportSchemaGen': 'COMPLETE',
      'StatisticsGen': 'COMPLETE', 'ExampleValidator': 'COMPLETE',
      'AnomaliesGate': 'FAILED'}  # Transform and later never started.
  assert not os.path.exists(os.path.join(output, 'pipeline_root', 'Transform'))
  assert pushed_versions(output) == []
  # The report shows the run as far as it got: the failure and the anomalies.
  report_path = os.path.join(os.path.abspath(output), 'report.html')
  assert f'report: {report_path}' in proc.stdout.splitlines()
  with open(report_path) as f:
    report = html.unescape(f.read())
  assert '<h1>autostrategy run: failed</h1>' in report
  assert 'failed in AnomaliesGate: AnomaliesFoundError' in report
  assert ("<li class=\"bad\">split 'eval', column 'source': New column "
          '(column in data but not in schema)</li>') in report
  assert 'the Trainer did not run' in report


@pytest.fixture(scope='module')
def shared_run(tmp_path_factory):
  """Data and output directory that runs A, B and C share, in order."""
  root = tmp_path_factory.mktemp('bad_input_runs')
  rows = rows_with_empty_text(300, seed=11)
  # A new column: an anomaly that --allow-anomalies lets through; the model
  # ignores the column.
  data = write_rows(root / 'data', rows,
                    {'source': lambda i, row: 'forum' if i % 2 else 'wiki'})
  report = csv_check.check_csv_dir(data)
  assert report.empty_text['single_split'] >= 12
  return {'data': data, 'output': str(root / 'out')}


@pytest.fixture(scope='module')
def run_a(shared_run):
  """--allow-anomalies, per-replica batch 100 > the eval split: Trainer fails."""
  proc = run_cli('run', '--data', shared_run['data'], '--output',
                 shared_run['output'], '--allow-anomalies', '--epochs', '1',
                 '--per-replica-batch-size', '100', '--json')
  return proc, read_summary(shared_run['output'])


@pytest.fixture(scope='module')
def run_b(shared_run, run_a):
  """The same data and output with a batch that fits: trains and pushes."""
  del run_a  # Runs after A, into the same output.
  proc = run_cli('run', '--data', shared_run['data'], '--output',
                 shared_run['output'], '--allow-anomalies', *TRAIN_ARGS,
                 '--auc-threshold', '0.0', '--json')
  assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
  result = json.loads(last_line(proc.stdout))
  pushed = result['pushed_model']
  marker = os.path.join(pushed, 'saved_model.pb')
  return proc, result, read_summary(shared_run['output']), (
      os.path.getmtime(marker) if os.path.exists(marker) else None)


@pytest.fixture(scope='module')
def run_c(shared_run, run_b):
  """The same with an AUC threshold the model cannot reach: not blessed."""
  del run_b
  proc = run_cli('run', '--data', shared_run['data'], '--output',
                 shared_run['output'], '--allow-anomalies', *TRAIN_ARGS,
                 '--auc-threshold', '1.0', '--json')
  return proc, read_summary(shared_run['output'])


@pytest.mark.e2e
def test_too_few_eval_rows_for_a_batch_stop_the_trainer(shared_run, run_a):
  proc, summary = run_a
  assert proc.returncode == 1, (proc.stdout[-3000:], proc.stderr[-3000:])
  # Warned before running, stopped by the Trainer's exact count.
  assert re.search(r'warning: the eval split will hold about 60 of the 300 '
                   r'rows \(a 1-in-5 hash split\), fewer than one global '
                   r'batch of 100 ', proc.stdout), proc.stdout
  assert re.fullmatch(
      r"error: AutoStrategyTrainer failed: TrainingDataError: split 'eval' "
      r'has \d+ examples, fewer than one global batch of 100; use more data '
      r'or a smaller --per-replica-batch-size', last_line(proc.stderr)), (
          proc.stderr[-3000:])
  assert ('in AutoStrategyTrainer; no model was pushed in this run.'
          in proc.stdout)
  assert summary['status'] == 'failed'
  assert summary['failed_component'] == 'AutoStrategyTrainer'
  assert summary['pushed_model'] is None
  assert states(summary) == {**{c: 'COMPLETE' for c in UPSTREAM},
                             'latest_blessed_model_resolver': 'COMPLETE',
                             'AutoStrategyTrainer': 'FAILED'}
  assert pushed_versions(shared_run['output']) == []


@pytest.mark.e2e
def test_allow_anomalies_lets_a_drifted_run_go_on(shared_run, run_a):
  # Run A got past the gate to Transform; the gate logged the one drift (a
  # new column) and nothing about the empty comments.
  _, summary = run_a
  assert states(summary)['AnomaliesGate'] == 'COMPLETE'
  assert states(summary)['Transform'] == 'COMPLETE'
  with open(os.path.join(shared_run['output'], 'logs', 'pipeline.log')) as f:
    log = f.read()
  assert re.search(
      r"ExampleValidator found 2 anomalies against the curated schema:\n"
      r"  split 'train', column 'source': New column .*\n"
      r"  split 'eval', column 'source': New column .*\n"
      r'\(continuing: allow_anomalies is set\)', log)


@pytest.mark.e2e
def test_rerun_after_trainer_failure_reuses_upstream_and_trains_on_empty_text(
    shared_run, run_b):
  proc, result, summary, _ = run_b
  # Rows with empty or whitespace-only comments (12 of 300) trained and the
  # model was exported and pushed.
  assert result['blessed'] is True
  assert result['pushed_model'].startswith(
      os.path.join(shared_run['output'], 'serving_model'))
  assert os.path.exists(os.path.join(result['pushed_model'], 'saved_model.pb'))
  assert summary['status'] == 'pushed'
  # Everything before the failed Trainer came from the cache.
  assert states(summary) == {**{c: 'CACHED' for c in UPSTREAM},
                             'latest_blessed_model_resolver': 'COMPLETE',
                             'AutoStrategyTrainer': 'COMPLETE',
                             'Evaluator': 'COMPLETE', 'Pusher': 'COMPLETE'}
  assert 'error:' not in proc.stderr


@pytest.mark.e2e
def test_model_below_threshold_is_not_pushed_and_earlier_push_survives(
    shared_run, run_b, run_c):
  proc, summary = run_c
  _, earlier, _, earlier_mtime = run_b
  assert proc.returncode == 3, (proc.stdout[-3000:], proc.stderr[-3000:])
  assert re.fullmatch(r'error: model not blessed \(auc 0\.\d{4} is below the '
                      r'threshold 1\.0\); nothing was pushed',
                      last_line(proc.stderr)), proc.stderr[-3000:]
  result = json.loads(last_line(proc.stdout))
  assert result['blessed'] is False
  assert result['pushed_model'] is None
  assert 'blessed: False' in proc.stdout
  assert 'pushed model: none (not blessed)' in proc.stdout
  assert summary['status'] == 'not_blessed'
  assert summary['blessed'] is False
  assert summary['pushed_model'] is None
  # Only the Evaluator (new threshold) and Pusher ran again.
  assert states(summary)['AutoStrategyTrainer'] == 'CACHED'
  assert states(summary)['Evaluator'] == 'COMPLETE'
  # Nothing new pushed; the model run B pushed is still there, unchanged.
  assert pushed_versions(shared_run['output']) == [
      os.path.basename(earlier['pushed_model'])]
  marker = os.path.join(earlier['pushed_model'], 'saved_model.pb')
  assert os.path.getmtime(marker) == earlier_mtime
