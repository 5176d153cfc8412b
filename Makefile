# Two commands on a fresh machine: `make plan` (the offline plan of the default stack) and
# `make test`. Both create the virtualenv and install everything pyproject.toml declares.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STACK ?= gke-h100

.PHONY: setup plan test lint typecheck unit bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

plan: setup
	$(PY) -m mig profiles --gpu h100
	$(PY) -m mig fit --gpu h100 --memory-gib 24.5

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: setup
	$(PY) -m mypy

unit: setup
	$(PY) -m pytest -q

test: lint typecheck unit

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
