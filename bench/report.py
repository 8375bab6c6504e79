"""The benchmark suite's report: fits of the figures, Markdown, files.

`linear_fit`, `crossover` and `growth_exponent` turn figures measured at
several sizes into the fixed and per-row costs, the size where one Beam mode
overtakes the other, and how a cost grows with rows; `write_report` writes
report.json and report.md.
"""

import json
import math
import os
import statistics
from typing import Any, Dict, Optional, Sequence, Tuple

from tfx_autostrategy.pipeline import atomic_io


def linear_fit(points: Sequence[Tuple[float, float]]) -> Tuple[float, float]:
  """Least-squares `y = a + b x`; returns (a, b).

  All points at one x give no slope: (mean y, 0).
  """
  xs = [x for x, _ in points]
  ys = [y for _, y in points]
  if len(set(xs)) < 2:
    return statistics.fmean(ys), 0.0
  slope, intercept = statistics.linear_regression(xs, ys)
  return intercept, slope


def crossover(fixed_a: float, per_row_a: float, fixed_b: float,
              per_row_b: float) -> Optional[float]:
  """Rows where `b` (more start-up, less per row) becomes faster than `a`.

  Returns None when `b` never catches up (its per-row cost is not lower),
  and 0 when `b` is faster at every size.
  """
  if per_row_b >= per_row_a:
    return 0.0 if fixed_b <= fixed_a and per_row_b == per_row_a else None
  rows = (fixed_b - fixed_a) / (per_row_a - per_row_b)
  return max(rows, 0.0)


def growth_exponent(n1: float, v1: float, n2: float, v2: float) -> float:
  """Log-log slope between two points: 1.0 is linear growth."""
  return math.log(v2 / v1) / math.log(n2 / n1)


def _format_value(value: float, unit: str) -> str:
  if unit == 'rows' and value < 0:
    return 'never'
  if unit in ('ratio', 'log-log slope'):
    return f'{value:.2f}'
  if abs(value) >= 100:
    return f'{value:,.0f}'
  return f'{value:.3g}'


def render_table(figures: Sequence[Dict[str, Any]]) -> str:
  """The report's figures as a Markdown table."""
  lines = ['| benchmark | figure | value | unit | target | result |',
           '|---|---|---:|---|---|---|']
  for f in figures:
    result = '' if f['passed'] is None else ('pass' if f['passed'] else
                                             '**FAIL**')
    lines.append(f'| {f["benchmark"]} | {f["name"]} | '
                 f'{_format_value(f["value"], f["unit"])} | {f["unit"]} | '
                 f'{f["target"]} | {result} |')
  return '\n'.join(lines)


def render_markdown(report: Dict[str, Any]) -> str:
  """report.md: machine, table, the commands behind the figures, errors."""
  m = report['machine']
  lines = [
      '# Benchmark suite',
      '',
      f'`{report["suite_command"]}` — {m["date"]}, {m["cores"]} cores '
      f'({m["cpu_model"]}), {m["memory_gib"]} GiB, TensorFlow '
      f'{m["tensorflow"]}, TFX {m["tfx"]}, Beam {m["apache_beam"]}; load '
      f'average at start {m["load_average_1m_at_start"]}; suite took '
      f'{report["seconds"] / 60:.1f} min.',
      '',
      render_table(report['figures']),
      '',
      '## Commands',
      '',
  ]
  commands = []
  for f in report['figures']:
    for command in f['command'].split(' ; '):
      if command not in commands:
        commands.append(command)
  lines += [f'{i + 1}. `{c}`' for i, c in enumerate(commands)]
  if report.get('notes'):
    lines += ['', '## Notes', '']
    lines += [f'- {n}' for n in report['notes']]
  if report['errors']:
    lines += ['', '## Errors', '']
    lines += [f'- {e["what"]}: exit {e["returncode"]} (`{e["command"]}`), '
              f'log {e["log"]}' for e in report['errors']]
  return '\n'.join(lines) + '\n'


def write_report(report: Dict[str, Any], output_dir: str) -> Tuple[str, str]:
  os.makedirs(output_dir, exist_ok=True)
  json_path = os.path.join(output_dir, 'report.json')
  md_path = os.path.join(output_dir, 'report.md')
  atomic_io.write_text(json_path, json.dumps(report, indent=2, sort_keys=True))
  atomic_io.write_text(md_path, render_markdown(report))
  return json_path, md_path
