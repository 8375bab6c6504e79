"""Vertex AI scheduling of the training job: `--spot`, restarts, the timeout.

What `autostrategy compile --spot --restart-on-worker-restart --job-timeout`
become in the CustomJob's `job_spec.scheduling` (aiplatform_v1 `Scheduling`:
`strategy` SPOT or STANDARD, `restart_job_on_worker_restart`, `timeout` as a
protobuf Duration string), which TFX's Vertex training client submits as is.
"""

import re
from typing import Any, Dict

_DURATION_RE = re.compile(r'([0-9]+)([smhd]?)')
_UNIT_SECONDS = {'': 1, 's': 1, 'm': 60, 'h': 3600, 'd': 86400}


def parse_duration(text: str, flag: str = '--job-timeout') -> int:
  """Seconds of a duration such as '3600', '90m', '24h' or '7d'.

  Args:
    text: a whole number of seconds, or a number followed by s, m, h or d.
    flag: the option it came from, for the message.

  Raises:
    ValueError: malformed or not positive; the message names `flag` and
      `text`.
  """
  match = _DURATION_RE.fullmatch(text.strip())
  seconds = (int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
             if match else 0)
  if seconds <= 0:
    raise ValueError(
        f'{flag} {text!r}: expected a positive duration: seconds, or a number '
        'followed by s, m, h or d (e.g. 3600, 90m, 24h, 7d)')
  return seconds


def vertex_scheduling(spot: bool, restart_on_worker_restart: bool,
                      timeout_seconds: int) -> Dict[str, Any]:
  """The CustomJobSpec `scheduling` field, as JSON.

  Args:
    spot: Spot VMs (preemptible, cheaper) instead of standard ones.
    restart_on_worker_restart: restart the whole job when a worker restarts.
    timeout_seconds: stop the job after this long; 0 leaves Vertex AI's
      default (7 days).
  """
  scheduling: Dict[str, Any] = {
      'strategy': 'SPOT' if spot else 'STANDARD',
      'restart_job_on_worker_restart': restart_on_worker_restart,
  }
  if timeout_seconds:
    scheduling['timeout'] = f'{timeout_seconds}s'
  return scheduling
