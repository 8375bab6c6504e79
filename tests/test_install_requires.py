"""setup.py's bounds, requirements.in's pins and the lock agree.

The slow half of this (plain pip resolving the wheel in a fresh venv) is
`make check-install`, run by .ci/run; these checks are the fast half: they
fail as soon as someone edits one of the three files and not the others.
"""

import ast
import os
import re

from packaging.requirements import Requirement

from scripts import check_pip_install

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _install_requires():
  with open(os.path.join(REPO_ROOT, 'setup.py')) as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if isinstance(node, ast.keyword) and node.arg == 'install_requires':
      return [Requirement(s) for s in ast.literal_eval(node.value)]
  raise AssertionError('setup.py has no install_requires')


LOCK = check_pip_install.pins(os.path.join(REPO_ROOT, 'requirements.lock'))
PINNED = check_pip_install.pins(os.path.join(REPO_ROOT, 'requirements.in'))


def test_pins_parse_names_extras_and_versions(tmp_path):
  path = tmp_path / 'r.txt'
  path.write_text('apache-beam[gcp]==2.59.0\n# c==1\ntf_keras==2.16.0  # x\n'
                  'regex\nsetuptools<81\n    # via foo\n')
  assert check_pip_install.pins(str(path)) == {'apache-beam': '2.59.0',
                                               'tf-keras': '2.16.0'}


def test_tfx_116_tested_set_is_what_the_lock_holds():
  # tensorflow/tfx README, "Compatible versions", the 1.16.0 row; TFMA is
  # its patch release 0.47.1 (0.47.0's wheel does not import, see
  # requirements.in).
  table = {'tfx': '1.16.0', 'apache-beam': '2.59.0', 'pyarrow': '10.0.1',
           'tensorflow-transform': '1.16.0', 'tfx-bsl': '1.16.1',
           'tensorflow-data-validation': '1.16.1',
           'tensorflow-model-analysis': '0.47.1', 'ml-metadata': '1.16.0',
           'tensorflow-serving-api': '2.16.1'}
  assert {name: LOCK.get(name) for name in table} == table
  assert LOCK['tensorflow'].startswith('2.16.')


def test_every_pin_of_requirements_in_is_the_locked_version():
  assert PINNED, 'requirements.in pins nothing'
  assert {n: LOCK.get(n) for n in PINNED} == PINNED


def test_install_requires_admit_the_locked_versions_and_bound_the_stack():
  requirements = {check_pip_install.canonical(r.name): r
                  for r in _install_requires()}
  for name, requirement in requirements.items():
    assert name in LOCK, f'{name} is required but not locked'
    assert requirement.specifier.contains(LOCK[name]), (
        f'{requirement} does not admit the locked {name}=={LOCK[name]}')
  # What pip must not float: each has an upper bound (or is exact).
  for name in ('tfx', 'apache-beam', 'tensorflow', 'tf-keras',
               'tensorflow-transform', 'tfx-bsl', 'tensorflow-data-validation',
               'tensorflow-model-analysis', 'ml-metadata', 'pyarrow',
               'protobuf', 'kfp', 'dill', 'tensorflow-text'):
    spec = str(requirements[name].specifier)
    assert re.search(r'(<|==)', spec), f'{name} is unbounded: {spec!r}'
