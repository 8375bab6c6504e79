"""One process of an `autostrategy rehearse`: the Trainer's executor, for real.

Usage: python -m tfx_autostrategy.cli.rehearse_worker SPEC_JSON RESULT_JSON

The parent (`tfx_autostrategy.cli.rehearse_cluster`) sets the environment this
process would have on the machine being rehearsed — the logical CPU devices
that stand in for its GPUs or TPU cores (`AUTOSTRATEGY_CPU_REPLICAS`), and for
several workers the CLUSTER_SPEC and TF_CONFIG that Vertex AI writes — and
SPEC_JSON names the input artifacts (URIs and splits, as MLMD recorded them),
the output directories and the execution properties. This process runs
AutoStrategyTrainer's `Executor.Do()` on them and writes the plan and the
number of trained steps to RESULT_JSON.
"""

import json
import os
import sys

from tfx_autostrategy import conventions
from tfx_autostrategy import tf_env


def _artifacts(specs):
  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  result = {}
  for key, items in specs.items():
    artifacts = []
    for item in items:
      artifact = getattr(standard_artifacts, item['type'])()
      artifact.uri = item['uri']
      if item.get('splits'):
        artifact.split_names = artifact_utils.encode_split_names(
            item['splits'])
      artifacts.append(artifact)
    result[key] = artifacts
  return result


def main(argv) -> int:
  spec_path, result_path = argv[1:3]
  tf_env.prepare()
  import logging  # pylint: disable=g-import-not-at-top
  logging.basicConfig(level=logging.INFO,
                      format='%(asctime)s %(levelname)s %(message)s')
  from tfx_autostrategy.components.trainer import executor as executor_lib  # pylint: disable=g-import-not-at-top
  with open(spec_path) as f:
    spec = json.load(f)
  output_dict = _artifacts(spec['outputs'])
  result = {}
  try:
    executor_lib.Executor().Do(_artifacts(spec['inputs']), output_dict,
                               spec['exec_properties'])
  except Exception as error:  # pylint: disable=broad-except
    # The parent reports the innermost cause; the traceback stays in the log.
    logging.exception('the rehearsal failed')
    while error.__cause__ is not None:
      error = error.__cause__
    result['error'] = f'{type(error).__name__}: {error}'.strip()
    with open(result_path, 'w') as f:
      json.dump(result, f)
    return 1
  model_run = output_dict['model_run'][0].uri
  for name, path in (('plan', conventions.PLAN_FILE),
                     ('history', conventions.HISTORY_FILE)):
    path = os.path.join(model_run, path)
    if os.path.exists(path):
      with open(path) as f:
        result[name] = json.load(f)
  with open(result_path, 'w') as f:
    json.dump(result, f)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
