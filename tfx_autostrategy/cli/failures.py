"""Exit codes, and how a failed or stopped run is told to the user.

Exit codes (also in the README):
  0  the run finished and a model was pushed (or the command succeeded)
  1  a pipeline component failed (cause on the last lines, full log in a file),
     or a write failed (a full disk): one line names the file and the reason
  2  bad input or usage: the data or the options were rejected before running
  3  the model trained but did not reach the Evaluator threshold: not pushed
  130 / 143  stopped by Ctrl-C (SIGINT) / SIGTERM; a rerun resumes

Nothing here imports TFX: the preflight's errors go through `input_error`
before the pipeline is imported.
"""

import sys
from typing import Optional

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_BLESSED = 3


class RehearsalError(RuntimeError):
  """`autostrategy rehearse` ran and failed: what would fail on the machine."""


def error_text(error: BaseException) -> str:
  """The innermost cause of a failure, without Beam's wrapping.

  Long messages keep their first line (what failed) and their last lines
  (usually the detail), so the cause fits on the last lines of the terminal.
  """
  while error.__cause__ is not None or error.__context__ is not None:
    error = error.__cause__ or error.__context__
  lines = [l for l in str(error).strip().splitlines() if l.strip()]
  if len(lines) > 12:
    lines = (lines[:1] + [f'  ... ({len(lines) - 11} more lines in the log)']
             + lines[-10:])
  return f'{type(error).__name__}: ' + '\n'.join(lines)


def input_error(error: Exception) -> int:
  """Prints a preflight error's line on stderr; its exit code.

  Bad data, options or output directory are bad input (2); a write that
  failed for lack of space (rendering the schema) is not: 1.
  """
  from tfx_autostrategy.pipeline import write_faults  # pylint: disable=g-import-not-at-top
  fault = write_faults.describe(error) if isinstance(error, OSError) else None
  if fault:
    print(f'error: {fault.message()}', file=sys.stderr)
    return EXIT_FAILED
  print(f'error: {error}', file=sys.stderr)
  return EXIT_BAD_INPUT


def read_partial(config, cancel: bool):
  """What MLMD recorded of a run that failed or was stopped (None if nothing).

  Runs inside the log redirection, so TFX's messages go to the log. With
  `cancel`, the executions left RUNNING by an interruption become CANCELED
  first.
  """
  from tfx_autostrategy.pipeline import run_result  # pylint: disable=g-import-not-at-top
  try:
    if cancel:
      run_result.cancel_running(config)
    return run_result.read_result(config)
  except Exception:  # pylint: disable=broad-except
    return None  # e.g. it stopped before any execution was recorded.


def write_summary(result, path: str, **keys) -> Optional[str]:
  """Writes summary.json; None, or the error line of a failed write.

  The write is atomic, so a failure (a full disk) leaves the previous
  summary in place: the line says that it still describes an earlier run.
  """
  from tfx_autostrategy.pipeline import run_result  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import write_faults  # pylint: disable=g-import-not-at-top
  try:
    run_result.write_summary(result, path, **keys)
  except OSError as error:
    fault = write_faults.describe(error)
    reason = fault.reason if fault else (error.strerror or str(error))
    return (f'error: could not write {path}: {reason}; it still describes '
            'the previous run, if there was one')
  return None
