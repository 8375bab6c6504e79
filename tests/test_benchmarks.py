"""The benchmark suite: report helpers, and a smoke run of the real workers."""

import argparse
import json
import math
import os
import subprocess
import sys

import pytest

from bench import report as report_lib
from conftest import run_cli

# The checkout: the suite runs from it (`make bench`), not from the package.
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_suite(*args, timeout):
  """`python -m bench.suite ARGS` from the checkout, as `make bench` runs it."""
  return subprocess.run(
      [sys.executable, '-m', 'bench.suite', *args], cwd=CHECKOUT,
      capture_output=True, text=True, timeout=timeout, check=False)


def test_linear_fit_and_crossover():
  fixed, per_row = report_lib.linear_fit([(10, 12.0), (20, 22.0), (30, 32.0)])
  assert fixed == pytest.approx(2.0)
  assert per_row == pytest.approx(1.0)
  # b: 10 s more start-up, half the per-row cost -> catches up at 20 rows.
  assert report_lib.crossover(2.0, 1.0, 12.0, 0.5) == pytest.approx(20.0)
  assert report_lib.crossover(2.0, 1.0, 12.0, 1.5) is None
  assert report_lib.growth_exponent(10, 5.0, 100, 50.0) == pytest.approx(1.0)


def test_table_marks_targets():
  figures = [
      {'benchmark': 'trainer', 'name': 'a', 'value': 0.97, 'unit': 'ratio',
       'target': '>= 0.95', 'passed': True},
      {'benchmark': 'trainer', 'name': 'b', 'value': 0.5, 'unit': 'ratio',
       'target': '>= 0.95', 'passed': False},
      {'benchmark': 'transform', 'name': 'c', 'value': -1.0,
       'unit': 'rows', 'target': '', 'passed': None},
  ]
  table = report_lib.render_table(figures).splitlines()
  assert table[0].startswith('| benchmark |')
  assert '| 0.97 | ratio | >= 0.95 | pass |' in table[2]
  assert '**FAIL**' in table[3]
  assert '| never |' in table[4]


def test_unknown_benchmark_is_a_usage_error(tmp_path):
  proc = run_suite('--only', 'nonsense', '--output', str(tmp_path),
                   timeout=120)
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines()[-1] == (
      "error: unknown benchmarks ['nonsense']; choose from "
      'preflight,trainer,input,replicas,transform,e2e')


@pytest.mark.parametrize('args', [
    ('--models', 'hub'),
    ('--models', 'hub', '--hub-model-path', 'MiniLM'),
    ('--models', 'bow,hub', '--hub-model-path', 'MiniLM',
     '--pipeline-root', 'out/pipeline_root'),
])
def test_hub_needs_its_checkpoint_and_a_transform_output_of_its_tokenizer(
    tmp_path, args):
  proc = run_suite('--only', 'trainer', '--output', str(tmp_path), *args,
                   timeout=120)
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines()[-1] == (
      'error: --models hub runs alone, with --hub-model-path DIR and '
      '--pipeline-root of an `autostrategy run --model hub --hub-model-path '
      'DIR` (the Transform output its tokenizer made)')
  assert not (tmp_path / 'report.json').exists()


def test_hub_checkpoint_reaches_the_training_worker(tmp_path):
  """The suite's options -> worker arguments -> the worker's parsed options."""
  from bench import benchmarks  # pylint: disable=g-import-not-at-top
  from bench import suite  # pylint: disable=g-import-not-at-top
  from bench import training_worker  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser()
  suite.add_arguments(parser)
  checkpoint = tmp_path / 'MiniLM'
  options = suite._resolve_options(parser.parse_args([  # pylint: disable=protected-access
      '--models', 'hub', '--hub-model-path', str(checkpoint),
      '--pipeline-root', str(tmp_path / 'pipeline_root'), '--only',
      'trainer', '--steps', '7']))
  assert options['models'] == ['hub']
  fixture = {'examples': 'EX', 'transform_graph': 'TG'}
  args = benchmarks.training_worker_args(options, fixture, 'hub',
                                         'trainer,memory')
  parsed = training_worker.parse_args(args)
  assert (parsed.model, parsed.hub_model_path, parsed.max_steps,
          parsed.variant_list) == ('hub', str(checkpoint), 7,
                                   ['trainer', 'memory'])
  # bow and transformer get no checkpoint; the worker refuses one for them
  # and refuses hub without one.
  assert '--hub-model-path' not in benchmarks.training_worker_args(
      options, fixture, 'bow', 'trainer')
  for argv in (['--model', 'bow', '--hub-model-path', str(checkpoint)],
               ['--model', 'hub']):
    with pytest.raises(SystemExit) as exit_info:
      training_worker.parse_args(['--examples', 'EX', '--transform-graph',
                                  'TG', *argv])
    assert exit_info.value.code == 2


def test_hub_and_replicas_is_a_usage_error(tmp_path):
  proc = run_suite('--only', 'trainer,replicas', '--models', 'hub',
                   '--hub-model-path', 'MiniLM', '--pipeline-root', 'x',
                   '--output', str(tmp_path), timeout=120)
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines()[-1] == (
      'error: --models hub: leave out replicas (it trains bow on the '
      'fixture), e.g. --only trainer,input')


def test_installed_cli_points_to_make_bench_without_importing_it(tmp_path):
  proc = run_cli('bench', '--only', 'preflight', timeout=120)
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines()[-1] == (
      'error: the benchmarks are not part of the installed package; run '
      '`make bench` (or `python -m bench.suite --help`) in a checkout')
  # Building the parser imports no benchmark code (nor TFX).
  probe = subprocess.run(
      [sys.executable, '-c', 'import sys; from tfx_autostrategy import cli; '
       'cli.build_parser(); print(sorted(m for m in sys.modules if '
       'm.split(".")[0] in ("bench", "tfx")))'],
      cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
  assert probe.stdout.strip() == '[]', probe.stderr[-2000:]


def test_preflight_benchmark_reports_rows_per_second(tmp_path):
  proc = run_suite('--only', 'preflight', '--quick', '--output',
                   str(tmp_path), timeout=300)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
  report = json.load(open(tmp_path / 'report.json'))
  assert report['errors'] == []
  [figure] = report['figures']
  assert (figure['benchmark'], figure['name'], figure['unit'],
          figure['target']) == ('preflight', 'csv_check_rows_per_second',
                                'rows/s', '>= 50000')
  assert figure['details']['rows'] == 20_000
  seconds = figure['details']['seconds']
  assert len(seconds) == 3 and min(seconds) > 0
  # A rate of one check of all rows, within the range of the timed checks.
  assert 20_000 / max(seconds) <= figure['value'] <= 20_000 / min(seconds)


@pytest.mark.bench
@pytest.mark.slow
def test_smallest_suite_writes_a_report(pipeline_run, tmp_path):
  """Trainer, input and replica benchmarks on the shared 800-row run.

  Reuses the Transform output of the session's pipeline run, so only the
  training workers run here (about a minute after that run).
  """
  _, _, output = pipeline_run
  out = tmp_path / 'bench'
  proc = run_suite('--output', str(out), '--only',
                   'trainer,input,replicas', '--pipeline-root',
                   os.path.join(output, 'pipeline_root'), '--models', 'bow',
                   '--replicas', '1,2', '--steps', '3', '--rounds', '1',
                   '--warmup', '1', timeout=600)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  report = json.loads((out / 'report.json').read_text())
  assert report['errors'] == []
  for key in ('cores', 'memory_gib', 'tensorflow', 'date'):
    assert report['machine'][key]
  names = {f['name'] for f in report['figures']}
  for name in ('trainer / in-memory fit [bow]',
               'streamed input (cache off) / in-memory fit [bow]',
               'predict examples/s [bow]',
               'train / predict throughput [bow]',
               'input pipeline / model consumption [bow]',
               'speed-up 2 vs 1 CPU replicas'):
    assert name in names
  trainer = next(f for f in report['figures']
                 if f['name'] == 'trainer / in-memory fit [bow]')
  # The sample's train split fits the default cache budget: the Trainer
  # path measured is the cached one run_fn takes.
  assert trainer['details']['train_cached'] is True
  for figure in report['figures']:
    assert set(figure) >= {'benchmark', 'name', 'value', 'unit', 'command'}
    assert 'python -m bench.' in figure['command']
    if figure['unit'] in ('ratio', 'examples/s'):
      assert math.isfinite(figure['value']) and figure['value'] > 0, figure
  assert '| benchmark | figure |' in (out / 'report.md').read_text()
  assert '| trainer | trainer / in-memory fit [bow] |' in proc.stdout
  speed = next(f for f in report['figures']
               if f['name'] == 'train / predict throughput [bow]')
  # A target, reported (not asserted: timing is never a test verdict here).
  assert speed['target'] == '>= 0.33'
  assert speed['details']['in_memory_fit_over_predict'] > 0
