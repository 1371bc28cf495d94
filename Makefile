# The README's two commands are `make demo` and `make test`; everything else builds on `setup`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# DVC runs each stage's `python ...` through the shell: make it this venv's python.
export PATH := $(abspath $(BIN)):$(PATH)
RUNTIME_STAMP := $(VENV)/.runtime-installed
DEV_STAMP := $(VENV)/.dev-installed

.PHONY: setup dev demo try real engine docs repro test test-random bench lint clean-venv

# uv resolves this dependency set in seconds where plain pip takes minutes; pip is the fallback
# whenever uv is missing or fails (an unusual proxy or certificate setup, say). Both write the packages'
# bytecode at install time (uv only when asked): with PYTHONDONTWRITEBYTECODE set, as on many CI images,
# every stage and every dvc command would otherwise compile pandas, pyarrow and dvc from source, ~2 s each.
install = if test -x $(BIN)/uv && $(BIN)/uv pip install --compile-bytecode --python $(BIN)/python -q $(1); \
	then :; else $(BIN)/python -m pip install -q $(1); fi
# The same for our own code, just before it runs many processes (stale bytecode is recompiled, never trusted).
compile_own = $(BIN)/python -m compileall -q src stages bench tests > /dev/null

# The page `dvc plots show` fills (.dvc/config's plots.html_template): its chart libraries inlined from
# vl-convert-python, so it draws offline. Generated (0.9 MB) and git-ignored; rewritten whenever the venv is.
PLOTS_TEMPLATE := .dvc/plots_offline.html

setup: $(RUNTIME_STAMP) $(PLOTS_TEMPLATE)

$(PLOTS_TEMPLATE): $(RUNTIME_STAMP)
	$(BIN)/python -m tracevote plots template --out $@

$(RUNTIME_STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv || true
	$(call install,-r requirements.txt)
	touch $@

dev: $(DEV_STAMP) $(PLOTS_TEMPLATE)

$(DEV_STAMP): $(RUNTIME_STAMP) requirements-dev.txt
	$(call install,-r requirements-dev.txt)
	touch $@

demo: setup
	$(compile_own)
	$(BIN)/python -m tracevote demo $(if $(DEMO_DATASET),--dataset $(DEMO_DATASET),)

# The offline quick start: `make demo` at the same sizes, on the datasets of params.yaml read from the files of DATA
# (aime_2025.jsonl, processbench_gsm8k.json, gsm8k_test.jsonl, ...); METHOD=deepconf|debate|critique|grading runs one.
DATA ?= ../shared/data

try: setup
	$(compile_own)
	$(BIN)/python -m tracevote demo --data $(DATA) $(if $(METHOD),--method $(METHOD),)

# llama.cpp's server (llama-cpp-python[server], requirements-engine.txt) in the venv. With pip, not uv: pip keeps the
# wheel it builds in its cache, so only the first install on a machine compiles llama.cpp (about 6 minutes on 2
# cores, 25 on one busy core); later ones take seconds.
ENGINE_STAMP := $(VENV)/.engine-installed

engine: $(ENGINE_STAMP)

$(ENGINE_STAMP): $(RUNTIME_STAMP) requirements-engine.txt
	@$(BIN)/python -c "import llama_cpp.server" 2>/dev/null || echo "engine: building llama-cpp-python from source (the first time on this machine: minutes)"
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip install -q -r requirements-engine.txt
	touch $@

# Every method on a real model: the shipped models/tinymath.gguf served by llama.cpp on loopback (real/, scratch).
real: setup engine
	$(compile_own)
	$(BIN)/python -m tracevote real $(ARGS)

# Pull what teammates pushed before running anything, so a fresh clone never pays for a pool twice. A stage run alone
# (-s) whose inputs are missing fails in DVC with `[Errno 2] ...`: `tracevote inputs` then says what and how to get it.
repro: setup
	@$(BIN)/python -m tracevote params check --syntax  # a YAML error in one line, before DVC's five
	$(BIN)/python -m tracevote unlock
	$(BIN)/dvc repro --pull $(ARGS)$(if $(filter -s --single-item,$(ARGS)), || { $(BIN)/python -m tracevote inputs --pulled $(filter-out -%,$(ARGS)); exit 1; })

# The docs site (docs/, mkdocs.yml) into site/, git-ignored. --strict: a broken link or anchor, a missing page or a
# page left out of the nav is an error; docs/hooks.py generates the params reference from the config classes.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs: dev
	$(MKDOCS)
	@echo "docs: site/index.html"

lint: dev
	$(BIN)/ruff check .

# Three workers on the 2 cores, one test file each at a time (module fixtures stay in one process; the 30 slowest
# tests listed at the end, to see where the time goes): a test waiting on a paced stream, a server or DVC's queue
# leaves its core to the third (docs/project.md, "How the suite runs", has the figures; `make test PYTEST_WORKERS=0`:
# serial). The DVC projects several files share are built once per run for all workers (tests/dvcproject.py's
# built_once). In the order tests/conftest.py gives (longest files first), not xdist's (most tests first), so no long
# file starts last. Not --dist loadgroup: see tests/conftest.py.
PYTEST_WORKERS ?= 3

test: dev
	$(BIN)/ruff check .
	$(MKDOCS)
	$(compile_own)
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 $(PYTEST_ARGS)

# The suite in random order (pytest-random-order: the files shuffled, and the tests inside each), to show no
# test leans on another having run. The header names the seed; replay a failure with
# `make test-random PYTEST_ARGS=--random-order-seed=N`. Not -q, which would hide the header.
test-random: dev
	$(compile_own)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile -p random_order --random-order $(PYTEST_ARGS)

# Exits 1 when a headline figure misses its goal beyond its noise (bench/goals.py); `make test` never checks
# timings. ARGS=--paper adds paper scale (minutes, ~3.3 GB disk), ARGS=--quick is a smoke run.
bench: setup
	$(BIN)/python -m bench.run $(ARGS)

clean-venv:
	rm -rf $(VENV)
