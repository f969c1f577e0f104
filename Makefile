# kappa — common targets. The environment lives in .venv at the repository root and is
# (re)built whenever pyproject.toml changes. Every target installs what it needs.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.kappa-installed
PYTEST_ARGS ?=

.PHONY: env sysdeps demo test test-all lint bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch (an unpinned torch pulls a multi-GB CUDA build).
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,ray]'
	@touch $(STAMP)

env: $(STAMP)

# System packages some tests use (headless Chromium for the report test, PostgreSQL
# server binaries for the registry tests). Installed only when missing and when we can.
sysdeps:
	@bash scripts/sysdeps.sh

## The main job: a toy sweep (6 baselines x +-RB) on the embedded CPU trainer.
demo: env
	$(VENV)/bin/kappa demo experiments/toy/table2.yaml

## The tests (CI runs exactly this).
test: env sysdeps
	$(VENV)/bin/ruff check orchestrator tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -m "not slow" -n 2 $(PYTEST_ARGS)

test-all: env sysdeps
	$(VENV)/bin/pytest -n 2 $(PYTEST_ARGS)

lint: env
	$(VENV)/bin/ruff check orchestrator tests bench
	$(VENV)/bin/ruff format --check orchestrator tests bench
	$(VENV)/bin/mypy

bench: env
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) .kappa .mypy_cache .ruff_cache .pytest_cache
