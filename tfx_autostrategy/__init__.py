"""tfx-autostrategy: TFX components whose Trainer picks its tf.distribute strategy.

Why `tfx_autostrategy.components` lives in `components/`: the repository
root keeps the TFX template layout (`components/`, `pipeline/`, `kubeflow/`,
`schemas/` beside this folder, as tfx's taxi template shows them), and
setup.py's one table (`TOP_LEVEL_DIRS`) installs each of them as a
sub-package of this one, with the sub-packages below them found by
`setuptools.find_packages`:

  components/  ->  tfx_autostrategy.components   (and .trainer, .gate, ...)
  pipeline/    ->  tfx_autostrategy.pipeline
  kubeflow/    ->  tfx_autostrategy.kubeflow
  schemas/     ->  tfx_autostrategy.schemas      (data: jigsaw/schema.pbtxt)

So no generic top-level name (`pipeline`, `kubeflow`, which would shadow the
real kubeflow.* packages) lands in site-packages, and code always imports
`tfx_autostrategy.<folder>`. Data files (the schema, the bundled sample) are
found with importlib.resources, not by path arithmetic, because the folders
are not where their package name suggests. The benchmarks (`bench/`) and the
tests are not installed.
"""
