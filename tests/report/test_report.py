"""The run report (OUT/report.html) in a real browser, and the console lines.

Reuses the shared `pipeline_run` (4-replica MirroredStrategy, 2 epochs): no
pipeline run of its own.
"""

import base64
import io
import json
import os
import re
import struct

import pytest

from conftest import PIPELINE_RUN_PER_REPLICA_BATCH
from conftest import PIPELINE_RUN_REPLICAS
from conftest import run_cli
from tfx_autostrategy.report import facts
from tfx_autostrategy.report import plots

import browser  # pylint: disable=g-bad-import-order

EPOCH_LINE = re.compile(
    r'^    epoch (\d)/2: loss (\d\.\d{4}), auc (\d\.\d{4}), '
    r'val_auc (\d\.\d{4}), (\d+) examples/s$')


def _model_run(stdout: str) -> str:
  prefix = 'tensorboard: tensorboard --logdir '
  lines = [l for l in stdout.splitlines() if l.startswith(prefix)]
  assert len(lines) == 1, stdout[-3000:]
  return lines[0][len(prefix):]


@pytest.mark.e2e
def test_console_has_epoch_lines_report_and_tensorboard(pipeline_run):
  proc, result, output = pipeline_run
  lines = proc.stdout.splitlines()
  epochs = [EPOCH_LINE.match(l) for l in lines if EPOCH_LINE.match(l)]
  assert [m.group(1) for m in epochs] == ['1', '2'], proc.stdout[-3000:]
  # The printed values are the Trainer's history, epoch by epoch.
  model_run = _model_run(proc.stdout)
  with open(os.path.join(model_run, 'history.json')) as f:
    history = json.load(f)
  assert [(m.group(2), m.group(3), m.group(4), m.group(5))
          for m in epochs] == [
              (f'{h["loss"]:.4f}', f'{h["auc"]:.4f}', f'{h["val_auc"]:.4f}',
               f'{h["examples_per_second"]:.0f}') for h in history]
  assert all(h['examples_per_second'] > 0 for h in history)
  # The epoch lines come while the Trainer runs, between its start and end.
  start = lines.index('  AutoStrategyTrainer  ...')
  end = next(i for i, l in enumerate(lines)
             if l.startswith('  AutoStrategyTrainer  done in'))
  assert all(start < lines.index(m.group(0)) < end for m in epochs)
  path = os.path.join(os.path.abspath(output), 'report.html')
  assert f'report: {path}' in lines
  assert result['report'] == path
  # TensorBoard's event files are where the printed command points.
  assert any(name.startswith('events.out.tfevents')
             for _, _, names in os.walk(model_run) for name in names)


def _png_size(data: bytes):
  assert data[:8] == b'\x89PNG\r\n\x1a\n', data[:16]
  assert data[12:16] == b'IHDR'
  return struct.unpack('>II', data[16:24])


@pytest.mark.e2e
def test_report_loads_in_chromium_with_auc_plan_and_real_images(pipeline_run):
  if not browser.find_chromium():
    pytest.skip(browser.INSTALL_HINT)
  _, result, output = pipeline_run
  page = browser.load(os.path.join(output, 'report.html'))
  assert page['console_errors'] == []
  assert page['failed_requests'] == []
  # Self-contained: the page itself and its embedded images, nothing else.
  assert all(url.startswith(('file://', 'data:')) for url in page['requests'])
  text = page['text']
  assert 'autostrategy run: pushed' in text
  assert f'auc\t{result["metrics"]["auc"]:.4f}' in text
  assert 'strategy\tMirroredStrategy' in text
  assert f'num_replicas\t{PIPELINE_RUN_REPLICAS}' in text
  assert ('fixed lengths\tchar_ngram_length 416 (auto: 95th percentile 412, '
          'truncates 4.8 % of 1200 texts), sequence_length 40 (auto: 95th '
          'percentile 33, truncates 2.1 % of 1200 texts)') in text
  assert ('global_batch_size\t'
          f'{PIPELINE_RUN_PER_REPLICA_BATCH * PIPELINE_RUN_REPLICAS}') in text
  for name, values in result['slices'].items():
    assert f'{name}\t{values["example_count"]:.0f}\t' in text
  # Loss and AUC curves, ROC, precision-recall, calibration.
  assert len(page['images']) == 5, page['images']
  from PIL import Image  # pylint: disable=g-import-not-at-top
  for src, width, height, complete in page['images']:
    assert complete and src.startswith('data:image/png;base64,')
    data = base64.b64decode(src.split(',', 1)[1])
    assert _png_size(data) == (width, height) == (520, 380)
    assert len(data) > 10_000
    # Drawn curves and text, not a blank canvas.
    colours = Image.open(io.BytesIO(data)).convert('RGB').getcolors(1 << 20)
    assert len(colours) > 50


def test_report_of_a_directory_without_a_run_is_refused(tmp_path):
  proc = run_cli('report', str(tmp_path))
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines()[-1] == (
      f'error: {tmp_path}: no run found (neither summary.json nor '
      'metadata.sqlite); pass the --output of an `autostrategy run`')
  assert not os.path.exists(tmp_path / 'report.html')


def test_calibration_bins_sum_tfma_buckets_by_lower_threshold():
  def bucket(low, rows, label, prediction):
    return {'lowerThresholdInclusive': low, 'upperThresholdExclusive': 0,
            'numWeightedExamples': rows, 'totalWeightedLabel': label,
            'totalWeightedRefinedPrediction': prediction}
  bins = plots.calibration_bins([
      bucket(float('-inf'), 1, 0, 0.0), bucket(0.001, 2, 1, 0.01),
      bucket(0.55, 3, 2, 1.7), bucket(0.999, 4, 4, 3.99),
      bucket(1.0, 5, 5, 5.0)], bins=10)
  assert [b['numWeightedExamples'] for b in bins] == [3, 0, 0, 0, 0, 3, 0,
                                                      0, 0, 9]
  assert bins[0]['totalWeightedLabel'] == 1
  assert bins[9]['totalWeightedRefinedPrediction'] == pytest.approx(8.99)


def test_slice_trust_names_what_is_too_small():
  assert facts.slice_trust({'example_count': 99.0, 'mean_label': 0.5},
                                 100, 10) == '99 rows < 100'
  assert facts.slice_trust({'example_count': 200.0, 'mean_label': 0.04},
                                 100, 10) == '8 rows of label 1 < 10'
  assert facts.slice_trust({'example_count': 200.0, 'mean_label': 0.5},
                                 100, 10) is None
