"""LocalDagRunner's and the Trainer's log records as progress events.

The console shows one line per component as it starts and finishes and one
per finished training epoch; LocalDagRunner says the former only in its log
('Component X is running.' / '... is finished.') and the Trainer logs the
latter (`conventions.EPOCH_FINISHED_MESSAGE`), so a logging handler turns
those records into calls.
"""

import json
import logging
import time
from typing import Callable, Dict, Optional

from tfx_autostrategy import conventions

# LocalDagRunner's records around each component (tfx/orchestration/local/
# local_dag_runner.py logs them with the node id as the one argument).
COMPONENT_RUNNING = 'Component %s is running.'
COMPONENT_FINISHED = 'Component %s is finished.'


class ProgressHandler(logging.Handler):
  """Turns LocalDagRunner's 'Component X is running/finished' logs into events.

  With `on_epoch`, the Trainer's epoch-end records become
  `on_epoch(epoch, epochs, values)` calls (values: loss, auc, val_auc,
  examples_per_second, ...), for a console line per epoch.
  """

  def __init__(self, on_event: Callable[[str, str, Optional[float]], None],
               on_epoch: Optional[Callable[[int, int, Dict[str, float]],
                                           None]] = None):
    super().__init__(level=logging.INFO)
    self._on_event = on_event
    self._on_epoch = on_epoch
    self._started: Dict[str, float] = {}

  def emit(self, record: logging.LogRecord) -> None:
    if record.msg == conventions.EPOCH_FINISHED_MESSAGE:
      if self._on_epoch:
        epoch, epochs, values = record.args
        self._on_epoch(epoch, epochs, json.loads(values))
      return
    if record.msg not in (COMPONENT_RUNNING, COMPONENT_FINISHED):
      return
    component = record.args[0]
    if record.msg == COMPONENT_RUNNING:
      self._started[component] = time.monotonic()
      self._on_event(component, 'started', None)
    else:
      elapsed = time.monotonic() - self._started.get(component, time.monotonic())
      self._on_event(component, 'finished', elapsed)
