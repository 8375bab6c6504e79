"""`OUT/report.html`: one self-contained page per run.

The run, the distribution plan, training curves, ROC / precision-recall /
calibration from TFMA's plot metrics, the per-slice table, the blessing and
the anomalies, from what `facts.collect` gathers. Pictures are PNGs
drawn with matplotlib (Agg, no display) and embedded as data URIs; the page
loads nothing and runs no JavaScript.
"""

import html
import os
from typing import Any, Dict, Optional, Sequence, Tuple

from tfx_autostrategy.pipeline import atomic_io
from tfx_autostrategy.report import facts as facts_lib
from tfx_autostrategy.report import plots as plots_lib

REPORT_FILE = 'report.html'
# Slices with fewer rows, or fewer rows of either label, are marked as too
# small to trust: a few dozen rows move AUC by several points.
MIN_SLICE_ROWS = 100
MIN_SLICE_LABEL_ROWS = 10
_PLAN_KEYS = ('accelerator', 'strategy', 'num_replicas',
              'per_replica_batch_size', 'global_batch_size', 'precision',
              'steps_per_execution', 'jit_compile', 'backup_every_steps',
              'is_chief', 'devices')
_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;
color:#222;padding:0 16px}
h1{font-size:22px}h2{font-size:17px;border-bottom:1px solid #ccc;
padding-bottom:3px;margin-top:28px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;
padding:3px 8px;text-align:left;vertical-align:top}th{background:#f4f4f4}
.num{text-align:right;font-variant-numeric:tabular-nums}
.warn{color:#a15c00}.bad{color:#b00020;font-weight:bold}
.ok{color:#1b7a1b;font-weight:bold}code{background:#f4f4f4;padding:0 3px}
.figs img{max-width:49%;height:auto;margin:2px}
"""


def _e(value: Any) -> str:
  return html.escape(str(value))


def _n(value: Optional[float], digits: int = 4) -> str:
  return 'n/a' if value is None else f'{value:.{digits}f}'


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]],
           numeric: Sequence[int] = ()) -> str:
  head = ''.join(f'<th>{_e(h)}</th>' for h in header)
  head = f'<tr>{head}</tr>' if any(header) else ''
  body = ''.join(
      '<tr>' + ''.join(
          f'<td class="num">{c}</td>' if i in numeric else f'<td>{c}</td>'
          for i, c in enumerate(row)) + '</tr>' for row in rows)
  return f'<table>{head}{body}</table>'


def _missing(facts: Dict[str, Any], part: str, what: str) -> str:
  why = facts['problems'].get(part)
  return f'<p class="warn">{_e(what)}{": " + _e(why) if why else ""}</p>'


def render(facts: Dict[str, Any]) -> str:
  """The report's HTML for `facts` (from `facts.collect`)."""
  summary = facts['summary']
  status = summary.get('status', 'unknown')
  metrics = summary.get('metrics') or {}
  parts = [f'<h1>autostrategy run: {_e(status)}</h1>',
           f'<p>output: <code>{_e(facts["output_dir"])}</code></p>']
  if summary.get('error'):
    parts.append(f'<p class="bad">failed in '
                 f'{_e(summary.get("failed_component") or "?")}: '
                 f'{_e(summary["error"])}</p>')

  # The run.
  parts.append('<h2>Run</h2>')
  settings = summary.get('settings') or {}
  rows = [('data', f'<code>{_e(summary.get("data_root", "?"))}</code>')]
  rows += [(f'rows in {_e(split)}', _e(count))
           for split, count in sorted(facts['rows'].items())]
  changed = summary.get('changed_settings') or []
  rows.append(('settings that differ from the defaults',
               ', '.join(f'<code>--{_e(k.replace("_", "-"))} '
                         f'{_e(settings.get(k))}</code>' for k in changed)
               or 'none'))
  lengths = summary.get('text_lengths') or {}
  if lengths:
    rows.append(('fixed lengths', ', '.join(
        f'<code>{_e(field)}</code> {_e(value.get("length"))}' + (
            f' (auto: 95th percentile {_e(value.get("percentile"))}, '
            f'truncates {_e(round(100 * value.get("truncated_share", 0), 1))}'
            f' % of {_e(value.get("texts"))} texts)' if value.get('auto')
            else ' (given)')
        for field, value in sorted(lengths.items()))))
  parts.append(_table(('', ''), rows))
  components = facts['components']
  if components:
    cached = sum(c.get('state') == 'CACHED' for c in components)
    parts.append(f'<p>components ({cached} of {len(components)} served from '
                 'cache):</p>')
    parts.append(_table(('component', 'state', 'seconds'), [
        (_e(c['component']), _e(c['state'].lower()),
         _n(c.get('seconds'), 1) if c.get('seconds') else '')
        for c in components], numeric=(2,)))

  # The distribution plan.
  parts.append('<h2>Distribution plan</h2>')
  plan = facts['plan']
  if plan:
    parts.append(_table(('', ''), [(_e(k), _e(plan[k])) for k in _PLAN_KEYS
                                   if k in plan]))
  else:
    parts.append(_missing(facts, 'trainer', 'the Trainer did not run'))

  # Training curves.
  parts.append('<h2>Training</h2>')
  history = facts['history']
  if history:
    parts.append('<div class="figs">' + ''.join(
        f'<img alt="training curve" src="{uri}">'
        for uri in plots_lib.training_curves(history)) + '</div>')
    keys = [k for k in ('loss', 'auc', 'val_loss', 'val_auc',
                        'examples_per_second') if any(k in h for h in history)]
    parts.append(_table(['epoch'] + keys, [
        [h['epoch']] + [_n(h.get(k), 1 if k == 'examples_per_second' else 4)
                        for k in keys] for h in history],
        numeric=range(len(keys) + 1)))
    if facts['model_run']:
      parts.append(f'<p>TensorBoard: <code>tensorboard --logdir '
                   f'{_e(facts["model_run"])}</code></p>')
  else:
    parts.append(_missing(facts, 'trainer', 'no training history'))

  # Evaluation.
  parts.append('<h2>Evaluation (eval split)</h2>')
  if metrics:
    parts.append(_table(('metric', 'value'), [
        (_e(k), _n(v)) for k, v in sorted(metrics.items())], numeric=(1,)))
  plots = facts['plots']
  images = (plots_lib.evaluation_curves(plots, metrics.get('auc'))
            if plots else [])
  if images:
    parts.append('<div class="figs">' + ''.join(
        f'<img alt="evaluation curve" src="{uri}">' for uri in images) +
                 '</div>')
  else:
    parts.append(_missing(facts, 'evaluation plots', 'no evaluation plots'))
  slices = summary.get('slices') or {}
  undefined = summary.get('auc_undefined') or {}
  if slices:
    table_rows = []
    for name, values in sorted(slices.items()):
      doubt = facts_lib.slice_trust(values, MIN_SLICE_ROWS,
                                      MIN_SLICE_LABEL_ROWS)
      table_rows.append((
          _e(name), _n(values.get('example_count'), 0),
          'undefined' if name in undefined else _n(values.get('auc')),
          _n(values.get('binary_accuracy')),
          f'<span class="warn">too small to trust ({_e(doubt)})</span>'
          if doubt else 'ok'))
    parts.append('<p>per slice:</p>' + _table(
        ('slice', 'examples', 'auc', 'accuracy', 'trust'), table_rows,
        numeric=(1, 2, 3)))

  # Blessing.
  parts.append('<h2>Blessing</h2>')
  blessed = summary.get('blessed')
  baseline = summary.get('baseline_metrics')
  rows = [('blessed', '<span class="ok">yes</span>' if blessed else
           '<span class="bad">no</span>'),
          ('AUC threshold', _e(summary.get('auc_threshold', '?'))),
          ('min AUC gain over the serving model',
           _e(summary.get('min_auc_gain', '?'))),
          ('candidate AUC', _n(metrics.get('auc'))),
          ('baseline (serving) model',
           f'<code>{_e(facts["baseline_model"])}</code>' +
           (' (the candidate itself: it already serves)'
            if facts.get('baseline_is_candidate') else '')
           if facts['baseline_model'] else 'none (first blessed model)'),
          ('baseline AUC', _n((baseline or {}).get('auc'))
           if baseline else 'n/a'),
          ('pushed to', f'<code>{_e(summary["pushed_model"])}</code>'
           if summary.get('pushed_model') else 'nothing was pushed')]
  parts.append(_table(('', ''), rows))

  parts.append('<h2>Anomalies</h2>')
  if facts['anomalies']:
    parts.append('<ul>' + ''.join(f'<li class="bad">{_e(a)}</li>'
                                  for a in facts['anomalies']) + '</ul>')
  else:
    parts.append('<p>none found by ExampleValidator</p>' if 'anomalies' not
                 in facts['problems'] else
                 _missing(facts, 'anomalies', 'anomalies unreadable'))
  if facts['problems']:
    parts.append('<h2>Parts not available</h2>' + _table(
        ('part', 'why'), [(_e(k), _e(v)) for k, v in
                          sorted(facts['problems'].items())]))
  return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
          '<title>autostrategy run report</title>'
          f'<style>{_CSS}</style></head><body>' + '\n'.join(parts) +
          '</body></html>\n')


def write_report(output_dir: str) -> Tuple[str, Dict[str, Any]]:
  """Writes `output_dir/report.html`; returns its path and the facts shown.

  Raises:
    FileNotFoundError: no run wrote to `output_dir`.
  """
  facts = facts_lib.collect(output_dir)
  path = os.path.join(facts['output_dir'], REPORT_FILE)
  text = render(facts)
  # A reader never sees half a page.
  atomic_io.write_text(path, text)
  return path, facts
