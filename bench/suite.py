"""`make bench` (`python -m bench.suite` from a checkout): the benchmark suite.

Benchmarks (`--only` takes a comma-separated subset):

* `preflight` The CSV check `autostrategy run` starts with (in this
              process, median of 3): rows/s; target >= 50000, so that 100k
              rows are checked in about two seconds at most.
* `trainer`   Trainer throughput (run_fn's input path, strategy scope, same
              model, batch and steps_per_execution) divided by plain Keras
              `model.fit` on the same transformed data in memory; target
              >= 0.95 per model. Also measures `streamed`, the same path
              with the decoded-example cache off (`--input-cache-mb 0`),
              and `train / predict throughput`: the Trainer's training
              rate over `model.predict` of the same model at the same
              batch, in the same process; target >= 0.33 (a training
              step costs about three forward passes).
* `input`     The Trainer's tf.data pipeline alone (no model) divided by the
              model's consumption rate (the in-memory fit); target >= 5.
* `replicas`  The Trainer path with 1, 2, 4 logical CPU replicas
              (MirroredStrategy, global batch = 32 x replicas), one fresh
              process per count; examples/s and speed-up over 1 replica.
* `transform` CsvExampleGen + Transform of the real pipeline at several
              sizes, Beam DirectRunner in_memory vs multi_processing
              (2 workers); rows/s, the ratio, and the crossover size from a
              fixed + per-row cost fit of each mode.
* `e2e`       `autostrategy run` at several sizes: wall time, peak memory of
              the largest process, and how both grow with rows (log-log
              slope; 1.0 is linear).

Each benchmark runs in fresh worker processes; every figure in the JSON
report names the command that produced it. The data is synthetic
(`tfx_autostrategy.sample_data`, seeded), generated once per size under
`OUTPUT/data`. Default sizes finish in about 30 minutes on 2 cores;
`--quick` runs smaller sizes (not timed yet; estimated 15-20 minutes);
`--transform-sizes 10000,100000,500000` adds the large point.
"""

import argparse
import json
import os
import shlex
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from bench import benchmarks
from bench import common
from bench import report as report_lib

BENCHMARKS = ('preflight', 'trainer', 'input', 'replicas', 'transform', 'e2e')

DEFAULTS = {
    'fixture_rows': 10_000,
    'transform_sizes': '10000,100000',
    'e2e_sizes': '10000,100000',
    'preflight_rows': 100_000,
    # 200 steps x 5 rounds: with 100 x 3 the rounds of one variant spread
    # by +-7% on a shared 2-core host, more than the effect measured.
    'steps': 200,
    'rounds': 5,
}
QUICK = {
    'fixture_rows': 3_000,
    'transform_sizes': '3000,20000',
    'e2e_sizes': '3000,20000',
    'preflight_rows': 20_000,
    'steps': 30,
    'rounds': 2,
}



def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The options of the suite."""
  parser.add_argument('--output', default='bench/results',
                      help='directory for report.json, report.md, logs, '
                      'generated data and pipeline outputs')
  parser.add_argument('--only', default=','.join(BENCHMARKS),
                      help=f'comma-separated subset of {",".join(BENCHMARKS)}')
  parser.add_argument('--quick', action='store_true',
                      help='smaller sizes and fewer steps (estimated 15-20 '
                      'minutes): ' + ', '.join(f'{k}={v}'
                                               for k, v in QUICK.items()))
  parser.add_argument('--fixture-rows', type=int, default=None,
                      help='rows of the data whose Transform output the '
                      f'trainer/input/replicas benchmarks read (default '
                      f'{DEFAULTS["fixture_rows"]})')
  parser.add_argument('--pipeline-root', default='',
                      help='reuse the Transform artifacts of an earlier run '
                      '(autostrategy run OUTPUT/pipeline_root) instead of '
                      'running Transform for the fixture')
  parser.add_argument('--transform-sizes', default=None,
                      help=f'rows, comma-separated (default '
                      f'{DEFAULTS["transform_sizes"]})')
  parser.add_argument('--transform-workers', type=int, default=2,
                      help='direct_num_workers in multi_processing mode')
  parser.add_argument('--e2e-sizes', default=None,
                      help=f'rows, comma-separated (default '
                      f'{DEFAULTS["e2e_sizes"]})')
  parser.add_argument('--e2e-epochs', type=int, default=1,
                      help='--epochs of the end-to-end runs')
  parser.add_argument('--models', default='bow,transformer',
                      help='models of the trainer/input benchmarks; hub '
                      '(alone) fine-tunes --hub-model-path on the Transform '
                      'output of an `autostrategy run --model hub` with it '
                      '(--pipeline-root)')
  parser.add_argument('--hub-model-path', default='',
                      help='the pretrained encoder of --models hub (a Hugging '
                      'Face checkpoint or SavedModel directory)')
  parser.add_argument('--replicas', default='1,2,4',
                      help='logical CPU replica counts (model bow)')
  parser.add_argument('--steps', type=int, default=None,
                      help='training steps per timed fit call (default '
                      f'{DEFAULTS["steps"]}, capped by one pass over the '
                      'train split)')
  parser.add_argument('--rounds', type=int, default=None,
                      help=f'timed fit calls per variant (default '
                      f'{DEFAULTS["rounds"]}); the median is reported')
  parser.add_argument('--warmup', type=int, default=5,
                      help='steps of every fit call left out of the timing')
  parser.add_argument('--seed', type=int, default=0, help='data seed')
  parser.add_argument('--timeout', type=float, default=3600,
                      help='seconds per worker process')


def _sizes(text: str) -> List[int]:
  sizes = sorted({int(s) for s in text.split(',') if s.strip()})
  if not sizes or sizes[0] < 1:
    raise ValueError(f'bad sizes {text!r}')
  return sizes


def _resolve_options(args: argparse.Namespace) -> Dict[str, Any]:
  base = QUICK if args.quick else DEFAULTS
  only = [b.strip() for b in args.only.split(',') if b.strip()]
  unknown = sorted(set(only) - set(BENCHMARKS))
  if unknown:
    raise ValueError(f'unknown benchmarks {unknown}; choose from '
                     f'{",".join(BENCHMARKS)}')
  models = [m for m in args.models.split(',') if m]
  if 'hub' in models:
    # The ids of a checkpoint's tokenizer are not the vocabulary ids bow
    # and transformer read, and the suite's own fixture has no mask.
    if models != ['hub'] or not args.hub_model_path or not (
        args.pipeline_root):
      raise ValueError(
          '--models hub runs alone, with --hub-model-path DIR and '
          '--pipeline-root of an `autostrategy run --model hub '
          '--hub-model-path DIR` (the Transform output its tokenizer made)')
    if 'replicas' in only:
      raise ValueError('--models hub: leave out replicas (it trains bow on '
                       'the fixture), e.g. --only trainer,input')
  elif args.hub_model_path:
    raise ValueError('--hub-model-path goes with --models hub')
  return {
      'only': only,
      'quick': bool(args.quick),
      'fixture_rows': args.fixture_rows or base['fixture_rows'],
      'pipeline_root': os.path.abspath(args.pipeline_root)
                       if args.pipeline_root else '',
      'transform_sizes': _sizes(args.transform_sizes or
                                base['transform_sizes']),
      'transform_workers': args.transform_workers,
      'e2e_sizes': _sizes(args.e2e_sizes or base['e2e_sizes']),
      'e2e_epochs': args.e2e_epochs,
      'preflight_rows': base['preflight_rows'],
      'models': models,
      'hub_model_path': os.path.abspath(args.hub_model_path)
                        if args.hub_model_path else '',
      'replicas': sorted({int(r) for r in args.replicas.split(',') if r}),
      'steps': args.steps or base['steps'],
      'rounds': args.rounds or base['rounds'],
      'warmup': args.warmup,
      'seed': args.seed,
      'timeout': args.timeout,
  }


class Suite:
  """Runs the selected benchmarks and collects `Figure`s."""

  def __init__(self, options: Dict[str, Any], output_dir: str,
               suite_command: str):
    self.options = options
    self.output_dir = os.path.abspath(output_dir)
    self.suite_command = suite_command
    self.figures: List[common.Figure] = []
    self.errors: List[Dict[str, str]] = []
    self.notes: List[str] = []
    self.log_path = os.path.join(self.output_dir, 'logs', 'workers.log')
    self.work_dir = os.path.join(self.output_dir, 'work')
    self._fixture: Optional[Dict[str, Any]] = None
    self._transform_runs: Dict[Tuple[int, str], Dict[str, Any]] = {}

  # Helpers -----------------------------------------------------------------

  def say(self, text: str) -> None:
    print(f'[bench {time.strftime("%H:%M:%S")}] {text}', flush=True)

  def add(self, benchmark: str, name: str, value: float, unit: str,
          command: str, target: str = '', **details) -> common.Figure:
    figure = common.Figure(benchmark, name, float(value), unit, command,
                           target, common.check_target(value, target)
                           if target else None, details)
    self.figures.append(figure)
    verdict = ('' if figure.passed is None else
               f' (target {target}: {"pass" if figure.passed else "FAIL"})')
    self.say(f'{name} = {value:.4g} {unit}{verdict}')
    return figure

  def fail(self, benchmark: str, what: str, run: common.ProcessRun,
           command: str) -> None:
    tail = '\n'.join(run.stdout.strip().splitlines()[-5:])
    self.errors.append({'benchmark': benchmark, 'what': what,
                        'command': command,
                        'returncode': str(run.returncode),
                        'log': self.log_path, 'stdout_tail': tail})
    self.say(f'FAILED: {what} (exit {run.returncode}); see {self.log_path}')

  def data(self, rows: int) -> str:
    return common.ensure_data(os.path.join(self.output_dir, 'data'), rows,
                              self.options['seed'])

  def worker(self, module: str, *args: str) -> Tuple[List[str], str]:
    argv = [sys.executable, '-m', f'bench.{module}', *args]
    return argv, common.command_text(argv)

  def transform_run(self, rows: int, mode: str) -> Optional[Dict[str, Any]]:
    """Runs (once) ExampleGen + Transform on `rows` rows in `mode`."""
    key = (rows, mode)
    if key in self._transform_runs:
      return self._transform_runs[key]
    data = self.data(rows)
    out = os.path.join(self.work_dir, f'transform-{rows}-{mode}-'
                       f'{time.strftime("%Y%m%d-%H%M%S")}')
    argv, command = self.worker(
        'transform_worker', '--data', data, '--output', out, '--mode', mode,
        '--workers', str(self.options['transform_workers']))
    self.say(f'Transform {rows} rows, {mode} ...')
    run = common.run_measured(argv, self.log_path, self.options['timeout'])
    if run.returncode or not run.result:
      self.fail('transform', f'Transform {rows} rows {mode}', run, command)
      return None
    result = dict(run.result, command=command,
                  data_command=common.data_command(rows, self.options['seed'],
                                                   data),
                  peak_rss_mib=run.peak_rss_mib,
                  peak_tree_rss_mib=run.peak_tree_rss_mib)
    self._transform_runs[key] = result
    return result

  def fixture(self) -> Optional[Dict[str, Any]]:
    """Transform artifacts the training benchmarks read."""
    if self._fixture is None:
      root = self.options['pipeline_root']
      if root:
        self._fixture = _artifacts_under(root)
        self._fixture['command'] = f'(reused) {root}'
      else:
        self._fixture = self.transform_run(self.options['fixture_rows'],
                                           'in_memory')
    return self._fixture

  # Running -----------------------------------------------------------------

  def run(self, checkpoint=lambda: None) -> None:
    """Runs the selected benchmarks; `checkpoint()` after each one."""
    only = self.options['only']
    if 'preflight' in only:
      benchmarks.preflight(self)
      checkpoint()
    if 'transform' in only:
      benchmarks.transform(self)
      checkpoint()
    if 'trainer' in only or 'input' in only:
      benchmarks.trainer_and_input(self, 'trainer' in only,
                                   'input' in only)
      checkpoint()
    if 'replicas' in only:
      benchmarks.replica_scaling(self)
      checkpoint()
    if 'e2e' in only:
      benchmarks.e2e(self)

  def report(self, machine: Dict[str, Any], started: float) -> Dict[str, Any]:
    return {
        'suite_command': self.suite_command,
        'machine': machine,
        'options': self.options,
        'seconds': time.monotonic() - started,
        'fixture': {k: v for k, v in (self._fixture or {}).items()
                    if k in ('examples', 'transform_graph', 'command',
                             'rows')},
        'figures': [f.to_dict() for f in self.figures],
        'errors': self.errors,
        'notes': self.notes,
    }


def _artifacts_under(pipeline_root: str) -> Dict[str, Any]:
  """Latest Transform output artifacts under an `autostrategy run` root."""
  found = {}
  for key, sub in (('examples', 'transformed_examples'),
                   ('transform_graph', 'transform_graph')):
    base = os.path.join(pipeline_root, 'Transform', sub)
    ids = sorted((int(d) for d in os.listdir(base) if d.isdigit()),
                 reverse=True) if os.path.isdir(base) else []
    if not ids:
      raise ValueError(f'no Transform {sub} artifact under {pipeline_root}')
    found[key] = os.path.join(base, str(ids[0]))
  return found


def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
  """Runs the suite; 0 when every selected benchmark produced its figures.

  Args:
    args: the parsed options (`add_arguments`).
    argv: the command-line arguments, for the report's `suite_command`.
  """
  try:
    options = _resolve_options(args)
  except ValueError as error:
    print(f'error: {error}', file=sys.stderr)
    return 2
  started = time.monotonic()
  suite_command = shlex.join(['python', '-m', 'bench.suite', *argv])
  suite = Suite(options, args.output, suite_command)
  machine = common.machine_info()
  suite.say(f'{machine["cores"]} cores, {machine["memory_gib"]} GiB, '
            f'TensorFlow {machine["tensorflow"]}; benchmarks: '
            f'{",".join(options["only"])}; worker logs: {suite.log_path}')
  def checkpoint():
    # A partial report survives an interrupted or failed later benchmark.
    report_lib.write_report(suite.report(machine, started), suite.output_dir)

  try:
    suite.run(checkpoint)
  finally:
    report = suite.report(machine, started)
    json_path, md_path = report_lib.write_report(report, suite.output_dir)
  print()
  print(report_lib.render_table(report['figures']))
  print()
  print(f'report: {json_path}')
  print(f'table:  {md_path}')
  if report['errors']:
    print(f'{len(report["errors"])} benchmark run(s) failed; see '
          f'{suite.log_path}', file=sys.stderr)
    return 1
  return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
  """`python -m bench.suite [options]` (what `make bench` runs)."""
  argv = list(sys.argv[1:] if argv is None else argv)
  parser = argparse.ArgumentParser(
      prog='python -m bench.suite',
      description='Benchmark the Trainer, input pipeline, replicas, '
      'Transform and end-to-end runs; writes a JSON report and a table.')
  add_arguments(parser)
  return run(parser.parse_args(argv), argv)


if __name__ == '__main__':
  sys.exit(main())
