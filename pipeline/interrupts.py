"""Ctrl-C and SIGTERM stop a run cleanly; a second one exits at once.

The local pipeline runs in this process (LocalDagRunner, Beam's in-memory
DirectRunner, Keras), so a signal's Python handler runs in the main thread
between two bytecodes of whatever component is working. The first SIGINT or
SIGTERM raises `Interrupted` there: it derives from BaseException, like
KeyboardInterrupt, so the `except Exception` blocks of TFX, Beam and this
package let it through to the CLI, which names the component, writes the
summary and releases the output directory's lock. A second signal while that
happens (a user pressing Ctrl-C again) exits the process at once with the
conventional code 128 + signal number, writing nothing more.

A handler can also run inside a `__del__` or weakref callback of the
garbage collector, where Python ignores any exception ("Exception ignored
in ..."): seen in the Evaluator, whose run then went on to push a model. Such
an `Interrupted` reaches `sys.unraisablehook`, which has a timer thread send
the same signal to the main thread again a moment later, when it has left the
callback, so it is raised in ordinary code (again if need be).

Imports only the standard library.
"""

import contextlib
import os
import signal
import sys
import threading
from typing import Iterator, Sequence

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
  """The run was stopped by a signal (SIGINT or SIGTERM)."""

  def __init__(self, signum: int):
    self.signum = signum
    super().__init__(f'stopped by {self.signal_name}')

  @property
  def signal_name(self) -> str:
    return signal.Signals(self.signum).name

  @property
  def exit_code(self) -> int:
    """130 for SIGINT, 143 for SIGTERM, as shells report them."""
    return 128 + self.signum


def exit_now(signum: int) -> None:
  """What a second signal does: `os._exit(128 + signum)`, nothing more.

  No clean-up runs and nothing is printed (the terminal's descriptors may be
  redirected to the log at that moment); the kernel releases the output
  directory's `flock`, and the next run takes the lock over.
  """
  os._exit(128 + signum)  # pylint: disable=protected-access


@contextlib.contextmanager
def stop_on_signals(
    signals: Sequence[int] = STOP_SIGNALS) -> Iterator[None]:
  """Turns the first of `signals` into `Interrupted`, the next ones into exit.

  The handlers stay installed until the block ends, including while the
  caller handles the `Interrupted` (writes the summary, releases the lock),
  so a second signal never lands in that clean-up as a traceback.
  """
  received = []
  redeliver = []

  def handler(signum, frame):  # pylint: disable=unused-argument
    if redeliver:  # The first signal again, its exception having been lost.
      redeliver.clear()
      raise Interrupted(received[0])
    if received:
      exit_now(signum)
    received.append(signum)
    raise Interrupted(signum)

  previous_hook = sys.unraisablehook

  def unraisable(hook_args):
    if isinstance(hook_args.exc_value, Interrupted):
      redeliver.append(True)
      # Not from here: a handler run now would still be inside the callback.
      again = threading.Timer(
          0.05, signal.pthread_kill,
          (threading.main_thread().ident, hook_args.exc_value.signum))
      again.daemon = True
      again.start()
    else:
      previous_hook(hook_args)

  previous = {s: signal.signal(s, handler) for s in signals}
  sys.unraisablehook = unraisable
  try:
    yield
  finally:
    sys.unraisablehook = previous_hook
    for s, old in previous.items():
      signal.signal(s, old)
