"""`autostrategy compile`: its options, then CompileOptions, `auto` lengths, the file.

`add_parser` declares the options (`add_machine_argument` the machine shape,
which `rehearse` takes too); building them imports no TFX or TensorFlow.
`run` checks them before the training CSVs are read (to pick `auto`
lengths, `data_options.scan_remote`), and imports TFX only to compile
(`kubeflow/compiler`).
"""

import argparse
import dataclasses
import sys

from tfx_autostrategy.cli import data_options
from tfx_autostrategy.cli import training_options
from tfx_autostrategy.cli.failures import EXIT_BAD_INPUT
from tfx_autostrategy.cli.failures import EXIT_FAILED
from tfx_autostrategy.cli.failures import EXIT_OK
from tfx_autostrategy import conventions
from tfx_autostrategy.kubeflow import compile_options
from tfx_autostrategy.kubeflow import scheduling
from tfx_autostrategy.kubeflow import worker_pools
from tfx_autostrategy.pipeline import schema_render


# The Trainer's options `compile` takes (the rest is the machine's).
_TRAINING_OPTIONS = ('model', 'epochs', 'per_replica_batch_size')


def add_parser(commands) -> None:
  """Adds `autostrategy compile` to the `commands` subparsers."""
  compile_ = commands.add_parser(
      'compile', help='compile the pipeline for Kubeflow Pipelines or Vertex '
      'AI Pipelines (pipeline job JSON; .yaml writes the KFP package)')
  compile_.add_argument('--target', required=True,
                        choices=compile_options.TARGETS)
  compile_.add_argument('--output', default='pipeline.json',
                        help='file to write (build output: do not commit)')
  compile_.add_argument('--pipeline-root', required=True,
                        help='remote artifact root, e.g. gs://bucket/root')
  compile_.add_argument('--image', required=True,
                        help='container image built from kubeflow/Dockerfile')
  compile_.add_argument('--data', required=True,
                        help='remote directory of CSV files, e.g. gs://...')
  compile_.add_argument('--trainer-image', default='',
                        help="the Trainer's image (default: --image), e.g. "
                        'a TF_VARIANT=gpu or tpu build')
  add_machine_argument(compile_, default='cpu')
  compile_.add_argument('--workers', type=int, default=1,
                        help='machines training together, chief included '
                        '(--target vertex, not TPUs)')
  compile_.add_argument('--project', default='',
                        help='Google Cloud project (vertex, dataflow)')
  compile_.add_argument('--region', default='',
                        help='Google Cloud region (vertex, dataflow)')
  compile_.add_argument('--beam-runner', default='direct',
                        choices=compile_options.BEAM_RUNNERS)
  compile_.add_argument('--pipeline-name',
                        default=conventions.DEFAULT_PIPELINE_NAME,
                        help='[a-z0-9-], at most 128 characters')
  data_options.add_arguments(compile_)
  compile_.add_argument('--id-type', choices=schema_render.ID_TYPES,
                        default=schema_render.ID_TYPES[0],
                        help="the id column's values: int if every id is an "
                        'integer (the local run reads this from the data)')
  compile_.add_argument('--schema', default='',
                        help='a local schema.pbtxt compiled into the pipeline '
                        'as it is (default: the curated schema with the '
                        'column options above)')
  compile_.add_argument('--serving-model-dir', default='',
                        help="Pusher's destination (default: under the root)")
  compile_.add_argument('--presplit', action='store_true',
                        help='--data has train/ and eval/ subdirectories')
  compile_.add_argument('--service-account', default='',
                        help='service account of the Vertex AI training job')
  training_options.add(compile_, *_TRAINING_OPTIONS)
  compile_.add_argument('--no-cache', action='store_true',
                        help='re-run every component')
  compile_.add_argument('--spot', action='store_true',
                        help='--target vertex: train on Spot VMs (cheaper, '
                        'preemptible; else standard VMs)')
  compile_.add_argument('--restart-on-worker-restart', action='store_true',
                        help='--target vertex: restart the whole training '
                        'job when a worker restarts')
  compile_.add_argument('--job-timeout', default='',
                        help='--target vertex: stop the training job after '
                        "this long: seconds or e.g. 90m, 24h, 7d (default: "
                        "Vertex AI's, 7 days)")


class _RenamedToMachine(argparse.Action):
  """`--accelerator` where a machine shape is meant: the old spelling."""

  def __call__(self, parser, namespace, values, option_string=None):
    parser.error(
        f'--accelerator {values}: the machine shape is --machine {values} '
        '(--accelerator is the accelerator family of run and detect: '
        'auto, cpu, gpu, tpu)')


def add_machine_argument(parser: argparse.ArgumentParser, **kwargs) -> None:
  """`--machine NAME`, a row of the worker-pool table (compile, rehearse).

  Stored as `args.accelerator`. The old spelling `--accelerator NAME` is
  refused with the new one, so one flag never takes two vocabularies
  (`run`/`detect --accelerator auto|cpu|gpu|tpu` is the family).
  """
  parser.add_argument('--machine', dest='accelerator', metavar='NAME',
                      help='Trainer machine shape: ' +
                      ', '.join(worker_pools.ACCELERATORS), **kwargs)
  parser.add_argument('--accelerator', action=_RenamedToMachine,
                      dest='renamed_accelerator', help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
  """`autostrategy compile`: checks the options, picks `auto` lengths, writes the file.

  Returns:
    The exit code (`failures.EXIT_*`).
  """
  from tfx_autostrategy.kubeflow import compiler  # pylint: disable=g-import-not-at-top
  try:
    # Options are checked (with placeholder lengths) before the data is read.
    text = data_options.text_settings(args,
                                      data_options.placeholder_lengths(args))
    options = compile_options.CompileOptions(
        target=args.target, image=args.image,
        pipeline_root=args.pipeline_root, data_root=args.data,
        accelerator=args.accelerator, trainer_image=args.trainer_image,
        workers=args.workers,
        project=args.project, region=args.region,
        beam_runner=args.beam_runner, pipeline_name=args.pipeline_name,
        schema_file=args.schema, text=text,
        id_type=args.id_type,
        serving_model_dir=args.serving_model_dir, presplit=args.presplit,
        service_account=args.service_account,
        trainer=training_options.settings_from(args, _TRAINING_OPTIONS),
        enable_cache=not args.no_cache, spot=args.spot,
        restart_on_worker_restart=args.restart_on_worker_restart,
        job_timeout_seconds=(scheduling.parse_duration(args.job_timeout)
                             if args.job_timeout else 0))
    counter = data_options.length_counter(text, args)
    if counter:
      data_options.scan_remote(args.data, args.presplit, text, counter)
    lengths = data_options.resolve_lengths(args, counter,
                                           training_only=args.presplit)
    options = dataclasses.replace(
        options, text=dataclasses.replace(text, **lengths.values))
    if lengths.line:
      print(lengths.line)
    compiler.compile_pipeline(options, args.output)
  except ValueError as error:
    print(f'error: {error}', file=sys.stderr)
    return EXIT_BAD_INPUT
  except OSError as error:
    print(f'error: cannot write {args.output}: {error}', file=sys.stderr)
    return EXIT_FAILED
  pool = options.worker_pool
  print(f'wrote {args.output}: target {args.target}, Trainer on '
        f'{args.workers} x {pool.name} ({pool.machine_type}), Beam '
        f'{args.beam_runner}')
  return EXIT_OK
