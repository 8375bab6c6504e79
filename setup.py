"""tfx-autostrategy: accelerator-aware TFX pipeline components for text classifiers."""

import setuptools

# The repository root shows the TFX template layout (components/, pipeline/,
# kubeflow/); they install as sub-packages of one namespace so that no generic
# top-level name such as `pipeline` or `kubeflow` lands in site-packages.
PACKAGE_DIRS = {
    'tfx_autostrategy': 'tfx_autostrategy',
    'tfx_autostrategy.components': 'components',
    'tfx_autostrategy.components.transform': 'components/transform',
    'tfx_autostrategy.components.trainer': 'components/trainer',
    'tfx_autostrategy.components.gate': 'components/gate',
    'tfx_autostrategy.components.inline_schema': 'components/inline_schema',
    'tfx_autostrategy.pipeline': 'pipeline',
    'tfx_autostrategy.kubeflow': 'kubeflow',
    'tfx_autostrategy.schemas': 'schemas',
    'tfx_autostrategy.benchmarks': 'tfx_autostrategy/benchmarks',
}

setuptools.setup(
    name='tfx-autostrategy',
    version='0.1.0',
    description=__doc__,
    python_requires='>=3.10,<3.11',
    packages=list(PACKAGE_DIRS),
    package_dir=PACKAGE_DIRS,
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
    ],
    extras_require={
        'test': ['pytest', 'sentencepiece', 'scikit-learn'],
    },
    entry_points={
        'console_scripts': ['autostrategy=tfx_autostrategy.cli:main'],
    },
)
