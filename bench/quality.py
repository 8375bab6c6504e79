"""Quality target: the default model's ROC-AUC versus a TF-IDF baseline.

On every data set under `--data` (one train/eval split in Jigsaw CSV format,
`DIR/train/*.csv` and `DIR/eval/*.csv`, or a directory of them as
`scripts/fetch_real_data.py` writes; `--only NAME` picks some), one at a time,
this

1. trains a scikit-learn baseline on train and scores ROC-AUC on eval:
   TF-IDF of word 1-2-grams plus `char_wb` 2-5-grams (sublinear tf, at most
   `--max-word-features` / `--max-char-features` terms, min_df 2) feeding a
   logistic regression whose C is chosen by 3-fold cross-validated ROC-AUC on
   the training split only (or fixed with `--baseline-c`);
2. runs the real pipeline on the same split through the CLI,
   `autostrategy run --data DIR --output OUT/pipeline --json --no-cache`,
   with the default model unless `--cli-arg` says otherwise, and reads the
   AUC that TFMA computed on the eval split from the last stdout line;
3. prints a table and one JSON report (also written to `OUT/quality.json`,
   or `OUT/<name>/quality.json` for a directory of data sets) with both AUCs,
   their difference, times (the Trainer's from the run's summary.json, its
   `fit` from the epoch records in the run's log) and the exact commands;
4. writes one Markdown table per data set to `--markdown` (default
   `OUT/quality.md`). `--report-only` rewrites it from the saved reports
   without running anything.

Exit codes: 0 when the pipeline's AUC is at least the baseline's on every data
set, 1 when it is lower on one, 2 when a pipeline run failed or printed no AUC
(its last stderr lines are in the report).

Usage:

  python scripts/fetch_real_data.py --output /tmp/real
  python bench/quality.py --data /tmp/real [--only NAME] [--epochs N]
      [--output OUT]
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from tfx_autostrategy.pipeline import atomic_io
from tfx_autostrategy import tf_env

# `python bench/quality.py` puts bench/ first on sys.path, not the checkout;
# `python -m bench.quality` and the tests import the package.
try:
  from bench import quality_baseline
  from bench import quality_tables
except ImportError:
  import quality_baseline  # pylint: disable=g-import-not-at-top
  import quality_tables  # pylint: disable=g-import-not-at-top


def pipeline_command(autostrategy: str, data: str, output: str,
                     epochs: Optional[int], cli_args: Sequence[str]) -> List[str]:
  """The `autostrategy run` command line for the benchmark."""
  command = [autostrategy, 'run', '--data', data, '--output', output,
             '--json', '--no-cache']
  if epochs is not None:
    command += ['--epochs', str(epochs)]
  return command + list(cli_args)


def parse_cli_result(stdout: str) -> Optional[Dict[str, Any]]:
  """The JSON object on the last non-empty stdout line, if there is one."""
  lines = [line for line in stdout.splitlines() if line.strip()]
  if not lines:
    return None
  try:
    result = json.loads(lines[-1])
  except json.JSONDecodeError:
    return None
  return result if isinstance(result, dict) else None


def run_pipeline(command: Sequence[str], timeout: float) -> Dict[str, Any]:
  """Runs the CLI and returns its AUC, wall time, exit code and error tail."""
  # The pipeline needs Keras 2 (see README); set it for the child only.
  env = tf_env.subprocess_env()
  start = time.perf_counter()
  try:
    completed = subprocess.run(command, capture_output=True, text=True,
                               timeout=timeout, env=env, check=False)
  except subprocess.TimeoutExpired:
    return {'auc': None, 'exit_code': None,
            'wall_seconds': round(time.perf_counter() - start, 1),
            'error': f'timed out after {timeout:.0f} s'}
  wall = time.perf_counter() - start
  result = parse_cli_result(completed.stdout) or {}
  auc = (result.get('metrics') or {}).get('auc')
  report = {
      'auc': None if auc is None else round(float(auc), 4),
      'exit_code': completed.returncode,
      'wall_seconds': round(wall, 1),
      'blessed': result.get('blessed'),
      'metrics': result.get('metrics'),
  }
  if auc is None:
    report['error'] = '\n'.join(completed.stderr.strip().splitlines()[-20:])
  return report


def format_table(report: Dict[str, Any]) -> str:
  """A small fixed-width table of both runs."""
  def cell(value, spec):
    return format(value, spec) if isinstance(value, (int, float)) else 'n/a'
  rows = [('model', 'ROC-AUC', 'train s', 'wall s'),
          ('TF-IDF + LR (sklearn)', cell(report['baseline']['auc'], '.4f'),
           cell(report['baseline']['train_seconds'], '.1f'), '-'),
          ('pipeline (autostrategy)', cell(report['pipeline']['auc'], '.4f'),
           cell(report['pipeline'].get('trainer_seconds'), '.1f'),
           cell(report['pipeline']['wall_seconds'], '.1f'))]
  widths = [max(len(row[i]) for row in rows) for i in range(4)]
  lines = ['  '.join(value.ljust(width) for value, width in zip(row, widths))
           for row in rows]
  lines.append(f"difference (pipeline - baseline): "
               f"{cell(report['difference'], '+.4f')}")
  return '\n'.join(lines)


def add_details(report: Dict[str, Any], data: str, output: str) -> None:
  """Adds the data set's description and the Trainer's times, if known."""
  report.setdefault('dataset', quality_tables.read_json(
      os.path.join(data, 'dataset.json')))
  pipeline_output = os.path.join(output, 'pipeline')
  if report['pipeline'].get('trainer_seconds') is None:
    report['pipeline']['trainer_seconds'] = quality_tables.trainer_seconds(
        pipeline_output)
  if report['pipeline'].get('fit_seconds') is None:
    report['pipeline']['fit_seconds'] = quality_tables.read_fit_seconds(
        pipeline_output)


def run_data_set(data: str, output: str,
                 args: argparse.Namespace) -> Dict[str, Any]:
  """Runs the baseline and the pipeline on one data set; writes its report."""
  train = quality_baseline.read_split(data, 'train')
  evaluation = quality_baseline.read_split(data, 'eval')
  label = quality_baseline.LABEL_COLUMN
  report: Dict[str, Any] = {
      'data': {
          'path': os.path.abspath(data),
          'train_rows': len(train),
          'eval_rows': len(evaluation),
          'train_positive_rate': round(float(train[label].mean()), 4),
          'eval_positive_rate': round(float(evaluation[label].mean()), 4),
      },
      'bench_command': shlex.join([sys.executable] + sys.argv),
  }
  report['baseline'] = quality_baseline.run_baseline(
      train, evaluation, args.baseline_c, args.max_word_features,
      args.max_char_features)
  command = pipeline_command(
      args.autostrategy, os.path.abspath(data),
      os.path.abspath(os.path.join(output, 'pipeline')), args.epochs,
      args.cli_arg)
  report['pipeline_command'] = ' '.join(
      [*(f'{k}={v}' for k, v in tf_env.KERAS_ENV.items()), shlex.join(command)])
  if args.skip_pipeline:
    report['pipeline'] = {'auc': None, 'wall_seconds': None, 'skipped': True}
  else:
    report['pipeline'] = run_pipeline(command, args.timeout)
  ours, baseline = report['pipeline']['auc'], report['baseline']['auc']
  report['difference'] = (None if ours is None
                          else round(ours - baseline, 4))
  report['passed'] = (None if args.skip_pipeline
                      else ours is not None and ours >= baseline)
  add_details(report, data, output)
  os.makedirs(output, exist_ok=True)
  atomic_io.write_text(os.path.join(output, 'quality.json'),
                       json.dumps(report, indent=2, sort_keys=True) + '\n')
  return report


def exit_code(reports: Sequence[Dict[str, Any]]) -> int:
  """0 if ours >= baseline everywhere (or skipped), 2 if a run gave no AUC."""
  ran = [r for r in reports if not r['pipeline'].get('skipped')]
  if any(r['pipeline']['auc'] is None for r in ran):
    return 2
  return 0 if all(r['passed'] for r in ran) else 1


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--data', required=True,
                      help='a directory with train/*.csv and eval/*.csv, or '
                      'one holding such directories (one per data set)')
  parser.add_argument('--only', action='append', default=[],
                      help='run only this data set (repeatable)')
  parser.add_argument('--output', default='bench/results/quality',
                      help='where the pipeline runs and quality.json go')
  parser.add_argument('--markdown', default='',
                      help='the Markdown tables (default: OUT/quality.md)')
  parser.add_argument('--report-only', action='store_true',
                      help='rewrite the tables from the saved quality.json '
                      'files; run nothing')
  parser.add_argument('--epochs', type=int, default=None,
                      help="passed to the CLI (default: the pipeline's)")
  parser.add_argument('--cli-arg', action='append', default=[],
                      help='extra `autostrategy run` argument (repeatable), '
                      'e.g. --cli-arg=--learning-rate --cli-arg=5e-4')
  parser.add_argument('--autostrategy', default=os.path.join(
      os.path.dirname(sys.executable), 'autostrategy'),
                      help='the console script to run')
  parser.add_argument('--baseline-c', type=float, default=None,
                      help='fix the baseline C instead of choosing it by CV')
  parser.add_argument('--max-word-features', type=int, default=200000)
  parser.add_argument('--max-char-features', type=int, default=300000)
  parser.add_argument('--timeout', type=float, default=3600,
                      help='seconds the pipeline run may take')
  parser.add_argument('--skip-pipeline', action='store_true',
                      help='only the baseline (exit 0)')
  args = parser.parse_args(argv)

  try:
    data_sets = quality_tables.discover(args.data, args.only)
  except FileNotFoundError as error:
    print(f'error: {error}', file=sys.stderr)
    return 2
  single = quality_tables.is_data_set(args.data)
  reports = {}
  for name, data in data_sets:
    output = args.output if single else os.path.join(args.output, name)
    if args.report_only:
      report = quality_tables.read_json(os.path.join(output, 'quality.json'))
      if report is None:
        print(f'error: {output}/quality.json: missing or not JSON; run '
              f'without --report-only first', file=sys.stderr)
        return 2
      add_details(report, data, output)
    else:
      print(f'== {name}', flush=True)
      report = run_data_set(data, output, args)
      print(format_table(report))
      print(json.dumps(report, sort_keys=True), flush=True)
    reports[name] = report
  markdown_path = args.markdown or os.path.join(args.output, 'quality.md')
  os.makedirs(os.path.dirname(os.path.abspath(markdown_path)), exist_ok=True)
  atomic_io.write_text(markdown_path, '\n'.join(
      [quality_tables.summary_table(reports)]
      + [quality_tables.markdown(name, report)
         for name, report in reports.items()]))
  print(f'wrote {markdown_path}')
  code = exit_code(list(reports.values()))
  if code == 2:
    print('error: a pipeline run gave no AUC; see "pipeline.error"',
          file=sys.stderr)
  return code


if __name__ == '__main__':
  sys.exit(main())
