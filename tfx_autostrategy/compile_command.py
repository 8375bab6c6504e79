"""`autostrategy compile`: options -> CompileOptions, `auto` lengths, the file.

The options are checked before the training CSVs are read (to pick `auto`
lengths, `data_options.scan_remote`), and TFX is imported only to compile
(`kubeflow/compiler`).
"""

import argparse
import dataclasses
import sys

from tfx_autostrategy import data_options
from tfx_autostrategy.failures import EXIT_BAD_INPUT
from tfx_autostrategy.failures import EXIT_FAILED
from tfx_autostrategy.failures import EXIT_OK
from tfx_autostrategy.kubeflow import compile_options
from tfx_autostrategy.kubeflow import scheduling
from tfx_autostrategy import training_options


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
        trainer=training_options.settings_from(
            args, ('model', 'epochs', 'per_replica_batch_size')),
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
