"""Atomic writes for every file the CLI writes for the user.

A run that fails while writing (a full disk, a file-size limit, Ctrl-C) must
never leave an empty or half-written `summary.json`, schema or report: the
reader sees either the previous version or the new one. So the text goes to a
temporary file in the same directory (a rename is atomic only within one
filesystem), is flushed and fsynced, and then renamed over the target. On any
failure the temporary file is removed and the previous version stays intact.

Imports only the standard library: the CLI uses it before importing TFX.
"""

import os
import tempfile
from typing import Union


def write_text(path: str, text: Union[str, bytes]) -> str:
  """Writes `text` to `path` atomically; returns `path`.

  Args:
    path: the file to create or replace; its directory is created if needed.
    text: the whole new content (str is written as UTF-8).

  Raises:
    OSError: the write failed (ENOSPC, EFBIG, EACCES, ...); `path` still holds
      its previous content, if it had any, and no temporary file is left.
  """
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  data = text.encode('utf-8') if isinstance(text, str) else text
  fd, temp = tempfile.mkstemp(
      dir=directory, prefix='.' + os.path.basename(path) + '.', suffix='.tmp')
  try:
    with os.fdopen(fd, 'wb') as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    if os.path.exists(path):
      # Keep the target's permissions, not mkstemp's 0600.
      os.chmod(temp, os.stat(path).st_mode & 0o7777)
    else:
      umask = os.umask(0)
      os.umask(umask)
      os.chmod(temp, 0o666 & ~umask)
    os.replace(temp, path)
  except BaseException:
    try:
      os.remove(temp)
    except FileNotFoundError:
      pass
    raise
  return path
