"""Checks that plain pip resolves this package, quickly, to the lock's versions.

What a team does to add the package to a TFX 1.16 environment: `pip install`
the wheel. This builds the wheel from the checkout, makes a fresh virtual
environment with the project's Python (no uv, no lock file), and runs

  pip install --dry-run --ignore-installed --report REPORT tfx_autostrategy-*.whl

with nothing of this machine's pip configuration (PIP_CONFIG_FILE=/dev/null:
no extra indexes, find-links or constraints), printing how long pip took to
resolve. It then compares what pip picked with requirements.lock:

- every package pinned in requirements.in (TFX 1.16's tested set: tfx, Beam,
  TensorFlow, tf.Transform, tfx-bsl, TFDV, TFMA, MLMD, pyarrow, protobuf, kfp,
  tf-keras, ...) must resolve to the locked version, or the check fails;
- the other (transitive) packages are listed where pip picked another version
  than the lock: both are valid resolutions of setup.py's bounds, and the lock
  is the one that is tested.

Exit 0 when the resolution is the lock's for every pinned package; 1 when pip
failed or picked another pinned version. Run by `make check-install` (and
.ci/run); it needs the package registry.

Usage: python scripts/check_pip_install.py [--python PY] [--pip-version V]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict

from packaging.utils import canonicalize_name as canonical

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A current pip (its resolver is the one users meet); pinned for a repeatable
# check.
PIP_VERSION = '25.3'


def pins(path: str) -> Dict[str, str]:
  """`name==version` lines of a requirements file, extras dropped."""
  found = {}
  with open(path) as f:
    for line in f:
      match = re.match(r'^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s;#]+)', line)
      if match:
        found[canonical(match.group(1))] = match.group(3)
  return found


def run(cmd, env=None, cwd=None):
  proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd,
                        check=False)
  if proc.returncode != 0:
    sys.exit(f'check-install: {" ".join(cmd[:4])} ... failed '
             f'(exit {proc.returncode}):\n{proc.stdout[-3000:]}'
             f'{proc.stderr[-3000:]}')
  return proc


def clean_pip_env() -> Dict[str, str]:
  """The environment without this machine's pip settings."""
  env = {k: v for k, v in os.environ.items()
         if not k.startswith('PIP_') or k == 'PIP_CERT'}
  env['PIP_CONFIG_FILE'] = os.devnull
  env['PIP_DISABLE_PIP_VERSION_CHECK'] = '1'
  return env


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--python', default=sys.executable,
                      help='the Python to make the fresh venv with')
  parser.add_argument('--pip-version', default=PIP_VERSION)
  args = parser.parse_args(argv)

  env = clean_pip_env()
  with tempfile.TemporaryDirectory(prefix='check-install-') as tmp:
    # Built from a copy: setuptools writes build/ into the source tree.
    source = os.path.join(tmp, 'source')
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(
        '.git', '.venv', 'outputs', 'build', '*.egg-info', '__pycache__'))
    wheels = os.path.join(tmp, 'wheels')
    run([sys.executable, '-m', 'pip', 'wheel', '--quiet', '--no-deps',
         '--no-build-isolation', '-w', wheels, source], env=env)
    wheel, = [os.path.join(wheels, w) for w in os.listdir(wheels)]
    venv = os.path.join(tmp, 'venv')
    # A venv made by a venv's python is a fresh one of the base interpreter.
    run([args.python, '-m', 'venv', '--without-pip', venv])
    python = os.path.join(venv, 'bin', 'python')
    run([python, '-m', 'ensurepip', '--default-pip'], env=env)
    run([python, '-m', 'pip', 'install', '--quiet',
         f'pip=={args.pip_version}'], env=env)
    report = os.path.join(tmp, 'report.json')
    start = time.monotonic()
    proc = subprocess.run(
        [python, '-m', 'pip', 'install', '--dry-run', '--ignore-installed',
         '--quiet', '--report', report, wheel],
        capture_output=True, text=True, env=env, check=False)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
      print(proc.stdout[-3000:] + proc.stderr[-3000:])
      print(f'check-install: pip {args.pip_version} could not resolve '
            f'{os.path.basename(wheel)} (exit {proc.returncode}, '
            f'{seconds:.0f} s)')
      return 1
    with open(report) as f:
      resolved = {canonical(item['metadata']['name']):
                  item['metadata']['version'] for item in json.load(f)['install']}

  locked = pins(os.path.join(REPO_ROOT, 'requirements.lock'))
  pinned = pins(os.path.join(REPO_ROOT, 'requirements.in'))
  print(f'check-install: pip {args.pip_version} resolved '
        f'{os.path.basename(wheel)} in a fresh venv in {seconds:.1f} s: '
        f'{len(resolved)} packages')
  wrong = {name: (resolved.get(name), version)
           for name, version in sorted(pinned.items())
           if name in resolved and resolved[name] != version}
  other = {name: (version, locked[name]) for name, version in resolved.items()
           if name in locked and name not in pinned and version != locked[name]}
  not_locked = sorted(set(resolved) - set(locked) - {'tfx-autostrategy'})
  for name, version in sorted(pinned.items()):
    if name in resolved:
      mark = 'ok' if name not in wrong else f'WRONG (lock {version})'
      print(f'  {name}=={resolved[name]} {mark}')
  if other:
    print(f'  {len(other)} transitive packages resolved to another version '
          'than the lock (both satisfy setup.py): ' + ', '.join(
              f'{n} {v} (lock {l})' for n, (v, l) in sorted(other.items())))
  if not_locked:
    print('  not in the lock: ' + ', '.join(not_locked))
  if wrong:
    print('check-install: pip picked other versions than the lock for '
          + ', '.join(f'{n} ({v}, lock {l})' for n, (v, l) in wrong.items()))
    return 1
  return 0


if __name__ == '__main__':
  sys.exit(main())
