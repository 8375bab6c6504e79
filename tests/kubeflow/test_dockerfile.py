"""The container recipe agrees with the local environment and the compiler.

Docker does not run here; these checks keep the recipe's versions and paths
from drifting away from the lock file and the compiled pipeline.
"""

import os
import re


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def read(*path):
  with open(os.path.join(REPO_ROOT, *path)) as f:
    return f.read()


DOCKERFILE = read('kubeflow', 'Dockerfile')


def locked_version(package):
  match = re.search(rf'^{re.escape(package)}==(\S+)$',
                    read('requirements.lock'), re.MULTILINE)
  assert match, package
  return match.group(1)


def arg(name):
  match = re.search(rf'^ARG {name}=(\S+)$', DOCKERFILE, re.MULTILINE)
  assert match, name
  return match.group(1)


def test_python_is_the_projects_python():
  assert arg('PYTHON_VERSION') == read('.python-version').strip()
  major_minor = '.'.join(arg('PYTHON_VERSION').split('.')[:2])
  assert re.search(
      rf'^FROM apache/beam_python{re.escape(major_minor)}_sdk:'
      r'\$\{BEAM_VERSION\} AS beam$', DOCKERFILE, re.MULTILINE)
  assert re.search(r'^FROM python:\$\{PYTHON_VERSION\}-slim-bookworm$',
                   DOCKERFILE, re.MULTILINE)


def test_beam_boot_loader_matches_the_locked_beam():
  assert arg('BEAM_VERSION') == locked_version('apache-beam')


def test_tensorflow_variants_keep_the_locked_version():
  assert arg('TF_VERSION') == locked_version('tensorflow')
  assert re.search(r'^ARG TF_VARIANT=cpu$', DOCKERFILE, re.MULTILINE)
  # Each variant's branch of the `case`: what it installs over the lock.
  branches = dict(re.findall(r'^ +(cpu|gpu|tpu|\*)\) (.*?);;', DOCKERFILE,
                             re.MULTILINE | re.DOTALL))
  assert set(branches) == {'cpu', 'gpu', 'tpu', '*'}
  assert branches['cpu'].strip() == ''
  assert branches['gpu'].strip() == (
      'pip install "tensorflow[and-cuda]==${TF_VERSION}"')
  assert re.fullmatch(
      r'pip uninstall -y tensorflow \\\s+&& pip install '
      r'"tensorflow-tpu==\$\{TF_VERSION\}" \\\s+-f \S+libtpu\S+ ',
      branches['tpu']), branches['tpu']
  assert 'exit 1' in branches['*']


def test_installs_the_lock_file_then_this_package():
  assert re.search(r'^RUN pip install -r requirements\.lock$', DOCKERFILE,
                   re.MULTILINE)
  assert re.search(r'^RUN pip install --no-deps \.$', DOCKERFILE,
                   re.MULTILINE)
  for directory in ('tfx_autostrategy', 'components', 'pipeline', 'kubeflow',
                    'schemas'):
    assert re.search(rf'^COPY {directory}/ {directory}/$', DOCKERFILE,
                     re.MULTILINE), directory


def test_sets_legacy_keras_for_every_process():
  assert re.search(r'^ENV TF_USE_LEGACY_KERAS=1 ', DOCKERFILE, re.MULTILINE)
