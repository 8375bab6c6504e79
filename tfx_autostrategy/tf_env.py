"""What every entry point must do before TensorFlow is imported.

`tf.keras` must be tf_keras (Keras 2): TFMA, `save_format='tf'` and
MultiWorkerMirroredStrategy need it, and TensorFlow decides at import time
(importing tensorflow_transform would set it too, so the outcome would depend
on import order). Logical CPU devices, too, can only be configured before
TensorFlow initialises its devices.
"""

import os
from typing import Dict, Mapping, Optional

# The environment TensorFlow must start with, in this process or a child.
KERAS_ENV = {'TF_USE_LEGACY_KERAS': '1'}
QUIET_ENV = {'TF_CPP_MIN_LOG_LEVEL': '2'}


def set_keras_flavour() -> None:
  """Makes `tf.keras` tf_keras in this process; call before TensorFlow loads.

  A value set by the user is kept (setdefault), so that a wrong one fails
  loudly in the Trainer's check rather than being overridden silently.
  """
  for key, value in KERAS_ENV.items():
    os.environ.setdefault(key, value)


def subprocess_env(base: Optional[Mapping[str, str]] = None,
                   **extra: str) -> Dict[str, str]:
  """`base` (default: this process's environment) with KERAS_ENV and `extra`.

  For child processes that import TensorFlow (workers, rehearsal and
  benchmark processes): Keras 2 is forced there, since the child cannot
  inherit a decision that this process has not made yet.
  """
  env = dict(os.environ if base is None else base)
  env.update(KERAS_ENV)
  env.update(extra)
  return env


def prepare(cpu_replicas: Optional[int] = None) -> None:
  """Sets the Keras flavour and TF's log level, then the logical CPU devices.

  Args:
    cpu_replicas: logical CPU devices to configure; None reads
      `AUTOSTRATEGY_CPU_REPLICAS` (unset: leave the CPU as one device).
  """
  set_keras_flavour()
  for key, value in QUIET_ENV.items():
    os.environ.setdefault(key, value)
  from tfx_autostrategy.distribute import cpu_replicas as cpu_replicas_lib  # pylint: disable=g-import-not-at-top
  if cpu_replicas:
    cpu_replicas_lib.configure_cpu_replicas(cpu_replicas)
  else:
    cpu_replicas_lib.configure_cpu_replicas_from_env()
