"""One run per output directory: `pipeline/run_lock.py`, with real processes.

A holder process takes the lock of OUT and waits on its stdin; a second,
real `autostrategy run` / `rehearse` on OUT must exit 2 at once, naming the
holder, and write nothing. A holder killed with SIGKILL leaves its metadata,
and the next taker warns, naming the dead run, and takes the lock over. No
test here starts the pipeline: the lock is taken before TFX is imported.
"""

import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import run_cli

from tfx_autostrategy.pipeline import run_lock

HOLDER_COMMAND = 'autostrategy run --output held-by-test'
# Takes the lock of argv[1], prints its metadata, waits for a line on stdin.
HOLDER = '''
import json, sys
from tfx_autostrategy.pipeline import run_lock
with run_lock.hold(sys.argv[1], command=sys.argv[2]) as metadata:
  print(json.dumps(metadata), flush=True)
  sys.stdin.readline()
'''
# Takes the lock of argv[1] and prints the lock file as it is while held.
TAKER = '''
import sys
from tfx_autostrategy.pipeline import run_lock
with run_lock.hold(sys.argv[1], command='taker'):
  with open(run_lock.lock_path(sys.argv[1])) as f:
    print(f.read(), end='', flush=True)
'''


def _start_holder(output_dir):
  """A real process holding the lock of `output_dir`: (process, metadata)."""
  process = subprocess.Popen(
      [sys.executable, '-c', HOLDER, str(output_dir), HOLDER_COMMAND],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  line = process.stdout.readline()
  assert line, f'the holder exited with {process.wait()} before locking'
  return process, json.loads(line)


def _lock_file(output_dir) -> str:
  with open(os.path.join(output_dir, '.autostrategy.lock')) as f:
    return f.read()


def _locked_message(output_dir, metadata) -> str:
  return (f'error: {output_dir}: another run is using this output directory '
          f'(pid {metadata["pid"]} on host {metadata["host"]}, started '
          f'{metadata["started"]}: {metadata["command"]}); wait for it to '
          'finish, or pass another --output')


def _taken_over_message(output_dir, metadata) -> str:
  return (f'warning: {output_dir}: taking over the lock left by a run that '
          f'is no longer running (pid {metadata["pid"]} on host '
          f'{metadata["host"]}, started {metadata["started"]}: '
          f'{metadata["command"]}); it was killed or crashed')


def take_over(path, metadata):
  """A real process takes the lock a dead run left; returns its stdout."""
  taker = subprocess.run([sys.executable, '-c', TAKER, str(path)],
                         capture_output=True, text=True, timeout=60,
                         check=False)
  assert taker.returncode == 0, taker.stderr
  assert taker.stderr.strip().splitlines() == [
      _taken_over_message(path, metadata)]
  return taker.stdout


def test_second_run_on_a_locked_output_exits_2_and_writes_nothing(tmp_path):
  output = tmp_path / 'out'
  output.mkdir()
  holder, metadata = _start_holder(output)
  try:
    assert metadata['pid'] == holder.pid
    assert metadata['host'] == socket.gethostname()
    for command in (['run'],  # The bundled sample: the data check passes.
                    ['rehearse', '--machine', 'nvidia-t4']):
      proc = run_cli(*command, '--output', str(output), timeout=120)
      assert proc.returncode == 2, proc.stdout + proc.stderr
      assert proc.stderr.strip().splitlines()[-1] == _locked_message(
          output, metadata)
      assert proc.stdout == ''
      # No summary.json, logs, schema, pipeline root or MLMD store: only the
      # holder's lock file, with the holder's metadata left as it was.
      assert sorted(os.listdir(output)) == ['.autostrategy.lock']
      assert json.loads(_lock_file(output)) == metadata
  finally:
    holder.communicate('\n', timeout=60)
  assert holder.returncode == 0
  assert _lock_file(output) == ''  # A clean release leaves no metadata.


def test_lock_of_a_killed_holder_is_taken_over_with_a_warning(tmp_path):
  holder, metadata = _start_holder(tmp_path)
  os.kill(holder.pid, signal.SIGKILL)
  holder.communicate(timeout=60)
  assert holder.returncode == -signal.SIGKILL
  assert json.loads(_lock_file(tmp_path)) == metadata  # Left behind.

  held = json.loads(take_over(tmp_path, metadata))
  assert held['pid'] != metadata['pid']
  assert held['command'] == 'taker'
  assert _lock_file(tmp_path) == ''


def test_killed_cli_run_leaves_a_lock_naming_it(tmp_path):
  """A real `autostrategy run`, killed: its lock names it and is taken over.

  The run is killed as soon as its lock is written, long before it trains
  (it is still importing TFX), so this test takes about a second.
  """
  output = tmp_path / 'out'
  args = ['run', '--output', str(output), '--epochs', '1']
  run = subprocess.Popen(
      [sys.executable, '-m', 'tfx_autostrategy.cli', *args],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
      start_new_session=True)
  try:
    metadata = None
    for _ in range(600):  # The lock is taken about a second after the start.
      if run.poll() is not None:
        break
      try:
        metadata = json.loads(_lock_file(output))
        break
      except (OSError, ValueError):
        time.sleep(0.1)
    assert metadata is not None, f'no lock written; exit {run.poll()}'
    assert metadata['pid'] == run.pid
    assert metadata['command'] == run_lock.command_line(args)

    second = run_cli(*args, timeout=120)
    assert second.returncode == 2, second.stdout + second.stderr
    assert second.stderr.strip().splitlines()[-1] == _locked_message(
        output, metadata)

    os.kill(run.pid, signal.SIGKILL)
    run.wait(timeout=60)
    take_over(output, metadata)
  finally:
    try:
      os.killpg(run.pid, signal.SIGKILL)  # Whatever the run had started.
    except ProcessLookupError:
      pass
    run.wait(timeout=60)


def test_hold_records_who_holds_it_and_release_empties_it(tmp_path):
  before = datetime.datetime.now(datetime.timezone.utc).replace(
      microsecond=0)
  with run_lock.hold(str(tmp_path), command='autostrategy run') as metadata:
    after = datetime.datetime.now(datetime.timezone.utc)
    assert json.loads(_lock_file(tmp_path)) == metadata
    assert metadata['pid'] == os.getpid()
    assert metadata['host'] == socket.gethostname()
    assert metadata['command'] == 'autostrategy run'
    started = datetime.datetime.strptime(
        metadata['started'], '%Y-%m-%dT%H:%M:%SZ').replace(
            tzinfo=datetime.timezone.utc)
    assert before <= started <= after
  # Not unlinked (that races with a run that has just opened it): emptied.
  assert _lock_file(tmp_path) == ''
  warnings = []
  with run_lock.hold(str(tmp_path), command='next', warn=warnings.append):
    pass
  assert warnings == []  # A clean release is not a killed run.


def test_second_hold_is_refused_and_leaves_the_holder_alone(tmp_path):
  with run_lock.hold(str(tmp_path), command='first') as metadata:
    with pytest.raises(run_lock.RunLockedError) as error:
      with run_lock.hold(str(tmp_path), command='second'):
        pass
    assert f'error: {error.value}' == _locked_message(tmp_path, metadata)
    assert json.loads(_lock_file(tmp_path)) == metadata


def test_release_on_an_exception_empties_the_lock(tmp_path):
  with pytest.raises(KeyboardInterrupt):
    with run_lock.hold(str(tmp_path), command='interrupted'):
      raise KeyboardInterrupt
  assert _lock_file(tmp_path) == ''


def test_stale_metadata_is_taken_over_with_a_warning(tmp_path):
  dead = {'pid': 4242, 'host': 'build-7', 'started': '2026-01-02T03:04:05Z',
          'command': 'autostrategy run --output out'}
  with open(os.path.join(tmp_path, '.autostrategy.lock'), 'w') as f:
    json.dump(dead, f)
  warnings = []
  with run_lock.hold(str(tmp_path), command='new',
                     warn=warnings.append) as metadata:
    assert json.loads(_lock_file(tmp_path)) == metadata
  assert warnings == [_taken_over_message(tmp_path, dead)]


def test_unreadable_metadata_is_taken_over_with_a_warning(tmp_path):
  with open(os.path.join(tmp_path, '.autostrategy.lock'), 'w') as f:
    f.write('{"pid": 12, "host"')  # A run killed while writing it.
  warnings = []
  with run_lock.hold(str(tmp_path), command='new', warn=warnings.append):
    pass
  assert warnings == [
      f'warning: {tmp_path}: taking over the lock left by a run that is no '
      'longer running (unreadable lock metadata \'{"pid": 12, "host"\'); it '
      'was killed or crashed']


def test_missing_output_directory_is_an_os_error(tmp_path):
  with pytest.raises(FileNotFoundError):
    with run_lock.hold(str(tmp_path / 'missing'), command='x'):
      pass


def test_command_line_quotes_like_a_shell():
  assert (run_lock.command_line(['run', '--output', 'my out']) ==
          "autostrategy run --output 'my out'")
