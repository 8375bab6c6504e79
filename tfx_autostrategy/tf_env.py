"""What every entry point must do before TensorFlow is imported.

`tf.keras` must be tf_keras (Keras 2): TFMA, `save_format='tf'` and
MultiWorkerMirroredStrategy need it, and TensorFlow decides at import time
(importing tensorflow_transform would set it too, so the outcome would depend
on import order). Logical CPU devices, too, can only be configured before
TensorFlow initialises its devices.
"""

import os
from typing import Optional


def prepare(cpu_replicas: Optional[int] = None) -> None:
  """Sets the Keras flavour and TF's log level, then the logical CPU devices.

  Args:
    cpu_replicas: logical CPU devices to configure; None reads
      `AUTOSTRATEGY_CPU_REPLICAS` (unset: leave the CPU as one device).
  """
  os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  from tfx_autostrategy.components import accelerator  # pylint: disable=g-import-not-at-top
  if cpu_replicas:
    accelerator.configure_cpu_replicas(cpu_replicas)
  else:
    accelerator.configure_cpu_replicas_from_env()
