"""Benchmarks behind `autostrategy bench` / `make bench`."""
