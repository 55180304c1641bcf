# sentcl: two commands on a fresh clone — `make demo` and `make test`.
# torch is pinned to 2.13.0 before anything else resolves it: a CPU build from local disk on
# machines like the development one, the normal build elsewhere; never an unpinned multi-GB wheel.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH := torch==2.13.0
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
PYTEST := $(BIN)/python -m pytest -q -o tmp_path_retention_policy=failed tests
TEST_DISK_GB ?= 4

.PHONY: demo lab test nbtest pytest export clean-nbs venv install dev readme bench bench-eval bench-train bench-step gpu-stage docs browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel

$(VENV)/.installed: $(BIN)/python setup.py settings.ini
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e . $(TORCH)
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/pip install -q -e ".[dev]" $(TORCH)
	touch $@

venv: $(BIN)/python
install: $(VENV)/.installed
dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(BIN)/sentcl demo

# JupyterLab from the project's environment, on nbs/: its python3 kernel is .venv's, which imports this checkout's
# sentcl; experiment notebooks run top to bottom with their default parameters (cpu-smoke, bundled samples).
lab: $(VENV)/.installed-dev
	$(BIN)/jupyter lab --notebook-dir=nbs $(LAB_ARGS)

# The suite's temporary files go to a folder of its own, removed at the end whatever happened, so
# that nothing a test leaves behind piles up run after run; tests that pass drop theirs at once.
test: $(VENV)/.installed-dev
	$(BIN)/nbdev_export
	@git diff --quiet -- sentcl || { echo "sentcl/ differs from what nbs/ export: run nbdev_export and commit"; git --no-pager diff --stat -- sentcl; exit 1; }
	@$(BIN)/python tools/check_disk.py $(TEST_DISK_GB)
	@tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/sentcl-test.XXXXXX") && export TMPDIR=$$tmp && \
	  { $(BIN)/nbdev_test --n_workers 2 --timing && $(MAKE) docs && $(PYTEST); }; rc=$$?; rm -rf "$$tmp"; exit $$rc

nbtest: $(VENV)/.installed-dev
	$(BIN)/nbdev_test --n_workers 2 --timing

pytest: $(VENV)/.installed-dev
	$(PYTEST)

export: $(VENV)/.installed-dev
	$(BIN)/nbdev_export

clean-nbs: $(VENV)/.installed-dev
	$(BIN)/nbdev_clean


readme: $(VENV)/.installed-dev
	$(BIN)/python tools/make_readme.py

# one run, ratios against sentence-transformers in the same process; writes benchmarks/RESULTS.md
# (BENCH_ARGS="--skip all" leaves out the hour-long whole evaluation)
bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

bench-eval: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_eval.py

# SentenceTransformerTrainer needs accelerate, which the dev extras install
bench-train: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_train.py

# the training step on a CPU, per method: batches inline against in DataLoader workers, syncs per step, the share of
# the step outside the model; ratios against a peer in the same process (a few minutes on two idle cores). On a CUDA
# machine: each method's ms per step, share of the GPU's peak and the time the step waited for its batch
bench-step: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_step.py $(BENCH_STEP_ARGS)

# what a bare GPU machine lacks for tools/gpu_check.py (data, tokenizer, pure-Python packages, SNCSE's negations), in
# runs/gpu-stage; prints the device tool's command and the folder to carry. GPU_DATA: a data folder in sentcl's layout.
GPU_DATA ?= $(or $(SENTCL_DATA),sentcl/samples)
gpu-stage: $(VENV)/.installed
	$(BIN)/python tools/gpu_check.py --stage runs/gpu-stage --data-dir $(GPU_DATA)

# The docs site, offline: nbdev-processed notebooks -> Markdown -> mkdocs-material -> _site/
# (tools/docs_build.py; KaTeX comes from the npm registry once). tests/test_docs.py then opens every
# page in headless Chromium, which `browser` installs from Debian when it is missing.
docs: $(VENV)/.installed-dev browser
	NO_MKDOCS_2_WARNING=1 $(BIN)/python tools/docs_build.py

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  echo "installing Debian's chromium and chromium-driver (for tests/test_docs.py)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	    --no-install-recommends chromium chromium-driver fonts-liberation >/dev/null; fi
