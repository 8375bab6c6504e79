"""`autostrategy bench`: placeholder replaced by the benchmark suite."""

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument('--output', default='outputs/bench')


def run(args: argparse.Namespace) -> int:
  raise NotImplementedError(args)
