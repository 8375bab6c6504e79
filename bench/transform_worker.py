"""Worker: CsvExampleGen + ImportSchemaGen + Transform of the real pipeline.

    python -m bench.transform_worker \
        --data DIR --output DIR [--mode in_memory|multi_processing] \
        [--workers 2]

The components are the ones `create_components` builds for `autostrategy
run` (same module file, settings and Beam arguments), run with LocalDagRunner
on a fresh pipeline root without cache; StatisticsGen, ExampleValidator and
the gate are left out so that only the data preparation is timed. Prints the
seconds each component took and the artifact directories the Trainer
benchmarks reuse.
"""

import argparse
import logging
import os
import sys
import time

from tfx_autostrategy import tf_env

MODES = ('in_memory', 'multi_processing')
KEPT = ('CsvExampleGen', 'ImportSchemaGen', 'Transform')


def beam_args(mode: str, workers: int):
  if mode == 'in_memory':
    return ['--direct_running_mode=in_memory', '--direct_num_workers=1']
  return ['--direct_running_mode=multi_processing',
          f'--direct_num_workers={workers}']


def _prefix_pipeline(config):
  """The pipeline's data-preparation prefix, as `autostrategy run` builds it."""
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  components = pipeline_lib.create_components(config)
  kept = [c for c in components if c.id in KEPT]
  kept_set = set(kept)
  # Drop the ordering edges to components left out (the anomalies gate).
  for component in kept:
    for upstream in list(component.upstream_nodes):
      if upstream not in kept_set:
        component.remove_upstream_node(upstream)
    for downstream in list(component.downstream_nodes):
      if downstream not in kept_set:
        component.remove_downstream_node(downstream)
  return tfx.dsl.Pipeline(
      pipeline_name=config.pipeline_name,
      pipeline_root=config.pipeline_root,
      components=kept,
      enable_cache=False,
      metadata_connection_config=(
          tfx.orchestration.metadata.sqlite_metadata_connection_config(
              config.metadata_path)),
      beam_pipeline_args=list(config.beam_pipeline_args))


def _artifact_uris(metadata_path: str):
  import ml_metadata as mlmd  # pylint: disable=g-import-not-at-top
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  store = mlmd.MetadataStore(
      tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path))
  uris = {}
  for type_name, key in (('Examples', 'examples'),
                         ('TransformGraph', 'transform_graph')):
    for artifact in store.get_artifacts_by_type(type_name):
      if f'{os.sep}Transform{os.sep}' in artifact.uri:
        uris[key] = artifact.uri
  return uris


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--data', required=True)
  parser.add_argument('--output', required=True)
  parser.add_argument('--mode', choices=MODES, default='in_memory')
  parser.add_argument('--workers', type=int, default=2)
  args = parser.parse_args(argv)

  tf_env.set_keras_flavour()
  started = time.monotonic()
  from bench import common  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import local_runner  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.pipeline import progress_log  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.preflight import csv_check  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy import settings  # pylint: disable=g-import-not-at-top
  text_settings = settings.TextSettings()
  report = csv_check.check_csv_dir(args.data)
  config = local_runner.build_config(
      args.data, args.output, text_settings, settings.TrainerSettings(),
      report, pipeline_name='autostrategy-bench-transform',
      beam_pipeline_args=beam_args(args.mode, args.workers),
      enable_cache=False)
  pipeline = _prefix_pipeline(config)
  imported = time.monotonic()

  seconds = {}

  def on_event(component, event, elapsed):
    if event == 'finished':
      seconds[component] = elapsed
      print(f'{component} finished in {elapsed:.1f} s', file=sys.stderr,
            flush=True)

  root = logging.getLogger()
  root.setLevel(logging.INFO)
  import absl.logging  # pylint: disable=g-import-not-at-top
  absl.logging.use_python_logging(quiet=True)
  absl.logging.set_verbosity(absl.logging.INFO)
  handler = progress_log.ProgressHandler(on_event)
  root.addHandler(handler)
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  run_started = time.monotonic()
  tfx.orchestration.LocalDagRunner().run(pipeline)
  run_seconds = time.monotonic() - run_started
  root.removeHandler(handler)

  rows = sum(report.rows.values())
  common.emit_result({
      'rows': rows,
      'mode': args.mode,
      'workers': 1 if args.mode == 'in_memory' else args.workers,
      'component_seconds': seconds,
      'transform_seconds': seconds.get('Transform'),
      'example_gen_seconds': seconds.get('CsvExampleGen'),
      'pipeline_seconds': run_seconds,
      'import_seconds': imported - started,
      'pipeline_root': config.pipeline_root,
      **_artifact_uris(config.metadata_path),
  })
  return 0


if __name__ == '__main__':
  sys.exit(main())
