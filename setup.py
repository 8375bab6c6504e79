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
    # requirements.in by `make lock`). These are the direct dependencies,
    # bounded so that plain pip resolves quickly to the lock's versions
    # (`make check-install`): TFX 1.16's tested set (tensorflow/tfx README,
    # "Compatible versions"), and tf-keras, which tensorflow-hub requires
    # unbounded (without the bound pip backtracks through tf-keras and
    # tf-keras-nightly releases built for newer TensorFlows).
    install_requires=[
        'tfx[kfp]==1.16.0',
        'apache-beam[gcp]>=2.59.0,<2.60',
        'tensorflow>=2.16.1,<2.17',
        'tf-keras>=2.16.0,<2.17',
        'tensorflow-transform>=1.16.0,<1.17',
        'tfx-bsl>=1.16.1,<1.17',
        'tensorflow-data-validation>=1.16.1,<1.17',
        # 0.47.0's wheel lacks tensorflow_model_analysis.addons (requirements.in).
        'tensorflow-model-analysis>=0.47.1,<0.48',
        'ml-metadata>=1.16.0,<1.17',
        'tensorflow-serving-api>=2.16.1,<2.17',
        'pyarrow>=10.0.1,<11',
        'protobuf>=3.20.3,<4',
        'kfp>=2.5.0,<2.6',
        'dill>=0.3.1.1,<0.3.2',
        'tensorflow-text>=2.16.1,<2.17',
        'regex',  # preflight/text_lengths.py (apache-beam requires it too)
        'matplotlib>=3.5',  # tfx_autostrategy/report/plots.py: the run report's plots
        # preflight/token_counts.py: XLM-R pieces for --sequence-length auto.
        'sentencepiece',
    ],
    extras_require={
        'test': ['pytest', 'scikit-learn', 'tokenizers'],
    },
    entry_points={
        'console_scripts': ['autostrategy=tfx_autostrategy.cli:main'],
    },
)
