"""`autostrategy detect`: the strategy and plan the Trainer would use here.

The same chain the Trainer's `run_fn` runs (`distribution_plan.resolve`:
detect -> strategy -> plan) on the settings the options give, printed as
text or one JSON object.
"""

import argparse
import json
import sys

from tfx_autostrategy.cli import training_options
from tfx_autostrategy.cli.failures import EXIT_BAD_INPUT
from tfx_autostrategy.cli.failures import EXIT_OK


def add_parser(commands) -> None:
  """Adds `autostrategy detect` to the `commands` subparsers."""
  detect = commands.add_parser(
      'detect', help='show the strategy the Trainer would use here')
  detect.add_argument('--json', action='store_true')
  training_options.add(detect, *training_options.PLAN_OPTIONS)


def run(args: argparse.Namespace) -> int:
  """`autostrategy detect`: exit 0, or 2 with the cause on stderr."""
  from tfx_autostrategy.distribute import devices  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.distribute import distribution_plan  # pylint: disable=g-import-not-at-top
  try:
    _, plan, _ = distribution_plan.resolve(
        training_options.settings_from(args, training_options.PLAN_OPTIONS))
  except (devices.AcceleratorNotFoundError, ValueError) as error:
    print(f'error: {error}', file=sys.stderr)
    return EXIT_BAD_INPUT
  if args.json:
    print(json.dumps(plan.to_dict(), sort_keys=True))
  else:
    print(distribution_plan.format_plan(plan))
  return EXIT_OK
