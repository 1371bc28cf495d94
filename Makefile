# The README's two commands are `make demo` and `make test`; everything else builds on `setup`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# DVC runs each stage's `python ...` through the shell: make it this venv's python.
export PATH := $(abspath $(BIN)):$(PATH)
RUNTIME_STAMP := $(VENV)/.runtime-installed
DEV_STAMP := $(VENV)/.dev-installed

.PHONY: setup dev demo repro test bench lint clean-venv

# uv resolves this dependency set in seconds where plain pip takes minutes; pip is the fallback
# whenever uv is missing or fails (an unusual proxy or certificate setup, say).
install = if test -x $(BIN)/uv && $(BIN)/uv pip install --python $(BIN)/python -q $(1); then :; \
	else $(BIN)/python -m pip install -q $(1); fi

setup: $(RUNTIME_STAMP)

$(RUNTIME_STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv || true
	$(call install,-r requirements.txt)
	touch $@

dev: $(DEV_STAMP)

$(DEV_STAMP): $(RUNTIME_STAMP) requirements-dev.txt
	$(call install,-r requirements-dev.txt)
	touch $@

demo: setup
	$(BIN)/python -m tracevote demo $(if $(DEMO_DATASET),--dataset $(DEMO_DATASET),)

# Pull what teammates pushed before running anything, so a fresh clone never pays for a pool twice.
repro: setup
	$(BIN)/python -m tracevote unlock
	$(BIN)/dvc repro --pull $(ARGS)

lint: dev
	$(BIN)/ruff check .

# Two workers, one test file each at a time (module fixtures stay in one process): most of the suite waits
# on DVC and subprocesses, so this halves the wall time on 2 cores (`make test PYTEST_WORKERS=0`: serial).
PYTEST_WORKERS ?= 2

test: dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

bench: setup
	$(BIN)/python -m bench.run $(ARGS)

clean-venv:
	rm -rf $(VENV)
