# privlens: two commands do all set-up on a fresh machine.
#   make run    install (once) and start the dashboard on the embedded default
#   make test   install (once, with test tools and the optional Ray extra) and run the test suite
# torch: requirements.txt pins torch/torchvision. TORCH_BUILD=auto (the default) takes the CPU builds
# from PyTorch's CPU index on a machine without an NVIDIA GPU that reaches that index, and PyPI's CUDA
# build (whose libraries requirements-cuda.txt pins; it runs on the CPU too) otherwise.
#   make run TORCH_BUILD=cpu | cuda     force one;  TORCH_INDEX=URL   a mirror of the CPU index
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
TORCH_BUILD ?= auto
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
# the probe for an NVIDIA GPU: nvidia-smi, or the driver's /proc entry where nvidia-smi is not on PATH
# (overridable so that tests can pretend either way)
GPU_PROBE ?= nvidia-smi -L >/dev/null 2>&1 || test -e /proc/driver/nvidia/version
PIP_INSTALL = $(PY) -m pip install --quiet
PORT ?= 8501
# loopback only by default; HOST=0.0.0.0 (every interface) is an explicit opt-in: the dashboard has no login
HOST ?= 127.0.0.1
FMNIST_DEB_DIR := /usr/share/datasets/fashion-mnist
# `make test` runs the suite on TEST_WORKERS processes (pytest-xdist), each test file on one of them
# (its module fixtures, e.g. a dashboard server, are then started once); TEST_WORKERS=0 runs in one
TEST_WORKERS ?= 2
PYTEST_PARALLEL = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

.PHONY: run test test-slow install install-dev bytecode system-deps fashion-mnist lint bench bench-scale clean torch-build

# `python -m privlens`: `streamlit run app.py` with .streamlit/config.toml, once Streamlit's look-ups of
# this machine's IP addresses (a UDP connect to 8.8.8.8, an HTTP request to AWS) are stopped (netguard.py)
run: install bytecode fashion-mnist
	@case "$(HOST)" in 127.*|localhost|::1) ;; *) \
	  echo "WARNING: privlens will listen on $(HOST):$(PORT), reachable from other machines." >&2; \
	  echo "WARNING: it has NO login: anyone who can reach that address can use it and its CPU." >&2; \
	  echo "WARNING: expose it only behind an authenticating proxy (see README, Two commands)." >&2;; esac
	$(PY) -m privlens --server.address=$(HOST) --server.port=$(PORT) --server.headless=true \
	  --browser.gatherUsageStats=false

# the tests also cover the optional Ray executor (tests/test_ray.py), so they install its extra
# the shipped Fashion-MNIST models are checked against their data: a missing dataset fails, never skips
test: install-dev bytecode system-deps fashion-mnist
	$(PY) -m ruff check .
	PRIVLENS_REQUIRE_DATASETS=1 $(PY) -m pytest -q $(PYTEST_PARALLEL)

test-slow: install-dev system-deps fashion-mnist
	PRIVLENS_REQUIRE_DATASETS=1 $(PY) -m pytest -q $(PYTEST_PARALLEL) -m "slow or not slow"

install: $(STAMP)

$(STAMP): requirements.txt requirements-cuda.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@set -e; build=$$($(MAKE) -s --no-print-directory -f $(firstword $(MAKEFILE_LIST)) torch-build) || exit 2; \
	echo "torch: $$build build"; \
	if [ "$$build" = cpu ]; then $(PIP_INSTALL) --extra-index-url $(TORCH_INDEX) -r requirements.txt; \
	else $(PIP_INSTALL) -r requirements.txt -r requirements-cuda.txt; fi; \
	echo $$build > $(VENV)/.torch-build
	@# the project itself, editable: .venv/bin/privcore and .venv/bin/privlens run this checkout's code
	@$(PIP_INSTALL) --no-deps --no-build-isolation -e . > $(VENV)/.install-project.log 2>&1 \
	  || { cat $(VENV)/.install-project.log; exit 1; }
	@touch $@

# The project's bytecode, written once here: Python reads it but writes none where PYTHONDONTWRITEBYTECODE
# is set, and would then compile every module of privcore at each start (~0.2 s of each CLI call). Only
# changed files are compiled again; a stale .pyc is never used (its source's mtime is checked).
bytecode: install
	@$(PY) -m compileall -q -j 0 app.py pages privlens privcore >/dev/null

# Which torch build `make install` takes: prints cpu or cuda (notes on stderr). auto: cpu where no NVIDIA
# GPU answers and PyTorch's CPU index (TORCH_INDEX) is reachable; cuda otherwise (PyPI's build, which
# also runs on the CPU, at about 5 GB more disk).
torch-build:
	@case "$(TORCH_BUILD)" in \
	  cpu|cuda) echo $(TORCH_BUILD);; \
	  auto) if { $(GPU_PROBE); } >/dev/null 2>&1; then echo cuda; \
	    elif $(PYTHON) -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=5)" \
	      "$(TORCH_INDEX)" >/dev/null 2>&1; then echo cpu; \
	    else echo "note: no NVIDIA GPU, but $(TORCH_INDEX) is not reachable: taking PyPI's CUDA build of" \
	      "torch (it runs on the CPU; TORCH_INDEX=<mirror> takes the CPU build)" >&2; echo cuda; fi;; \
	  *) echo "error: TORCH_BUILD=$(TORCH_BUILD) (allowed: auto, cpu, cuda)" >&2; exit 2;; \
	esac

# test and dev tools plus the optional Ray extra (--executor ray); reinstalled when a file changes
install-dev: $(DEV_STAMP)

# (requirements-dev.txt includes requirements.txt: the CPU build keeps its index, or PyPI would swap it)
$(DEV_STAMP): $(STAMP) requirements.txt requirements-dev.txt requirements-ray.txt
	$(PIP_INSTALL) $(if $(filter cpu,$(shell cat $(VENV)/.torch-build 2>/dev/null)),--extra-index-url $(TORCH_INDEX)) \
	  -r requirements-dev.txt -r requirements-ray.txt
	@touch $@

# Debian's Chromium drives the real-browser tests (no browser download needed).
system-deps:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install Debian's chromium; browser tests will fail"; \
	  else echo "warning: not root, cannot apt-get install chromium; browser tests will fail"; fi; \
	fi

# Real Fashion-MNIST from Debian where the machine allows it; the embedded digits otherwise
# (`make test` then fails its shipped-model checks: PRIVLENS_REQUIRE_DATASETS).
fashion-mnist:
	@if [ ! -d $(FMNIST_DEB_DIR) ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist >/dev/null) \
	      || echo "note: Fashion-MNIST not installed; the dashboard uses the embedded digits"; \
	  else echo "note: not root; the dashboard uses the embedded digits (see README for Fashion-MNIST)"; fi; \
	fi

lint: install-dev
	$(PY) -m ruff check .

bench: install
	$(PY) bench/lipschitz.py --quick

bench-scale: install-dev
	$(PY) bench/scale.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
	find app.py pages privlens privcore -name __pycache__ -prune -exec rm -rf {} +
