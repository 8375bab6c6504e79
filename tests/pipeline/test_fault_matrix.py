"""Faults end cleanly: real CLI processes on one output directory.

One chain, each fault followed by a rerun of the same command that resumes:

1. SIGINT during Transform                     -> exit 130, status interrupted
2. rerun under a 20 MB file-size limit          -> exit 1 (EFBIG) in the Trainer
   (upstream of Transform comes from the cache; Transform runs again)
3. rerun, SIGTERM during the Trainer (epoch 1)  -> exit 143
4. rerun, SIGINT during the Evaluator           -> exit 130
5. rerun without a fault                        -> exit 0, a model is pushed

Every failed run: exit code, the last line of stderr, summary.json's status
and component, MLMD's state of the stopped component, nothing pushed. Every
rerun: the components the previous run completed are CACHED. Each case's
console is printed (`pytest -rP` shows it for a passing run).
"""

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# 1 epoch would end the Trainer before a signal could be timed on its epoch
# line; 2 epochs of a small sample are enough. No AUC gate: the point is the
# faults, and a 300-row model is near chance.
RUN_ARGS = ('--epochs', '2', '--sequence-length', '64',
            '--per-replica-batch-size', '16', '--auc-threshold', '0')
UPSTREAM = ('CsvExampleGen', 'StatisticsGen', 'ExampleValidator',
            'AnomaliesGate')
RESUMES = 'completed steps are kept and a rerun of the same command resumes'


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  root = tmp_path_factory.mktemp('faults') / 'data'
  subprocess.run([sys.executable, '-m', 'tfx_autostrategy.sample_data',
                  '--rows', '300', '--seed', '5', '--output', str(root)],
                 check=True)
  return str(root)


def _file_size_limit(megabytes):
  def limit():
    # SIGXFSZ would kill the process; ignored, the write fails with EFBIG.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE,
                       (megabytes << 20, megabytes << 20))
  return limit


def run(data, output, signal_on=None, fsize_mb=0):
  """`autostrategy run`; `signal_on=(line pattern, delay s, signal)`.

  Returns (exit code, stdout, stderr, summary.json).
  """
  proc = subprocess.Popen(
      [sys.executable, '-m', 'tfx_autostrategy.cli', 'run', '--data', data,
       '--output', output, *RUN_ARGS],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      preexec_fn=_file_size_limit(fsize_mb) if fsize_mb else None)
  lines = []
  for line in proc.stdout:
    lines.append(line)
    if signal_on and re.search(signal_on[0], line):
      time.sleep(signal_on[1])
      proc.send_signal(signal_on[2])
      signal_on = None
  stderr = proc.stderr.read()
  code = proc.wait(timeout=900)
  with open(os.path.join(output, 'summary.json')) as f:
    summary = json.load(f)
  return code, ''.join(lines), stderr, summary


def states(summary):
  return {c['component']: c['state'] for c in summary['components']}


def pushed(output):
  serving = os.path.join(output, 'serving_model')
  return sorted(os.listdir(serving)) if os.path.isdir(serving) else []


def console(code, stdout, stderr):
  return f'exit {code}\n--- stdout\n{stdout[-3000:]}\n--- stderr\n{stderr[-3000:]}'


def check_interrupted(result, component, name, code, output):
  got, stdout, stderr, summary = result
  shown = console(*result[:3])
  print(f'=== {name} during {component}\n{shown}')
  assert got == code, shown
  last = stderr.strip().splitlines()[-1]
  # Rarely, code inside the component swallows the signal's exception (a bare
  # `except:`): the component finishes and the run stops before the next one
  # starts, and says so. Either way nothing after it runs, nothing is pushed.
  lost = last.startswith(f'interrupted: {component} finished despite')
  if lost:
    print('(the exception was lost in the component; stopped after it)')
    assert last == (
        f'interrupted: {component} finished despite {name} (its exception was '
        "lost in that step's code) and the run stopped before the next step; "
        f'{RESUMES}'), shown
  else:
    assert last == (
        f'interrupted: {component} was stopped by {name}; {RESUMES}'), shown
  assert 'Traceback' not in stderr, shown
  assert re.search(rf'pipeline stopped by {name} after \d+ s in {component}; '
                   r'no model was pushed in this run\.', stdout), shown
  assert (summary['status'], summary['interrupted_component'],
          summary['signal'], summary['pushed_model']) == (
              'interrupted', component, name, None)
  assert states(summary)[component] == ('COMPLETE' if lost else 'CANCELED'), (
      summary['components'])
  assert states(summary).get('Pusher') in (None, 'CANCELED'), shown
  assert pushed(output) == []
  # The lock is released cleanly: emptied, not left for a take-over.
  with open(os.path.join(output, '.autostrategy.lock')) as f:
    assert f.read() == ''


def test_faults_end_cleanly_and_each_rerun_resumes(data, tmp_path):
  output = str(tmp_path / 'out')

  # 1. Ctrl-C during Transform.
  first = run(data, output, (r'^\s+Transform\s+\.\.\.$', 3, signal.SIGINT))
  check_interrupted(first, 'Transform', 'SIGINT', 130, output)
  assert all(states(first[3])[c] == 'COMPLETE' for c in UPSTREAM)

  # 2. The rerun resumes; its Trainer hits a 20 MB file-size limit (the
  # checkpoint's variables file is the first file that large).
  code, stdout, stderr, summary = second = run(data, output, fsize_mb=20)
  shown = console(*second[:3])
  print(f'=== 20 MB file-size limit\n{shown}')
  assert code == 1, shown
  assert re.fullmatch(
      r'error: file size limit exceeded while AutoStrategyTrainer wrote '
      + re.escape(os.path.join(output, 'pipeline_root', 'AutoStrategyTrainer'))
      + r'/\S+; raise the file-size limit \(ulimit -f\) or choose another '
      r'--output; completed steps are kept and a rerun resumes',
      stderr.strip().splitlines()[-1]), shown
  assert 'Traceback' not in stderr, shown
  assert (summary['status'], summary['failed_component'],
          summary['pushed_model']) == ('failed', 'AutoStrategyTrainer', None)
  assert summary['error'] == stderr.strip().splitlines()[-1][len('error: '):]
  assert all(states(summary)[c] == 'CACHED' for c in UPSTREAM), shown
  assert states(summary)['Transform'] == 'COMPLETE'
  assert states(summary)['AutoStrategyTrainer'] == 'FAILED'
  assert pushed(output) == []

  # 3. SIGTERM during the Trainer's second epoch.
  third = run(data, output, (r'epoch 1/2:', 1, signal.SIGTERM))
  check_interrupted(third, 'AutoStrategyTrainer', 'SIGTERM', 143, output)
  assert states(third[3])['Transform'] == 'CACHED'

  # 4. Ctrl-C during the Evaluator.
  fourth = run(data, output, (r'^\s+Evaluator\s+\.\.\.$', 2, signal.SIGINT))
  check_interrupted(fourth, 'Evaluator', 'SIGINT', 130, output)
  assert states(fourth[3])['AutoStrategyTrainer'] == 'COMPLETE'

  # 5. The same command without a fault: everything before the Evaluator
  # comes from the cache, and a model is pushed.
  code, stdout, stderr, summary = fifth = run(data, output)
  print(f'=== rerun without a fault\n{console(*fifth[:3])}')
  assert code == 0, console(*fifth[:3])
  assert summary['status'] == 'pushed'
  assert all(states(summary)[c] == 'CACHED'
             for c in UPSTREAM + ('Transform', 'AutoStrategyTrainer'))
  assert states(summary)['Evaluator'] == 'COMPLETE'
  assert len(pushed(output)) == 1
  assert summary['pushed_model'].startswith(
      os.path.join(output, 'serving_model', pushed(output)[0]))
