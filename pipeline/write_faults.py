"""Recognises a failed write (a full disk, a quota, a file-size limit).

A run that fills its disk fails deep inside TensorFlow, Beam or TFX, each of
which wraps the OSError its own way: an `OSError` with `errno` and `filename`
(Python code), or only its text in a `tf.errors` / Beam error message
("... No space left on device" / "File too large" next to the path). The CLI
turns either into one line that names what could not be written, where, and
what to do; the traceback goes to the log.

Imports only the standard library: the CLI uses it on its error path.
"""

import dataclasses
import errno
import re
from typing import Iterator, Optional

# errno -> (what the user reads, what to do about it).
_FAULTS = {
    errno.ENOSPC: ('no space left on device',
                   'free space or choose another --output'),
    errno.EDQUOT: ('disk quota exceeded',
                   'free space or choose another --output'),
    errno.EFBIG: ('file size limit exceeded',
                  'raise the file-size limit (ulimit -f) or choose another '
                  '--output'),
}
# The strerror texts, for errors that carry only a message.
_TEXTS = {
    errno.ENOSPC: re.compile(r'no space left on device', re.IGNORECASE),
    errno.EDQUOT: re.compile(r'disk quota exceeded', re.IGNORECASE),
    errno.EFBIG: re.compile(r'file too large', re.IGNORECASE),
}
# An absolute path that starts a word: at the start of a line, after a space,
# a quote or '=' (TF writes "... file /a/b: No space"; Beam quotes paths). A
# bare '/' inside a word (TF's '/job:localhost/replica:0') is not a path.
_PATH = re.compile(r"""(?:^|(?<=[\s'"=(]))(/[^\s'"():;,]+)""", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class WriteFault:
  """A write that failed because the storage is full or limited."""
  errno: int
  path: Optional[str]

  @property
  def reason(self) -> str:
    return _FAULTS[self.errno][0]

  @property
  def advice(self) -> str:
    return _FAULTS[self.errno][1]

  def message(self, component: str = '') -> str:
    """The one line the CLI prints, after 'error: '."""
    where = f' while {component or "the run"} wrote'
    where += f' {self.path}' if self.path else ' its outputs'
    return (f'{self.reason}{where}; {self.advice}; completed steps are kept '
            'and a rerun resumes')


def _chain(error: BaseException) -> Iterator[BaseException]:
  """`error` and the errors it was raised from or while handling."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    yield error
    error = error.__cause__ or error.__context__


def _pick_path(text: str, prefer: str) -> Optional[str]:
  paths = [p.rstrip('.') for p in _PATH.findall(text)]
  inside = [p for p in paths if prefer and p.startswith(prefer)]
  return (inside or paths or [None])[0]


def describe(error: BaseException, output_dir: str = '') -> Optional[WriteFault]:
  """The write fault behind `error`, or None if it is not one.

  Args:
    error: what the run raised; its `__cause__`/`__context__` chain is read.
    output_dir: paths under it are preferred when a message names several.
  """
  for link in _chain(error):
    if isinstance(link, OSError) and link.errno in _FAULTS:
      path = link.filename if isinstance(link.filename, str) else None
      return WriteFault(link.errno, path or _pick_path(str(link), output_dir))
  for link in _chain(error):
    text = str(link)
    for number, pattern in _TEXTS.items():
      if pattern.search(text):
        return WriteFault(number, _pick_path(text, output_dir))
  return None
