"""Where the Trainer exports: the chief's serving directory, or a temporary one.

Every multi-worker process must save the model (saving runs collective ops),
but only the chief's copy is kept.
"""

import os
import shutil
import tempfile

from tfx_autostrategy.components import devices

# Temporary export directories handed to non-chief workers; `cleanup` only
# deletes these.
_TEMP_EXPORT_DIRS = set()


def export_dir_for(info: devices.AcceleratorInfo, serving_dir: str) -> str:
  """Returns where this process saves the serving model.

  Every multi-worker process must save (saving runs collective ops), but only
  the chief's copy is kept: other processes get a fresh temporary directory
  to pass to `cleanup` afterwards.

  Args:
    info: result of `detect`.
    serving_dir: the directory the chief exports to.
  """
  if info.is_chief:
    return serving_dir
  path = tempfile.mkdtemp(
      prefix=f'autostrategy-export-{info.task_type}-{info.task_id}-')
  _TEMP_EXPORT_DIRS.add(path)
  return path


def cleanup(export_dir: str) -> None:
  """Deletes a non-chief's temporary export directory from `export_dir_for`.

  Args:
    export_dir: a directory returned by `export_dir_for` on a non-chief.

  Raises:
    ValueError: `export_dir` was not created by `export_dir_for` in this
      process (so a chief's serving directory is never deleted).
  """
  if export_dir not in _TEMP_EXPORT_DIRS:
    raise ValueError(
        f'{export_dir} is not a temporary export directory from '
        'export_dir_for; refusing to delete it')
  if os.path.exists(export_dir):
    shutil.rmtree(export_dir)
  _TEMP_EXPORT_DIRS.discard(export_dir)
