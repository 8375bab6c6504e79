"""`python -m tfx_autostrategy.cli ...` is the `autostrategy` console script."""

import sys

from tfx_autostrategy.cli import main

if __name__ == '__main__':
  sys.exit(main())
