"""One run per output directory: an advisory lock on `OUT/.autostrategy.lock`.

Two runs on one output directory share its MLMD store and pipeline root, and
each then reports on executions the other one made. `hold` takes an exclusive
`flock` on the lock file, kept for the whole run on an open descriptor, and
writes who holds it (pid, host, start time, command) into the file so that a
second run can say which run is in its way.

The kernel drops a `flock` when its process dies, however it dies, so a lock
is never held by a dead process. What a killed run leaves is its metadata: a
lock file that can be locked but is not empty. The next run takes it over and
warns, naming the dead run. A clean release empties the file and unlocks it;
the file is never removed, because unlinking a lock file races with a run
that has just opened it (it would lock a file nobody else can see).

Imports only the standard library: the CLI takes the lock before it imports
TensorFlow or TFX.
"""

import contextlib
import datetime
import fcntl
import json
import os
import shlex
import socket
import sys
import time
from typing import Any, Callable, Dict, Iterator, Optional, Sequence

LOCK_FILE = '.autostrategy.lock'
# How long a second run waits for the holder's metadata: the holder writes it
# right after it locks, so an empty locked file is only ever a brief state.
_METADATA_WAIT_SECONDS = 1.0
_FIELDS = ('pid', 'host', 'started', 'command')


class RunLockedError(RuntimeError):
  """Another live run holds the output directory's lock."""


def command_line(argv: Optional[Sequence[str]] = None,
                 program: str = 'autostrategy') -> str:
  """The command as a user would type it, e.g. `autostrategy run --output o`."""
  argv = sys.argv[1:] if argv is None else argv
  return shlex.join([program, *argv])


def lock_path(output_dir: str) -> str:
  return os.path.join(os.path.abspath(output_dir), LOCK_FILE)


def _describe(metadata: Dict[str, Any]) -> str:
  """`pid 12 on host h, started 2026-01-01T00:00:00Z: autostrategy run ...`."""
  return (f'pid {metadata.get("pid", "?")} on host '
          f'{metadata.get("host", "?")}, started '
          f'{metadata.get("started", "?")}: '
          f'{metadata.get("command") or "?"}')


def _read(fd: int) -> str:
  os.lseek(fd, 0, os.SEEK_SET)
  chunks = []
  while True:
    chunk = os.read(fd, 65536)
    if not chunk:
      return b''.join(chunks).decode('utf-8', errors='replace')
    chunks.append(chunk)


def _parse(text: str) -> Optional[Dict[str, Any]]:
  """The metadata in `text`; None if it is not a JSON object."""
  try:
    metadata = json.loads(text)
  except ValueError:
    return None
  return metadata if isinstance(metadata, dict) else None


def _warn_stderr(message: str) -> None:
  print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def hold(output_dir: str, command: Optional[str] = None,
         warn: Callable[[str], None] = _warn_stderr
        ) -> Iterator[Dict[str, Any]]:
  """Holds the lock of `output_dir` for the duration of the `with` block.

  Args:
    output_dir: an existing, writable directory (the CLI's output preflight
      creates it).
    command: recorded for a second run's message; default: this process's
      command line (`command_line()`).
    warn: receives the warning when a lock left by a killed run is taken
      over; default: print to stderr.

  Yields:
    The metadata written to the lock file: pid, host, started, command.

  Raises:
    RunLockedError: a live process holds the lock; the message names it
      (pid, host, start time, command) and what to do.
    OSError: the lock file cannot be opened or written.
  """
  output_dir = os.path.abspath(output_dir)
  path = lock_path(output_dir)
  # O_CLOEXEC (Python's default): programs the run executes (pip, Beam
  # workers) must not keep the lock alive after the run itself is gone. (A
  # child forked without exec would share it; a run starts none.)
  fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      raise RunLockedError(
          f'{output_dir}: another run is using this output directory '
          f'({_describe(_holder(fd))}); wait for it to finish, or pass '
          'another --output') from None
    except OSError as error:  # e.g. ENOLCK: a file system without flock.
      raise OSError(f'{path}: cannot lock the output directory '
                    f'({error.strerror or error}); pass an --output on a '
                    'local file system') from None
    left = _read(fd).strip()
    if left:
      # Locked by nobody, yet not emptied: its run died without releasing.
      dead = _parse(left)
      previous = (_describe(dead) if dead is not None else
                  f'unreadable lock metadata {left[:200]!r}')
      warn(f'warning: {output_dir}: taking over the lock left by a run that '
           f'is no longer running ({previous}); it was killed or crashed')
    metadata = {
        'pid': os.getpid(),
        'host': socket.gethostname(),
        'started': datetime.datetime.now(datetime.timezone.utc).strftime(
            '%Y-%m-%dT%H:%M:%SZ'),
        'command': command if command is not None else command_line(),
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(metadata, sort_keys=True) + '\n').encode(), 0)
    os.fsync(fd)
    try:
      yield metadata
    finally:
      # Empty before unlocking: whoever locks next finds no stale metadata.
      os.ftruncate(fd, 0)
      fcntl.flock(fd, fcntl.LOCK_UN)
  finally:
    os.close(fd)


def _holder(fd: int) -> Dict[str, Any]:
  """The metadata of the live holder, waiting briefly for it to be written."""
  deadline = time.monotonic() + _METADATA_WAIT_SECONDS
  while True:
    metadata = _parse(_read(fd).strip())
    if metadata is not None and all(key in metadata for key in _FIELDS):
      return metadata
    if time.monotonic() >= deadline:
      return metadata or {}
    time.sleep(0.05)
