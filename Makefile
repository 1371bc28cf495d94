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

setup: $(RUNTIME_STAMP)

# uv resolves this dependency set in seconds where plain pip takes minutes; pip stays the fallback.
$(RUNTIME_STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv || true
	if test -x $(BIN)/uv; then $(BIN)/uv pip install --python $(BIN)/python -q -r requirements.txt; \
	else $(BIN)/python -m pip install -q -r requirements.txt; fi
	touch $@

dev: $(DEV_STAMP)

$(DEV_STAMP): $(RUNTIME_STAMP) requirements-dev.txt
	if test -x $(BIN)/uv; then $(BIN)/uv pip install --python $(BIN)/python -q -r requirements-dev.txt; \
	else $(BIN)/python -m pip install -q -r requirements-dev.txt; fi
	touch $@

demo: setup
	$(BIN)/python -m tracevote demo $(if $(DEMO_DATASET),--dataset $(DEMO_DATASET),)

# Pull what teammates pushed before running anything, so a fresh clone never pays for a pool twice.
repro: setup
	$(BIN)/python -m tracevote unlock
	$(BIN)/dvc repro --pull $(ARGS)

lint: dev
	$(BIN)/ruff check .

test: dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: setup
	$(BIN)/python -m bench.run $(ARGS)

clean-venv:
	rm -rf $(VENV)
