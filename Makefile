# kappa — common targets. The environment lives in .venv at the repository root and is
# (re)built whenever pyproject.toml changes. Every target installs what it needs.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
CORE  := $(VENV)/.kappa-core
STAMP := $(VENV)/.kappa-full
PYTEST_ARGS ?=

.PHONY: env sysdeps demo base-models findings test test-all lint bench clean

# Two layers: the core (what `make demo` needs) and the full set for the tests
# (dev tools, Ray, verl and its plug-in).
$(CORE): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch (an unpinned torch pulls a multi-GB CUDA build).
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e .
	@touch $(CORE)

$(STAMP): $(CORE) plugins/pyproject.toml
	$(PY) -m pip install -q -e '.[dev,ray,verl]'
	# The verl plug-in, into the same environment (it needs nothing kappa lacks).
	$(PY) -m pip install -q --no-deps -e plugins/
	@touch $(STAMP)

env: $(STAMP)

# System packages some tests use (headless Chromium for the report test, PostgreSQL
# server binaries for the registry tests). Installed only when missing and when we can.
sysdeps:
	@bash scripts/sysdeps.sh

## The main job: a toy sweep (GRPO and Dr.GRPO x +-RB x 3 seeds) on the embedded CPU trainer.
demo: $(CORE)
	$(VENV)/bin/kappa demo experiments/toy/demo.yaml

## Rebuild the base models kappa ships (orchestrator/backends/embedded/base_models/) from the
## warm-start settings of experiments/toy/*.yaml, on this machine's CPU kernels. Only when
## the warm start's recipe changes: other machines then load the new files.
base-models: $(CORE)
	$(PY) scripts/build_base_models.py

## The papers' findings at laptop scale: run the miniature studies from scratch and
## rewrite docs/findings.md with their verdicts, with the replications of 1b, 3b and 4 under
## AVX2 kernels and on held-out seeds (about 3.5 hours on two free cores).
findings: $(CORE)
	$(PY) bench/findings.py --replicas

## The tests (CI runs exactly this).
test: env sysdeps
	$(VENV)/bin/ruff check orchestrator plugins tests bench
	$(VENV)/bin/mypy
	cd plugins && ../$(VENV)/bin/mypy --config-file ../pyproject.toml kappa_verl
	$(VENV)/bin/pytest -m "not slow" -n 2 $(PYTEST_ARGS)

test-all: env sysdeps
	$(VENV)/bin/pytest -n 2 $(PYTEST_ARGS)

lint: env
	$(VENV)/bin/ruff check orchestrator plugins tests bench
	$(VENV)/bin/mypy
	cd plugins && ../$(VENV)/bin/mypy --config-file ../pyproject.toml kappa_verl

bench: env
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) .kappa .mypy_cache .ruff_cache .pytest_cache
