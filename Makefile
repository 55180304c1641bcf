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
PYTEST_RUN := $(BIN)/python -m pytest -q -o tmp_path_retention_policy=failed --durations=20
PYTEST := $(PYTEST_RUN) tests
TEST_DISK_GB ?= 4

.PHONY: demo lab test test-isa test-lowest nbtest pytest export clean-nbs venv install dev readme bench bench-eval bench-train bench-step gpu-stage docs browser

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

# The suite as another CPU would run it: PyTorch (ATen), MKL and oneDNN told to use an older instruction set than
# this host's own kernels (a host with AVX-512: AVX2; an AVX2 host: ATen's unvectorised kernels, SSE4.1 in oneDNN,
# SSE4.2 in MKL), so that a test holding only on the kernels of the machine it was written on fails here. nbdev_test
# and the pytest files that compare scores or vectors across code paths run under it. ISA="..." chooses another.
ISA_AVX2 := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
ISA_SSE := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41
ISA ?= $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo '$(ISA_AVX2)' || echo '$(ISA_SSE)')
ISA_PYTEST := tests/test_st_evaluators.py tests/test_st.py
test-isa: $(VENV)/.installed-dev
	@echo "test-isa: $(ISA)"
	@tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/sentcl-test.XXXXXX") && export TMPDIR=$$tmp && \
	  { env $(ISA) $(BIN)/nbdev_test --n_workers 2 --timing && env $(ISA) $(PYTEST_RUN) $(ISA_PYTEST); }; rc=$$?; \
	  rm -rf "$$tmp"; exit $$rc

# The lowest versions settings.ini allows, in a second environment (.venv-lowest): transformers and
# sentence-transformers at their floors, torch as pinned above. A smoke subset: every method trains two steps on
# every encoder family and reloads in sentence-transformers; sentcl.st's evaluators against `sentcl eval` on `tiny`.
LOWEST := transformers==4.41.0 sentence-transformers==5.0.0
LOW := .venv-lowest
test-lowest: $(LOW)/.installed
	$(LOW)/bin/python -m pytest -q -o tmp_path_retention_policy=failed -p no:cacheprovider \
	  tests/test_encoder_families.py tests/test_st_evaluators.py -k "not default"

$(LOW)/.installed: setup.py settings.ini Makefile
	$(PYTHON) -m venv $(LOW)
	$(LOW)/bin/pip install -q --upgrade pip setuptools wheel
	$(LOW)/bin/pip install -q $(TORCH)
	$(LOW)/bin/pip install -q -e . $(TORCH) $(LOWEST) "pytest>=7"
	touch $@

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
