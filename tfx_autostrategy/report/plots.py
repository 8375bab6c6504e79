"""The run report's pictures: matplotlib (Agg) figures as PNG data URIs.

Training curves from the Trainer's history; ROC and precision-recall from
TFMA's ConfusionMatrixPlot thresholds; calibration from TFMA's
CalibrationPlot buckets (summed into a few bins, not recomputed).
"""

import base64
import io
from typing import Any, Dict, List, Optional, Sequence, Tuple

# Calibration is shown in this many equal-width bins of predicted probability.
CALIBRATION_BINS = 10


def _figure_png(draw) -> str:
  """A data URI of the PNG `draw(figure)` paints."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import figure as figure_lib  # pylint: disable=g-import-not-at-top
  figure = figure_lib.Figure(figsize=(5.2, 3.8), dpi=100)
  draw(figure)
  figure.tight_layout()
  buffer = io.BytesIO()
  figure.savefig(buffer, format='png')
  return 'data:image/png;base64,' + base64.b64encode(
      buffer.getvalue()).decode('ascii')


def training_curves(history: Sequence[Dict[str, float]]) -> List[str]:
  """Loss and AUC per epoch, training against validation (PNG data URIs)."""
  epochs = [h['epoch'] for h in history]
  images = []
  for metric, title in (('loss', 'loss'), ('auc', 'AUC')):
    if not any(metric in h for h in history):
      continue

    def draw(figure, metric=metric, title=title):
      axes = figure.add_subplot()
      for key, label in ((metric, 'training'), ('val_' + metric,
                                                'validation')):
        points = [(e, h[key]) for e, h in zip(epochs, history) if key in h]
        if points:
          axes.plot(*zip(*points), marker='o', label=label)
      axes.set(xlabel='epoch', ylabel=title, title=f'{title} per epoch')
      axes.set_xticks(epochs)
      axes.grid(alpha=0.3)
      axes.legend()
    images.append(_figure_png(draw))
  return images


def _rates(matrices) -> Tuple[List[float], List[float]]:
  """(false positive rate, recall) per TFMA threshold."""
  fpr = [m['falsePositives'] / (m['falsePositives'] + m['trueNegatives'])
         if m['falsePositives'] + m['trueNegatives'] else 0.0
         for m in matrices]
  return fpr, [m['recall'] for m in matrices]


def evaluation_curves(plots: Dict[str, Any],
                      auc: Optional[float]) -> List[str]:
  """ROC, precision-recall and calibration on the eval split (data URIs)."""
  matrices = sorted(plots.get('confusion_matrices') or [],
                    key=lambda m: m['threshold'])
  images = []
  if matrices:
    fpr, tpr = _rates(matrices)

    def roc(figure):
      axes = figure.add_subplot()
      axes.plot(fpr, tpr, label='model' + (f' (AUC {auc:.4f})'
                                           if auc is not None else ''))
      axes.plot([0, 1], [0, 1], '--', color='grey', label='chance')
      axes.set(xlabel='false positive rate', ylabel='true positive rate',
               title='ROC (eval split)', xlim=(0, 1), ylim=(0, 1.02))
      axes.grid(alpha=0.3)
      axes.legend(loc='lower right')

    # At thresholds with no positive prediction TFMA's precision is 0 (or
    # NaN): not a point of the curve.
    pr_points = [(m['recall'], m['precision']) for m in matrices
                 if m['truePositives'] + m['falsePositives'] > 0]

    def pr(figure):
      axes = figure.add_subplot()
      if pr_points:
        axes.plot(*zip(*pr_points))
      axes.set(xlabel='recall', ylabel='precision',
               title='precision-recall (eval split)', xlim=(0, 1),
               ylim=(0, 1.02))
      axes.grid(alpha=0.3)
    images += [_figure_png(roc), _figure_png(pr)]
  buckets = [b for b in calibration_bins(plots.get('calibration_buckets') or [])
             if b['numWeightedExamples'] > 0]
  if buckets:

    def calibration(figure):
      axes = figure.add_subplot()
      predicted = [b['totalWeightedRefinedPrediction'] /
                   b['numWeightedExamples'] for b in buckets]
      observed = [b['totalWeightedLabel'] / b['numWeightedExamples']
                  for b in buckets]
      sizes = [10 + 200 * b['numWeightedExamples'] /
               max(c['numWeightedExamples'] for c in buckets) for b in buckets]
      axes.scatter(predicted, observed, s=sizes, alpha=0.6,
                   label='bucket (size: rows)')
      axes.plot([0, 1], [0, 1], '--', color='grey', label='perfect')
      axes.set(xlabel='mean predicted probability', ylabel='fraction of label 1',
               title='calibration (eval split)', xlim=(0, 1), ylim=(0, 1.02))
      axes.grid(alpha=0.3)
      axes.legend(loc='upper left')
    images.append(_figure_png(calibration))
  return images


def calibration_bins(buckets: Sequence[Dict[str, float]],
                     bins: int = CALIBRATION_BINS) -> List[Dict[str, float]]:
  """TFMA's fine calibration buckets summed into `bins` equal-width bins.

  TFMA's CalibrationPlot has 1,000 buckets by default; a few hundred eval
  rows leave most of them empty or with one row, which plots as noise.
  Buckets are assigned by their lower threshold; those outside [0, 1)
  (TFMA's under- and overflow buckets) go to the first and last bin.
  """
  keys = ('numWeightedExamples', 'totalWeightedLabel',
          'totalWeightedRefinedPrediction')
  summed = [dict.fromkeys(keys, 0.0) for _ in range(bins)]
  for bucket in buckets:
    low = bucket['lowerThresholdInclusive']
    if low != low or low < 0:  # NaN or -inf: the underflow bucket.
      index = 0
    elif low >= 1:
      index = bins - 1
    else:
      index = min(bins - 1, int(low * bins))
    for key in keys:
      summed[index][key] += bucket[key]
  return summed
