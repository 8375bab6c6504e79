"""A fingerprint of exactly the code a component runs, for TFX's cache key.

TFX keys a component's cache on its execution properties and inputs. With a
`module_file` it hashes the `.py` files of that file's directory (the user
wheel), but the Trainer's `run_fn` and Transform's `preprocessing_fn` import
the rest of this package (models, settings, accelerator, the executor), so an
edit there would be served from cache with the old code. This module follows
the `tfx_autostrategy` imports of a component's entry files (statically, with
`ast`; nothing is imported) and hashes every file reached. The pipeline puts
the hash into the component's `custom_config`, so an edit to any file the
component runs re-runs it, and an edit elsewhere (the CLI, the compiler, the
other component's code) does not.
"""

import ast
import hashlib
import importlib.util
import os
from typing import Iterable, List, Optional

PACKAGE = 'tfx_autostrategy'
# The custom_config key the pipeline stores the fingerprint under.
CODE_FINGERPRINT_KEY = 'code_fingerprint'


def _module_file(module_name: str) -> Optional[str]:
  """The source file of a package module, or None if it is not one."""
  try:
    spec = importlib.util.find_spec(module_name)
  except (ImportError, ValueError):
    return None
  if spec is None or not spec.origin or not spec.origin.endswith('.py'):
    return None
  return spec.origin


def _imported_modules(path: str) -> List[str]:
  """`tfx_autostrategy` modules imported anywhere in `path` (incl. functions)."""
  with open(path, 'rb') as f:
    tree = ast.parse(f.read(), filename=path)
  names = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.extend(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names.append(node.module)
      # `from tfx_autostrategy.modeling import models` imports a module.
      names.extend(f'{node.module}.{alias.name}' for alias in node.names)
  return [n for n in names if n == PACKAGE or n.startswith(PACKAGE + '.')]


def source_files(entry_files: Iterable[str]) -> List[str]:
  """The entry files and every package source file they import, transitively.

  Args:
    entry_files: paths of the files the component loads first (its module
      file, its executor's module).

  Returns:
    Sorted absolute paths, including the `__init__.py` of each package passed
    through (Python runs them on import).
  """
  seen = set()
  pending = [os.path.abspath(p) for p in entry_files]
  while pending:
    path = pending.pop()
    if path in seen:
      continue
    seen.add(path)
    for name in _imported_modules(path):
      parts = name.split('.')
      for i in range(1, len(parts) + 1):
        found = _module_file('.'.join(parts[:i]))
        if found and found not in seen:
          pending.append(found)
  return sorted(seen)


def fingerprint(entry_files: Iterable[str]) -> str:
  """sha256 over the names and contents of `source_files(entry_files)`."""
  h = hashlib.sha256()
  for path in source_files(entry_files):
    # Directory and file name, not the absolute path: the hash must be the
    # same in every clone of the repository.
    name = '/'.join(path.split(os.sep)[-2:])
    with open(path, 'rb') as f:
      contents = f.read()
    h.update(f'{len(name)}:{name}:{len(contents)}:'.encode())
    h.update(contents)
  return h.hexdigest()
