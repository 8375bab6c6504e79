"""What `autostrategy run` shows on the terminal while the logs go to a file.

`logs_to_file` captures everything TF, Beam, TFX and pip print (they write to
file descriptors 1 and 2 directly) into the run's log; `Progress` turns the
runner's events into the one-line-per-component and one-line-per-epoch
console output the README describes.
"""

import contextlib
import os
import sys
from typing import Callable, Dict, List, Optional, TextIO


def number(value) -> str:
  """A metric as the console shows it: 4 decimals, 'n/a' when missing."""
  return 'n/a' if value is None else f'{value:.4f}'


@contextlib.contextmanager
def logs_to_file(path: str):
  """Sends Python logging and the process's stdout/stderr to `path`.

  TF, Beam and pip (TFX installs the user-module wheel) write to file
  descriptors 1 and 2 directly; all of it goes to the log file. Yields
  `(stdout, stderr)` streams on the original descriptors for the user.
  """
  import logging  # pylint: disable=g-import-not-at-top
  os.makedirs(os.path.dirname(path), exist_ok=True)
  log_file = open(path, 'a', buffering=1)
  sys.stdout.flush()
  sys.stderr.flush()
  saved = {fd: os.dup(fd) for fd in (1, 2)}
  user_out = os.fdopen(os.dup(saved[1]), 'w', buffering=1)
  user_err = os.fdopen(os.dup(saved[2]), 'w', buffering=1)
  for fd in (1, 2):
    os.dup2(log_file.fileno(), fd)
  root = logging.getLogger()
  handler = logging.StreamHandler(log_file)
  handler.setFormatter(logging.Formatter(
      '%(asctime)s %(levelname)s %(name)s: %(message)s'))
  old_level = root.level
  root.addHandler(handler)
  root.setLevel(logging.INFO)
  try:
    import absl.logging  # pylint: disable=g-import-not-at-top
    absl.logging.use_python_logging(quiet=True)
    absl.logging.set_verbosity(absl.logging.INFO)
    yield user_out, user_err
  finally:
    root.removeHandler(handler)
    root.setLevel(old_level)
    for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
      _drain(stream, fd)
    for fd, saved_fd in saved.items():
      os.dup2(saved_fd, fd)
      os.close(saved_fd)
    user_out.close()
    user_err.close()
    try:
      log_file.close()
    except OSError:
      pass  # The log's disk is full; the console has the cause.


def _drain(stream, fd: int) -> None:
  """Flushes `stream` (on `fd`, the log); drops what a full log cannot take.

  Text left in the buffer after a failed flush would otherwise surface on the
  terminal once `fd` is restored.
  """
  try:
    stream.flush()
  except OSError:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    try:
      stream.flush()
    except OSError:
      pass


class Progress:
  """The runner's callbacks (`on_event`, `on_epoch`) as console lines.

  Attributes:
    stream: where the lines go; `logs_to_file`'s user stream once the logs
      are captured.
    running: components started and not finished, the latest last: the one
      a failure or an interruption is blamed on.
  """

  def __init__(self, stream: TextIO,
               before_start: Callable[[], None] = lambda: None):
    self.stream = stream
    self.running: List[str] = []
    # Called before a component starts; may raise to keep it from starting.
    self._before_start = before_start

  def on_epoch(self, epoch: int, epochs: int,
               values: Dict[str, float]) -> None:
    speed = values.get('examples_per_second')
    print(f'    epoch {epoch}/{epochs}: loss {number(values.get("loss"))}, '
          f'auc {number(values.get("auc"))}, '
          f'val_auc {number(values.get("val_auc"))}'
          + (f', {speed:.0f} examples/s' if speed else ''),
          file=self.stream, flush=True)

  def on_event(self, component: str, event: str,
               seconds: Optional[float]) -> None:
    if event == 'started':
      self._before_start()
      self.running.append(component)
      print(f'  {component:<20} ...', file=self.stream, flush=True)
    else:
      if component in self.running:
        self.running.remove(component)
      print(f'  {component:<20} done in {seconds:.1f} s', file=self.stream,
            flush=True)

  @property
  def current(self) -> str:
    """The component that was running last, or ''."""
    return self.running[-1] if self.running else ''
