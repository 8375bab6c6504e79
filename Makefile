# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Both create .venv from requirements.lock (the one lock file) when it is missing.

PYTHON_VERSION := $(shell cat .python-version)
PYENV_ROOT ?= $(HOME)/.pyenv
BASE_PYTHON := $(firstword $(wildcard $(PYENV_ROOT)/versions/$(PYTHON_VERSION)/bin/python) $(shell command -v python3.10))
UV_VERSION := 0.13.9
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.installed
# Must be set before TensorFlow is imported anywhere (see README, "Keras flavour").
export TF_USE_LEGACY_KERAS := 1
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONWARNINGS ?= ignore::FutureWarning

DEMO_OUTPUT ?= outputs/demo
PYTEST_ARGS ?=
# Two workers: most of the suite waits on single-threaded work (process start-up,
# Beam's DirectRunner, MLMD), so two files at a time use both cores; tests/conftest.py
# keeps each file, and the files sharing the session's pipeline run, on one worker.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS)
# e.g. make bench BENCH_ARGS="--only preflight --quick"; the suite is bench/suite.py (not installed).
BENCH_ARGS ?=

.PHONY: venv demo test test-fast check-install bench sample lock clean

venv: $(STAMP)

$(STAMP): requirements.lock setup.py
	@test -n "$(BASE_PYTHON)" || { echo "Python $(PYTHON_VERSION) not found: install it with 'pyenv install $(PYTHON_VERSION)'" >&2; exit 1; }
	test -x $(PY) || $(BASE_PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(UV) pip install --quiet --python $(PY) -r requirements.lock
	$(UV) pip install --quiet --python $(PY) --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/autostrategy run --output $(DEMO_OUTPUT)

test: $(STAMP)
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest $(XDIST) -m "not e2e and not slow" $(PYTEST_ARGS)

# Plain pip (no uv, no lock) resolves the package's wheel in a fresh venv to
# the lock's versions; prints pip's resolution time. Needs PyPI. Run by CI.
check-install: $(STAMP)
	$(PY) scripts/check_pip_install.py --python $(BASE_PYTHON)

bench: $(STAMP)
	$(PY) -m bench.suite $(BENCH_ARGS)

sample: $(STAMP)
	$(PY) -m tfx_autostrategy.sample_data --rows 3000 --output tfx_autostrategy/sample

# Regenerates requirements.lock from requirements.in (needs network access to PyPI).
lock: $(STAMP)
	$(UV) pip compile requirements.in --python-version 3.10 --python-platform x86_64-manylinux_2_36 -o requirements.lock

clean:
	rm -rf $(VENV) outputs .pytest_cache
