"""Shared pieces of the benchmark suite: figures, machine info, subprocesses.

Every benchmark runs in a fresh Python process (a "worker"): logical CPU
devices must be configured before TensorFlow initialises them, each Beam or
TFX run then starts from the same state, and peak memory is per process. A
worker prints one line `RESULT_PREFIX + json` on stdout; everything else
(TensorFlow, Beam and pip chatter) goes to a log file next to the report.
"""

import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import threading
import time
from typing import Any, Dict, Mapping, Optional, Sequence

from tfx_autostrategy import tf_env

RESULT_PREFIX = 'AUTOSTRATEGY_BENCH_RESULT '
# The checkout holding `bench/` (the benchmarks are not installed).
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What every worker needs before TensorFlow is imported (see README,
# "Keras flavour").
WORKER_ENV = {
    **tf_env.KERAS_ENV,
    **tf_env.QUIET_ENV,
    'PYTHONWARNINGS': 'ignore',
}


@dataclasses.dataclass
class Figure:
  """One number of the report, with the command that produced it.

  Attributes:
    benchmark: suite benchmark name ('trainer', 'input', ...).
    name: what was measured, unique within the report.
    value: the number.
    unit: its unit ('examples/s', 'ratio', 's', 'MiB', 'rows', ...).
    command: the shell command that produced the number (a worker command;
      ratios of two workers' numbers name both).
    target: the target it is held to, e.g. '>= 0.95', or ''.
    passed: whether it meets `target` (None without a target).
    details: anything else worth keeping (per-round values, settings).
  """
  benchmark: str
  name: str
  value: float
  unit: str
  command: str
  target: str = ''
  passed: Optional[bool] = None
  details: Dict[str, Any] = dataclasses.field(default_factory=dict)

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


def check_target(value: float, target: str) -> Optional[bool]:
  """Evaluates targets of the form '>= X' or '<= X'; None without one."""
  if not target:
    return None
  op, threshold = target.split()
  threshold = float(threshold)
  if op == '>=':
    return value >= threshold
  if op == '<=':
    return value <= threshold
  raise ValueError(f'unknown target {target!r}')


def _version(package: str) -> str:
  try:
    return importlib.metadata.version(package)
  except importlib.metadata.PackageNotFoundError:
    return 'not installed'


def _cpu_model() -> str:
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        if line.startswith('model name'):
          return line.split(':', 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or 'unknown'


def machine_info() -> Dict[str, Any]:
  """Cores, memory, CPU model, library versions and the date (UTC)."""
  import psutil  # pylint: disable=g-import-not-at-top
  try:
    usable_cores = len(os.sched_getaffinity(0))
  except AttributeError:
    usable_cores = os.cpu_count()
  return {
      'date': datetime.datetime.now(datetime.timezone.utc).isoformat(
          timespec='seconds'),
      'hostname': platform.node(),
      'cores': usable_cores,
      'logical_cpus': os.cpu_count(),
      'cpu_model': _cpu_model(),
      'memory_gib': round(psutil.virtual_memory().total / 2**30, 1),
      'load_average_1m_at_start': round(os.getloadavg()[0], 2),
      'python': platform.python_version(),
      'platform': platform.platform(),
      'tensorflow': _version('tensorflow'),
      'tf_keras': _version('tf-keras'),
      'tfx': _version('tfx'),
      'tensorflow_transform': _version('tensorflow-transform'),
      'apache_beam': _version('apache-beam'),
  }


def command_text(argv: Sequence[str]) -> str:
  """A copy-pasteable shell command for a worker invocation."""
  argv = list(argv)
  if argv and argv[0] == sys.executable:
    argv[0] = 'python'
  env = ' '.join(f'{k}={v}' for k, v in tf_env.KERAS_ENV.items())
  return f'{env} {shlex.join(argv)}'


@dataclasses.dataclass
class ProcessRun:
  """What `run_measured` saw of one subprocess."""
  returncode: int
  seconds: float
  peak_rss_mib: float          # largest single process of the tree
  peak_tree_rss_mib: float     # the whole tree at its largest moment
  peak_processes: int
  stdout: str
  result: Optional[Dict[str, Any]]


class _MemoryPoller(threading.Thread):
  """Polls the RSS of a process tree (psutil) until stopped."""

  def __init__(self, pid: int, interval: float = 0.2):
    super().__init__(daemon=True)
    self._pid = pid
    self._interval = interval
    self._stop_event = threading.Event()
    self.peak_single = 0
    self.peak_tree = 0
    self.peak_processes = 0

  def run(self):
    import psutil  # pylint: disable=g-import-not-at-top
    try:
      root = psutil.Process(self._pid)
    except psutil.NoSuchProcess:
      return
    while not self._stop_event.is_set():
      try:
        processes = [root] + root.children(recursive=True)
      except psutil.NoSuchProcess:
        break
      sizes = []
      for process in processes:
        try:
          sizes.append(process.memory_info().rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
          pass
      if sizes:
        self.peak_single = max(self.peak_single, max(sizes))
        self.peak_tree = max(self.peak_tree, sum(sizes))
        self.peak_processes = max(self.peak_processes, len(sizes))
      self._stop_event.wait(self._interval)

  def stop(self):
    self._stop_event.set()
    self.join()


def worker_env(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
  """The environment of a worker: Keras 2, quiet TF, and `bench` importable.

  Workers run as `python -m bench.<worker>`; the checkout that holds `bench/`
  goes first on PYTHONPATH so that they find it from any working directory.
  """
  env = dict(os.environ)
  env.update(WORKER_ENV)
  env['PYTHONPATH'] = os.pathsep.join(
      p for p in (CHECKOUT, env.get('PYTHONPATH', '')) if p)
  env.update(extra or {})
  return env


def run_measured(argv: Sequence[str], log_path: str, timeout: float,
                 env: Optional[Mapping[str, str]] = None) -> ProcessRun:
  """Runs `argv`, polling its process tree's memory; stderr goes to the log.

  Returns:
    A `ProcessRun`; `result` is the JSON after `RESULT_PREFIX` on stdout, or
    the last stdout line parsed as JSON, or None.
  """
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  with open(log_path, 'a') as log:
    log.write(f'\n$ {command_text(argv)}\n')
    log.flush()
    started = time.monotonic()
    process = subprocess.Popen(list(argv), stdout=subprocess.PIPE,
                               stderr=log, text=True,
                               env=worker_env(env))
    poller = _MemoryPoller(process.pid)
    poller.start()
    try:
      stdout, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
      process.kill()
      stdout, _ = process.communicate()
      stdout += f'\n(killed after {timeout:.0f} s timeout)'
    seconds = time.monotonic() - started
    poller.stop()
    log.write(stdout)
  result = None
  lines = [l for l in stdout.splitlines() if l.strip()]
  for line in reversed(lines):
    if line.startswith(RESULT_PREFIX):
      result = json.loads(line[len(RESULT_PREFIX):])
      break
  else:
    if lines:
      try:
        parsed = json.loads(lines[-1])
        result = parsed if isinstance(parsed, dict) else None
      except json.JSONDecodeError:
        pass
  return ProcessRun(process.returncode, seconds, poller.peak_single / 2**20,
                    poller.peak_tree / 2**20, poller.peak_processes, stdout,
                    result)


def emit_result(result: Mapping[str, Any]) -> None:
  """Prints a worker's result line (see `RESULT_PREFIX`)."""
  sys.stdout.flush()
  print(RESULT_PREFIX + json.dumps(result, sort_keys=True), flush=True)


def ensure_data(data_dir: str, rows: int, seed: int) -> str:
  """Writes seeded synthetic CSVs once; returns the data root.

  The same (rows, seed) always gives the same data, so a finished directory
  (marked by `.complete`) is reused across suite runs.
  """
  from tfx_autostrategy import sample_data  # pylint: disable=g-import-not-at-top
  root = os.path.join(data_dir, f'rows-{rows}-seed-{seed}')
  marker = os.path.join(root, '.complete')
  if not os.path.exists(marker):
    sample_data.write_dataset(root, sample_data.generate(rows, seed=seed))
    with open(marker, 'w') as f:
      f.write(f'{rows}\n')
  return root


def data_command(rows: int, seed: int, root: str) -> str:
  return (f'python -m tfx_autostrategy.sample_data --rows {rows} '
          f'--seed {seed} --output {shlex.quote(root)}')
