"""Quality target: the default model's ROC-AUC versus a TF-IDF baseline.

On one train/eval split in Jigsaw CSV format (`DIR/train/*.csv`,
`DIR/eval/*.csv`, e.g. from `scripts/fetch_real_data.py`) this

1. trains a scikit-learn baseline on train and scores ROC-AUC on eval:
   TF-IDF of word 1-2-grams plus `char_wb` 2-5-grams (sublinear tf, at most
   `--max-word-features` / `--max-char-features` terms, min_df 2) feeding a
   logistic regression whose C is chosen by 3-fold cross-validated ROC-AUC on
   the training split only (or fixed with `--baseline-c`);
2. runs the real pipeline on the same split through the CLI,
   `autostrategy run --data DIR --output OUT/pipeline --json --no-cache`,
   with the default model unless `--cli-arg` says otherwise, and reads the
   AUC that TFMA computed on the eval split from the last stdout line;
3. prints a table and one JSON report (also written to `OUT/quality.json`)
   with both AUCs, their difference, times and the exact commands.

Exit codes: 0 when the pipeline's AUC is at least the baseline's, 1 when it is
lower, 2 when the pipeline run failed or printed no AUC (its last stderr lines
are in the report).

Usage:

  python scripts/fetch_real_data.py --output /tmp/real
  python bench/quality.py --data /tmp/real [--epochs N] [--output OUT]
"""

import argparse
import glob
import json
import os
import shlex
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
from sklearn import metrics
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import FeatureUnion

from tfx_autostrategy import tf_env
from tfx_autostrategy.pipeline import atomic_io

TEXT_COLUMN = 'comment_text'
LABEL_COLUMN = 'toxic'
C_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
CV_FOLDS = 3
SEED = 0


def read_split(data: str, split: str) -> pd.DataFrame:
  """Reads every CSV of one split; empty text stays the empty string.

  Raises:
    FileNotFoundError: if the split has no CSV files.
  """
  paths = sorted(glob.glob(os.path.join(data, split, '*.csv')))
  if not paths:
    raise FileNotFoundError(f'no CSV files in {os.path.join(data, split)}')
  # dtype=str and no NA parsing: a comment reading "NA" or "null" is text.
  frames = [pd.read_csv(path, dtype=str, keep_default_na=False)
            for path in paths]
  frame = pd.concat(frames, ignore_index=True)
  frame[LABEL_COLUMN] = frame[LABEL_COLUMN].astype(int)
  return frame


def make_vectorizer(max_word_features: int,
                    max_char_features: int) -> FeatureUnion:
  """TF-IDF of word 1-2-grams and within-word character 2-5-grams."""
  return FeatureUnion([
      ('words', TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True,
                                min_df=2, max_features=max_word_features)),
      ('chars', TfidfVectorizer(analyzer='char_wb', ngram_range=(2, 5),
                                sublinear_tf=True, min_df=2,
                                max_features=max_char_features)),
  ])


def _classifier(c: float) -> LogisticRegression:
  return LogisticRegression(C=c, solver='liblinear', max_iter=1000,
                            random_state=SEED)


def choose_c(features, labels: np.ndarray) -> Tuple[float, Dict[str, float]]:
  """Picks C by cross-validated ROC-AUC on the training split alone.

  The eval split must not choose the baseline's settings, or the baseline
  would be tuned on the data it is scored on.

  Returns:
    The best C and the mean CV AUC of every C tried.
  """
  folds = list(StratifiedKFold(CV_FOLDS, shuffle=True, random_state=SEED)
               .split(features, labels))
  scores = {}
  for c in C_GRID:
    fold_aucs = []
    for train_index, test_index in folds:
      model = _classifier(c).fit(features[train_index], labels[train_index])
      fold_aucs.append(metrics.roc_auc_score(
          labels[test_index],
          model.predict_proba(features[test_index])[:, 1]))
    scores[str(c)] = round(float(np.mean(fold_aucs)), 4)
  best = max(C_GRID, key=lambda c: scores[str(c)])
  return best, scores


def run_baseline(train: pd.DataFrame, evaluation: pd.DataFrame,
                 c: Optional[float], max_word_features: int,
                 max_char_features: int) -> Dict[str, Any]:
  """Trains the TF-IDF + logistic regression baseline and scores eval.

  Args:
    train: training rows.
    evaluation: eval rows.
    c: inverse regularisation strength; None picks it by CV on train.
    max_word_features: cap on word n-gram terms.
    max_char_features: cap on character n-gram terms.

  Returns:
    The eval AUC, the C used, the CV scores, the feature count and the
    seconds spent selecting C and fitting the final model.
  """
  labels = train[LABEL_COLUMN].to_numpy()
  start = time.perf_counter()
  vectorizer = make_vectorizer(max_word_features, max_char_features)
  features = vectorizer.fit_transform(train[TEXT_COLUMN])
  featurize_seconds = time.perf_counter() - start

  cv_scores: Dict[str, float] = {}
  select_start = time.perf_counter()
  if c is None:
    c, cv_scores = choose_c(features, labels)
  select_seconds = time.perf_counter() - select_start

  fit_start = time.perf_counter()
  model = _classifier(c).fit(features, labels)
  fit_seconds = time.perf_counter() - fit_start
  probabilities = model.predict_proba(
      vectorizer.transform(evaluation[TEXT_COLUMN]))[:, 1]
  return {
      'auc': round(float(metrics.roc_auc_score(
          evaluation[LABEL_COLUMN], probabilities)), 4),
      'c': c,
      'cv_auc_by_c': cv_scores,
      'features': int(features.shape[1]),
      # Vectorising plus fitting the final model: what "training" costs once
      # the settings are known, comparable with the pipeline's Trainer.
      'train_seconds': round(featurize_seconds + fit_seconds, 1),
      'c_selection_seconds': round(select_seconds, 1),
  }


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
           '-', cell(report['pipeline']['wall_seconds'], '.1f'))]
  widths = [max(len(row[i]) for row in rows) for i in range(4)]
  lines = ['  '.join(value.ljust(width) for value, width in zip(row, widths))
           for row in rows]
  lines.append(f"difference (pipeline - baseline): "
               f"{cell(report['difference'], '+.4f')}")
  return '\n'.join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--data', required=True,
                      help='directory with train/*.csv and eval/*.csv')
  parser.add_argument('--output', default='bench/results/quality',
                      help='where the pipeline run and quality.json go')
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

  train = read_split(args.data, 'train')
  evaluation = read_split(args.data, 'eval')
  report: Dict[str, Any] = {
      'data': {
          'path': os.path.abspath(args.data),
          'train_rows': len(train),
          'eval_rows': len(evaluation),
          'train_positive_rate': round(float(train[LABEL_COLUMN].mean()), 4),
          'eval_positive_rate': round(float(evaluation[LABEL_COLUMN].mean()),
                                      4),
      },
      'bench_command': shlex.join([sys.executable] + sys.argv),
  }
  report['baseline'] = run_baseline(train, evaluation, args.baseline_c,
                                    args.max_word_features,
                                    args.max_char_features)
  command = pipeline_command(
      args.autostrategy, os.path.abspath(args.data),
      os.path.abspath(os.path.join(args.output, 'pipeline')), args.epochs,
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

  os.makedirs(args.output, exist_ok=True)
  atomic_io.write_text(os.path.join(args.output, 'quality.json'),
                       json.dumps(report, indent=2, sort_keys=True) + '\n')
  print(format_table(report))
  print(json.dumps(report, sort_keys=True))
  if args.skip_pipeline:
    return 0
  if ours is None:
    print('error: the pipeline run gave no AUC; see "pipeline.error"',
          file=sys.stderr)
    return 2
  return 0 if report['passed'] else 1


if __name__ == '__main__':
  sys.exit(main())
