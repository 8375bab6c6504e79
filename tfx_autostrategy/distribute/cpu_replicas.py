"""Logical CPU devices as replicas: `--cpu-replicas N` and its variable.

TensorFlow fixes its logical devices when it first initialises them, so this
runs in launchers and entry points before anything else touches devices.
"""

import os
from typing import Mapping, Optional

# Read by `configure_cpu_replicas_from_env`, which entry points call before
# anything else touches TensorFlow devices.
CPU_REPLICAS_ENV = 'AUTOSTRATEGY_CPU_REPLICAS'


def configure_cpu_replicas(n: int) -> None:
  """Splits the physical CPU into `n` logical devices (`n` replicas).

  Must run before TensorFlow initialises its devices (anything that lists
  logical devices, creates a tensor or runs an op), so launchers call it
  before importing the rest of the code.

  Args:
    n: number of logical CPU devices, >= 1.

  Raises:
    ValueError: `n` < 1.
    RuntimeError: TensorFlow already initialised its devices with a
      different number of logical CPUs.
  """
  if n < 1:
    raise ValueError(f'number of CPU replicas must be >= 1, got {n}')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # Listing physical devices does not initialise the runtime.
  cpu = tf.config.list_physical_devices('CPU')[0]
  configured = tf.config.get_logical_device_configuration(cpu)
  if len(configured or [None]) == n:
    return
  try:
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
  except RuntimeError as error:
    current = len(tf.config.list_logical_devices('CPU'))
    if current == n:
      return
    raise RuntimeError(
        f'configure_cpu_replicas({n}) must be called before TensorFlow '
        f'initialises devices (e.g. in the launcher before other imports); '
        f'TensorFlow already initialised {current} logical CPU device(s). '
        f'Alternatively set {CPU_REPLICAS_ENV}={n} for the entry point.'
    ) from error


def configure_cpu_replicas_from_env(
    environ: Optional[Mapping[str, str]] = None) -> int:
  """Applies `CPU_REPLICAS_ENV` with `configure_cpu_replicas`.

  Entry points call this before anything else touches TensorFlow devices.

  Args:
    environ: environment to read; defaults to `os.environ`.

  Returns:
    The number of logical CPUs configured, or 0 when the variable is unset.

  Raises:
    ValueError: the variable is not an integer >= 1.
    RuntimeError: see `configure_cpu_replicas`.
  """
  environ = os.environ if environ is None else environ
  text = environ.get(CPU_REPLICAS_ENV, '').strip()
  if not text:
    return 0
  try:
    n = int(text)
  except ValueError as error:
    raise ValueError(
        f'{CPU_REPLICAS_ENV} must be an integer >= 1, got {text!r}') from error
  if n < 1:
    raise ValueError(
        f'{CPU_REPLICAS_ENV} must be an integer >= 1, got {text!r}')
  configure_cpu_replicas(n)
  return n
