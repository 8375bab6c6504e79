"""tfx-autostrategy: accelerator-aware TFX pipeline components for text classifiers."""

import os

import setuptools

# The one table of where the code lives and what it is imported as. The
# repository root shows the TFX template layout (components/, pipeline/,
# kubeflow/, schemas/ at the top, as tfx's taxi template and tfx-addons lay
# them out); they install as sub-packages of one namespace so that no generic
# top-level name such as `pipeline` or `kubeflow` lands in site-packages
# (`kubeflow` would shadow the real kubeflow.* packages). See
# tfx_autostrategy/__init__.py and the README's path table.
TOP_LEVEL_DIRS = {
    'tfx_autostrategy': 'tfx_autostrategy',
    'components': 'tfx_autostrategy.components',
    'pipeline': 'tfx_autostrategy.pipeline',
    'kubeflow': 'tfx_autostrategy.kubeflow',
    'schemas': 'tfx_autostrategy.schemas',
}


def package_dirs():
  """Every installed package -> its directory, sub-packages found.

  A folder with an `__init__.py` below one of `TOP_LEVEL_DIRS` (e.g.
  components/trainer/) becomes a sub-package of the mapped name
  (tfx_autostrategy.components.trainer) without an entry here.
  """
  here = os.path.dirname(os.path.abspath(__file__))
  dirs = {}
  for directory, package in TOP_LEVEL_DIRS.items():
    dirs[package] = directory
    for sub in setuptools.find_packages(os.path.join(here, directory)):
      dirs[f'{package}.{sub}'] = os.path.join(directory, *sub.split('.'))
  return dirs


PACKAGE_DIRS = package_dirs()

setuptools.setup(
    name='tfx-autostrategy',
    version='0.1.0',
    description=__doc__,
    python_requires='>=3.10,<3.11',
    packages=sorted(PACKAGE_DIRS),
    package_dir=PACKAGE_DIRS,
    # Read with importlib.resources (pipeline/local_runner.py).
    package_data={
        'tfx_autostrategy': ['sample/*.csv', 'sample/*.json'],
        'tfx_autostrategy.schemas': ['*/*.pbtxt'],
    },
    # Exact versions live in requirements.lock (the one lock file, made from
    # requirements.in by `make lock`); these are the direct dependencies.
    install_requires=[
        'tfx[kfp]==1.16.0',
        'dill>=0.3.1.1,<0.3.2',
        'tensorflow-text==2.16.1',
        'regex',  # components/text_lengths.py (apache-beam requires it too)
    ],
    extras_require={
        'test': ['pytest', 'sentencepiece', 'scikit-learn'],
    },
    entry_points={
        'console_scripts': ['autostrategy=tfx_autostrategy.cli:main'],
    },
)
