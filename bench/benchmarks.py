"""The six benchmarks of the suite, each a function of the running `Suite`.

`suite.Suite` holds the options, the figures and the shared pieces (data,
worker processes, the Transform fixture); each function here measures one
benchmark and adds its figures (see suite.py's docstring for what each
measures and its target).
"""

import json
import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from bench import common
from bench import report as report_lib

TRAINER_TARGET = '>= 0.95'
INPUT_TARGET = '>= 5'
# A training step costs about three forward passes (issue 19).
TRAIN_PREDICT_TARGET = '>= 0.33'
# The CSV preflight reads every row before TFX is imported; ~200k rows/s on
# this machine when idle, so that 100k rows are checked in about a second.
PREFLIGHT_TARGET = '>= 50000'


def preflight(suite) -> None:
  """Rows per second of the CSV check `autostrategy run` starts with."""
  from tfx_autostrategy.preflight import csv_check  # pylint: disable=g-import-not-at-top
  rows = suite.options['preflight_rows']
  root = suite.data(rows)
  seconds = []
  for _ in range(3):
    started = time.perf_counter()
    report = csv_check.check_csv_dir(root)
    seconds.append(time.perf_counter() - started)
  if report.total_rows != rows:
    raise RuntimeError(f'the CSV check counted {report.total_rows} rows of '
                       f'{rows}')
  suite.add('preflight', 'csv_check_rows_per_second',
            rows / statistics.median(seconds), 'rows/s',
            f'python -m bench.suite --only preflight ({rows} rows, median '
            'of 3)',
            PREFLIGHT_TARGET, rows=rows, seconds=seconds)


def transform(suite) -> None:
  sizes = suite.options['transform_sizes']
  modes = ('in_memory', 'multi_processing')
  points = {m: [] for m in modes}
  for rows in sizes:
    runs = {m: suite.transform_run(rows, m) for m in modes}
    for mode, run in runs.items():
      if not run or not run.get('transform_seconds'):
        continue
      seconds = run['transform_seconds']
      points[mode].append((rows, seconds))
      suite.add('transform', f'transform rows/s [{rows} rows, {mode}]',
                rows / seconds, 'rows/s', run['command'],
                transform_seconds=seconds,
                example_gen_seconds=run.get('example_gen_seconds'),
                peak_rss_mib=run['peak_rss_mib'],
                peak_tree_rss_mib=run['peak_tree_rss_mib'],
                data_command=run['data_command'])
    if all(runs.values()):
      im, mp = runs['in_memory'], runs['multi_processing']
      suite.add('transform',
                f'transform multi_processing/in_memory speed [{rows} rows]',
                im['transform_seconds'] / mp['transform_seconds'], 'ratio',
                f'{im["command"]} ; {mp["command"]}',
                note='> 1 means multi_processing is faster')
  if all(len(points[m]) >= 2 for m in modes):
    fits = {m: report_lib.linear_fit(points[m]) for m in modes}
    for mode, (fixed, per_row) in fits.items():
      suite.add('transform', f'transform fixed cost [{mode}]', fixed, 's',
                'linear fit of the Transform seconds above',
                points=points[mode])
      suite.add('transform', f'transform marginal rows/s [{mode}]',
                1.0 / per_row if per_row > 0 else float('inf'), 'rows/s',
                'linear fit of the Transform seconds above',
                points=points[mode])
    if any(per_row <= 0 for _, per_row in fits.values()):
      suite.notes.append(
          'transform: a mode got faster with more rows '
          f'({ {m: points[m] for m in modes} }); the machine load changed '
          'between runs, so no crossover is fitted. Rerun with more sizes '
          '(--transform-sizes) on a quieter machine.')
      suite.say(suite.notes[-1])
      return
    rows = report_lib.crossover(*fits['in_memory'],
                                *fits['multi_processing'])
    # -1: multi_processing never catches up (JSON has no infinity).
    suite.add('transform', 'transform crossover (multi_processing faster '
              'above)', rows if rows is not None else -1.0, 'rows',
              'linear fits of the in_memory and multi_processing Transform '
              'seconds above', fits={m: list(f) for m, f in fits.items()},
              never=rows is None)


def training_worker_args(options: Dict[str, Any], fixture: Dict[str, Any],
                         model: str, variants: str, replicas: int = 0
                        ) -> List[str]:
  """The arguments of `bench.training_worker` for one model.

  `--model hub` also gets the suite's `--hub-model-path`: the encoder the
  Trainer would fine-tune, whose tokenizer made the fixture's ids.
  """
  args = ['--examples', fixture['examples'], '--transform-graph',
          fixture['transform_graph'], '--model', model, '--variants',
          variants, '--rounds', str(options['rounds']), '--max-steps',
          str(options['steps']), '--warmup', str(options['warmup'])]
  if model == 'hub':
    args += ['--hub-model-path', options['hub_model_path']]
  if replicas:
    args += ['--cpu-replicas', str(replicas)]
  return args


def _training_worker(suite, model: str, variants: str, replicas: int = 0
                     ) -> Tuple[Optional[Dict[str, Any]], str]:
  fixture = suite.fixture()
  if not fixture:
    return None, ''
  argv, command = suite.worker(
      'training_worker',
      *training_worker_args(suite.options, fixture, model, variants,
                            replicas))
  suite.say(f'training worker: model {model}, variants {variants}'
            + (f', {replicas} CPU replicas' if replicas else '') + ' ...')
  run = common.run_measured(argv, suite.log_path, suite.options['timeout'])
  if run.returncode or not run.result:
    suite.fail('trainer', f'training worker {model} {variants}', run,
               command)
    return None, command
  return run.result, command


def trainer_and_input(suite, want_trainer: bool,
                      want_input: bool) -> None:
  variants = []
  if want_trainer:
    variants += ['trainer', 'memory', 'streamed', 'predict']
  if want_input:
    variants += ['memory', 'input']
  variants = ','.join(dict.fromkeys(variants))
  for model in suite.options['models']:
    result, command = _training_worker(suite, model, variants)
    if not result:
      continue
    median = result['median']
    details = {'global_batch_size': result['global_batch_size'],
               'steps_per_execution':
               result['plan']['steps_per_execution'],
               'steps_per_fit': result['steps_per_fit'],
               'train_examples': result['train_examples'],
               'train_cached': result.get('train_cached'),
               'rounds': result['rates']}
    if want_trainer:
      for variant in ('trainer', 'memory', 'streamed'):
        suite.add('trainer', f'{variant} examples/s [{model}]',
                  median[variant], 'examples/s', command, **details)
      suite.add('trainer', f'trainer / in-memory fit [{model}]',
                median['trainer'] / median['memory'], 'ratio', command,
                TRAINER_TARGET, **details)
      suite.add('trainer', f'streamed input (cache off) / in-memory fit '
                f'[{model}]', median['streamed'] / median['memory'], 'ratio',
                command, **details)
      suite.add('trainer', f'predict examples/s [{model}]',
                median['predict'], 'examples/s', command, **details)
      # Measured in the same process and rounds as the Trainer's rate.
      suite.add('trainer', f'train / predict throughput [{model}]',
                median['trainer'] / median['predict'], 'ratio', command,
                TRAIN_PREDICT_TARGET,
                in_memory_fit_over_predict=median['memory'] /
                median['predict'], **details)
    if want_input:
      suite.add('input', f'input pipeline examples/s [{model}]',
                median['input'], 'examples/s', command, **details)
      suite.add('input', f'input pipeline / model consumption [{model}]',
                median['input'] / median['memory'], 'ratio', command,
                INPUT_TARGET, **details)


def replica_scaling(suite) -> None:
  rates = {}
  commands = {}
  for replicas in suite.options['replicas']:
    result, command = _training_worker(suite, 'bow', 'trainer', replicas)
    if not result:
      continue
    rates[replicas] = result['median']['trainer']
    commands[replicas] = command
    suite.add('replicas', f'trainer examples/s [{replicas} CPU replicas, '
              f'global batch {result["global_batch_size"]}]',
              rates[replicas], 'examples/s', command,
              strategy=result['plan']['strategy'],
              rounds=result['rates']['trainer'],
              steps_per_fit=result['steps_per_fit'])
  base = min(rates) if rates else None
  for replicas, rate in sorted(rates.items()):
    if replicas == base:
      continue
    suite.add('replicas', f'speed-up {replicas} vs {base} CPU replicas',
              rate / rates[base], 'ratio',
              f'{commands[replicas]} ; {commands[base]}')


def e2e(suite) -> None:
  results = {}
  for rows in suite.options['e2e_sizes']:
    data = suite.data(rows)
    out = os.path.join(suite.work_dir,
                       f'e2e-{rows}-{time.strftime("%Y%m%d-%H%M%S")}')
    argv = [os.path.join(os.path.dirname(sys.executable), 'autostrategy'),
            'run', '--data', data, '--output', out, '--epochs',
            str(suite.options['e2e_epochs']), '--auc-threshold', '0',
            '--json']
    if not os.path.exists(argv[0]):
      argv[:1] = [sys.executable, '-m', 'tfx_autostrategy.cli']
    command = common.command_text(argv)
    suite.say(f'autostrategy run on {rows} rows ...')
    run = common.run_measured(argv, suite.log_path, suite.options['timeout'])
    if run.returncode:
      suite.fail('e2e', f'autostrategy run {rows} rows', run, command)
      continue
    components = {}
    try:
      with open(os.path.join(out, 'summary.json')) as f:
        for component in json.load(f)['components']:
          components[component['component']] = component['seconds']
    except (OSError, KeyError, ValueError):
      pass
    results[rows] = (run, components, command)
    details = {'components_seconds': components,
               'data_command': common.data_command(rows,
                                                   suite.options['seed'],
                                                   data),
               'auc': (run.result or {}).get('metrics', {}).get('auc')}
    suite.add('e2e', f'e2e wall time [{rows} rows]', run.seconds, 's',
              command, **details)
    suite.add('e2e', f'e2e peak RSS, largest process [{rows} rows]',
              run.peak_rss_mib, 'MiB', command)
    suite.add('e2e', f'e2e peak RSS, whole process tree [{rows} rows]',
              run.peak_tree_rss_mib, 'MiB', command,
              processes=run.peak_processes)
  sizes = sorted(results)
  if len(sizes) >= 2:
    n1, n2 = sizes[0], sizes[-1]
    (r1, c1, cmd1), (r2, c2, cmd2) = results[n1], results[n2]
    both = f'{cmd1} ; {cmd2}'
    suite.add('e2e', f'e2e wall-time growth exponent {n1}->{n2} rows',
              report_lib.growth_exponent(n1, r1.seconds, n2, r2.seconds),
              'log-log slope', both,
              note='1.0 = linear; fixed start-up costs pull it below 1')
    marginal = (r2.seconds - r1.seconds) / (n2 - n1)
    suite.add('e2e', f'e2e marginal cost {n1}->{n2} rows',
              marginal * 1000.0, 's per 1000 rows', both)
    suite.add('e2e', f'e2e peak-RSS growth exponent {n1}->{n2} rows',
              report_lib.growth_exponent(n1, r1.peak_rss_mib, n2,
                                         r2.peak_rss_mib),
              'log-log slope', both)
    growth = {}
    for component in sorted(set(c1) & set(c2)):
      if c1[component] and c2[component] and c1[component] > 0.5:
        growth[component] = {
            'seconds': [c1[component], c2[component]],
            'exponent': report_lib.growth_exponent(
                n1, c1[component], n2, c2[component])}
    if growth:
      worst = max(growth, key=lambda c: growth[c]['exponent'])
      suite.add('e2e', f'e2e steepest component growth exponent '
                f'({worst})', growth[worst]['exponent'], 'log-log slope',
                both, components=growth)
