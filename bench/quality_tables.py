"""Which data sets `bench/quality.py` runs, and its Markdown tables.

A data directory is either one data set (`DIR/train/*.csv`, `DIR/eval/*.csv`)
or a directory of them (`DIR/<name>/train/*.csv`, ... as
`scripts/fetch_real_data.py` writes, with `DIR/<name>/dataset.json`).
"""

import datetime
import glob
import json
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple


def is_data_set(path: str) -> bool:
  """Whether `path` holds a train and an eval split of CSV files."""
  return all(glob.glob(os.path.join(path, split, '*.csv'))
             for split in ('train', 'eval'))


def discover(data: str, only: Sequence[str] = ()) -> List[Tuple[str, str]]:
  """The `(name, path)` of every data set under `data`, sorted by name.

  Args:
    data: one data set, or a directory of data-set directories.
    only: keep these names (all when empty).

  Raises:
    FileNotFoundError: if `data` holds no data set, or a name in `only` is
      not there (the message lists what is).
  """
  if is_data_set(data):
    found = [(os.path.basename(os.path.normpath(data)), data)]
  else:
    found = sorted((name, os.path.join(data, name))
                   for name in os.listdir(data) if os.path.isdir(data)
                   and is_data_set(os.path.join(data, name)))
  if not found:
    raise FileNotFoundError(
        f'{data}: no data set (neither train/*.csv and eval/*.csv nor '
        'subdirectories holding them)')
  names = [name for name, _ in found]
  missing = [name for name in only if name not in names]
  if missing:
    raise FileNotFoundError(f'{data}: no data set named {", ".join(missing)} '
                            f'(found: {", ".join(names)})')
  return [(name, path) for name, path in found if not only or name in only]


def read_json(path: str) -> Optional[Dict[str, Any]]:
  """The JSON object in `path`, or None if the file is missing or unreadable."""
  try:
    with open(path, encoding='utf-8') as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def trainer_seconds(pipeline_output: str) -> Optional[float]:
  """The Trainer component's seconds from the run's summary.json (MLMD)."""
  summary = read_json(os.path.join(pipeline_output, 'summary.json')) or {}
  for run in summary.get('components') or []:
    # The node is `AutoStrategyTrainer`; match the role, not the class name.
    if run.get('component', '').endswith('Trainer'):
      return run.get('seconds')
  return None


# The Trainer's epoch records (components/trainer/callbacks.EpochLog).
_EPOCH_RE = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*'
                       r'autostrategy: epoch (\d+)/(\d+) (started|finished)')


def fit_seconds(log_text: str) -> Optional[float]:
  """Seconds from the first epoch's start to the last epoch's end.

  That is `fit` itself (training and its validation passes), without the
  Trainer's input reading, model building and export. Read from the pipeline
  log's timestamps; a log that holds several runs counts the last one. None
  if the log holds no complete run of epochs.
  """
  started = finished = None
  for line in log_text.splitlines():
    match = _EPOCH_RE.match(line)
    if not match:
      continue
    when = datetime.datetime.strptime(match.group(1), '%Y-%m-%d %H:%M:%S,%f')
    if match.group(4) == 'started' and match.group(2) == '1':
      started, finished = when, None
    if match.group(4) == 'finished' and match.group(2) == match.group(3):
      finished = when
  if started is None or finished is None:
    return None
  return round((finished - started).total_seconds(), 1)


def read_fit_seconds(pipeline_output: str) -> Optional[float]:
  """`fit_seconds` of the run's logs/pipeline.log, if there is one."""
  try:
    with open(os.path.join(pipeline_output, 'logs', 'pipeline.log'),
              encoding='utf-8', errors='replace') as f:
      return fit_seconds(f.read())
  except OSError:
    return None


def _number(value: Any, spec: str) -> str:
  return format(value, spec) if isinstance(value, (int, float)) else 'n/a'


def markdown(name: str, report: Dict[str, Any]) -> str:
  """One data set's section: what it is and a table of both runs."""
  data, info = report['data'], report.get('dataset') or {}
  baseline, pipeline = report['baseline'], report['pipeline']
  lines = [f'### {name}', '']
  if info:
    source = info.get('source', {})
    lines += [f"{info.get('description', '')}. Source: {source.get('registry')} "
              f"`{source.get('package')}` {source.get('version')} "
              f"(`{source.get('file')}`, sha256 `{source.get('sha256')}`); "
              f"licence: {info.get('licence')}; lang `{info.get('lang')}`. "
              f"Label: {info.get('label_note')}.", '']
  lines += [
      f"Rows: train {data['train_rows']} ({data['train_positive_rate']:.1%} "
      f"positive), eval {data['eval_rows']} "
      f"({data['eval_positive_rate']:.1%} positive).", '',
      '| baseline AUC | ours AUC | Δ | baseline fit s | ours fit s | '
      'Trainer s | pipeline s |',
      '|---|---|---|---|---|---|---|',
      f"| {_number(baseline['auc'], '.4f')} | "
      f"{_number(pipeline.get('auc'), '.4f')} | "
      f"{_number(report.get('difference'), '+.4f')} | "
      f"{_number(baseline.get('train_seconds'), '.1f')} | "
      f"{_number(pipeline.get('fit_seconds'), '.1f')} | "
      f"{_number(pipeline.get('trainer_seconds'), '.1f')} | "
      f"{_number(pipeline.get('wall_seconds'), '.1f')} |", '',
      f"Baseline C = {baseline.get('c')} ({baseline.get('features')} TF-IDF "
      f"features). Pipeline: `{report['pipeline_command']}`"
      + (f" (exit {pipeline['exit_code']})" if 'exit_code' in pipeline else '')
      + '.', '']
  if pipeline.get('error'):
    lines += ['Pipeline error (last lines):', '', '```',
              pipeline['error'], '```', '']
  return '\n'.join(lines)


def summary_table(reports: Dict[str, Dict[str, Any]]) -> str:
  """One line per data set: rows, positive rate, both AUCs and Δ."""
  lines = ['| data set | lang | eval rows | eval positive | baseline AUC | '
           'ours AUC | Δ |', '|---|---|---|---|---|---|---|']
  for name, report in sorted(reports.items()):
    lang = (report.get('dataset') or {}).get('lang', '?')
    lines.append(
        f"| {name} | {lang} | {report['data']['eval_rows']} | "
        f"{report['data']['eval_positive_rate']:.1%} | "
        f"{_number(report['baseline']['auc'], '.4f')} | "
        f"{_number(report['pipeline'].get('auc'), '.4f')} | "
        f"{_number(report.get('difference'), '+.4f')} |")
  return '\n'.join(lines) + '\n'
