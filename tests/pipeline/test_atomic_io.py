"""atomic_io: a failed write keeps the previous file and leaves no temp file.

The disk-full case runs in a real subprocess under RLIMIT_FSIZE with SIGXFSZ
ignored, so the write fails with EFBIG as it does on a full filesystem.
"""

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from tfx_autostrategy.pipeline import atomic_io

_UNDER_LIMIT = textwrap.dedent('''
    import errno, resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
    from tfx_autostrategy.pipeline import atomic_io
    try:
      atomic_io.write_text(sys.argv[1], 'x' * 5000)
    except OSError as e:
      print(errno.errorcode[e.errno])
      sys.exit(3)
''')


def test_write_creates_and_replaces(tmp_path):
  path = str(tmp_path / 'sub' / 'summary.json')
  assert atomic_io.write_text(path, '{"a": 1}') == path
  atomic_io.write_text(path, 'second')
  with open(path) as f:
    assert f.read() == 'second'
  assert sorted(os.listdir(tmp_path / 'sub')) == ['summary.json']


def test_new_file_has_umask_permissions_not_0600(tmp_path):
  path = str(tmp_path / 'report.html')
  old = os.umask(0o022)
  try:
    atomic_io.write_text(path, '<html></html>')
  finally:
    os.umask(old)
  assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_write_over_file_size_limit_keeps_old_content(tmp_path):
  path = tmp_path / 'summary.json'
  path.write_text('{"status": "ok"}')
  proc = subprocess.run([sys.executable, '-c', _UNDER_LIMIT, str(path)],
                        capture_output=True, text=True, timeout=60,
                        check=False)
  assert proc.returncode == 3, proc.stderr
  assert proc.stdout == 'EFBIG\n'
  assert path.read_text() == '{"status": "ok"}'
  assert os.listdir(tmp_path) == ['summary.json']


def test_failed_write_without_previous_file_leaves_nothing(tmp_path):
  path = tmp_path / 'schema.pbtxt'
  proc = subprocess.run([sys.executable, '-c', _UNDER_LIMIT, str(path)],
                        capture_output=True, text=True, timeout=60,
                        check=False)
  assert proc.returncode == 3, proc.stderr
  assert os.listdir(tmp_path) == []


def test_interrupt_mid_write_removes_temp(tmp_path, monkeypatch):
  path = tmp_path / 'report.html'
  path.write_text('old')

  def interrupted(*unused_args):
    raise KeyboardInterrupt

  monkeypatch.setattr(os, 'fsync', interrupted)
  with pytest.raises(KeyboardInterrupt):
    atomic_io.write_text(str(path), 'new')
  assert path.read_text() == 'old'
  assert os.listdir(tmp_path) == ['report.html']
