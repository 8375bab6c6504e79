"""Benchmarks of tfx-autostrategy, run from a checkout (not installed).

`make bench` runs `python -m bench.suite` (the suite: `suite.py`, its workers
`training_worker.py` and `transform_worker.py`, and `common.py`);
`python bench/quality.py` compares the model with a TF-IDF baseline. They
import the installed `tfx_autostrategy` package; the installed `autostrategy`
command does not import them.
"""
