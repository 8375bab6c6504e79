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

Code that catches everything (a bare `except:` in a library, a C extension
that clears a Python error) can still lose it, and the component then runs to
its end. So `stop_on_signals` yields a `Stops` whose `check()` the run calls
where it moves on (before each component starts, and when the pipeline
returns): a signal that came and was lost is raised there, naming the
component it came in, so nothing starts after a stop was asked for and no
model is pushed by a run the user stopped.

Imports only the standard library.
"""

import contextlib
import os
import signal
import sys
import threading
import traceback
from typing import Callable, Iterator, List, Sequence

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
  """The run was stopped by a signal (SIGINT or SIGTERM)."""

  def __init__(self, signum: int, lost_in: str = ''):
    self.signum = signum
    # The component the signal came in, when its exception was lost there and
    # the component finished (see `Stops.check`); '' when raised at once.
    self.lost_in = lost_in
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


class Stops:
  """The signals `stop_on_signals` received, and the check for a lost one.

  Attributes:
    received: the signals, first first.
    locate: called when the first signal comes; says what was running (the
      CLI's current component).
    where: what `locate` said then.
    stack: the innermost frames the first signal's handler ran in, for the
      log (formatted in the handler, logged later: a handler must not write
      to a stream it may have interrupted).
  """

  def __init__(self):
    self.received: List[int] = []
    self.locate: Callable[[], str] = lambda: ''
    self.where = ''
    self.stack = ''

  def check(self) -> None:
    """Raises `Interrupted` if a signal came: its exception was lost.

    Called only where a run that got its `Interrupted` cannot be (the next
    component starting, the pipeline returning), so a signal received by
    then was swallowed on the way.
    """
    if self.received:
      raise Interrupted(self.received[0], lost_in=self.where)


@contextlib.contextmanager
def stop_on_signals(
    signals: Sequence[int] = STOP_SIGNALS) -> Iterator[Stops]:
  """Turns the first of `signals` into `Interrupted`, the next ones into exit.

  The handlers stay installed until the block ends, including while the
  caller handles the `Interrupted` (writes the summary, releases the lock),
  so a second signal never lands in that clean-up as a traceback.

  Yields:
    the `Stops`: call its `check()` where the run moves on.
  """
  stops = Stops()
  received = stops.received
  redeliver = []

  def handler(signum, frame):
    if redeliver:  # The first signal again, its exception having been lost.
      redeliver.clear()
      raise Interrupted(received[0])
    if received:
      exit_now(signum)
    received.append(signum)
    try:
      stops.where = stops.locate()
      stops.stack = ''.join(traceback.format_stack(frame, limit=12))
    except Exception:  # pylint: disable=broad-except
      pass  # Only for the message and the log; the stop matters.
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
    yield stops
  finally:
    sys.unraisablehook = previous_hook
    for s, old in previous.items():
      signal.signal(s, old)
