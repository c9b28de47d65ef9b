# Two commands from a fresh clone:  `make demo` (offline toy run)  and  `make test`.
# Each creates .venv and installs everything (pinned in constraints.txt) on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SHARED ?= ../shared
# Snakemake reads profiles/default (rerun triggers, keep-going, rerun-incomplete, the GPU slot) by itself
# when no --workflow-profile is named: make's runs and a plain `snakemake --cores N` are the same command.
SNAKEMAKE := $(BIN)/snakemake
# The preset that freeze, restore and publish act on: config.yaml (the full run), config/demo.yaml, config/cpu.yaml.
CONFIG ?= config.yaml
# The precision choice `make plan` details (config: each cell's own; fp32, tf32, bf16, fp16).
PRECISION ?= config
# `make install CUDA=12.6`: torch's build for CUDA 12.6 (NVIDIA drivers >= 525; P100/V100 GPUs) instead of
# the registry's (CUDA 13.0: drivers >= 580, Turing and newer); CUDA=cpu for a CPU-only build. The choice
# is remembered in the environment.
CUDA ?=
# `make plan GPUS=N`: also simulate the run on N GPUs (the plan always shows 1, 8 and 64).
# `make plan GPU_MODEL=H100`: price for that card (default: config's resources.gpu_model, else the H200).
GPUS ?=
GPU_MODEL ?=
# The local port `make monitor` serves TensorBoard on.
PORT ?= 6006
# The values given to targets reach the recipes through the environment and are written "$$NAME" there: the
# shell expands a variable once and never reads its value as shell text, so a value holding ', spaces or ;
# stays one argument and runs nothing (no quoting of $(NAME) in the recipe could promise that).
export CONFIG PRECISION CUDA GPUS GPU_MODEL PORT SHARED CELL REPO CODE REVISION TARGET
# A target that hands CONFIG to Snakemake checks it first: Snakemake 9 answers a --configfile that does not
# exist with a Python traceback (it opens the file outside its own error handling), not with one line.
CONFIG_EXISTS = @test -f "$$CONFIG" || { echo "contrastlab: config file $$CONFIG $$(test -d "$$CONFIG" && echo is a folder || echo does not exist); pass CONFIG=<an existing YAML file> (config.yaml, config/demo.yaml, config/cpu.yaml)" >&2; exit 2; }

.PHONY: help install test test-fast faults demo cpu lock plan gpu-check gpu-bench dry-run search monitor lint clean-demo freeze restore add-seeds compare publish cards mteb-submit lock-deps screenshots

# scripts/install.py: requirements.lock (-e '.[workflow,offline-models,dev]' under constraints.txt, every
# package checked against its sha256), with uv (about 30 s; it falls back to pip, about 3 minutes, where
# uv cannot be had); cffconvert apart, in .venv/cffconvert, from requirements-cffconvert.lock.
# Into an environment other than this checkout's .venv (VENV=<another>) only when asked by name, `make
# install VENV=<another>`: any other target stops in one line. A make run inside another inherits its
# VENV (MAKEFLAGS), and a test's make under `make test VENV=<venv>` once rewrote the user's <venv>.
OWN_VENV := $(filter $(abspath .venv) $(realpath .venv),$(abspath $(VENV)) $(realpath $(VENV)))
ifneq ($(OWN_VENV)$(filter install,$(MAKECMDGOALS)),)
$(BIN)/.installed: pyproject.toml constraints.txt requirements.lock requirements-cffconvert.lock scripts/install.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python scripts/install.py
	touch $@
else
$(BIN)/.installed: pyproject.toml constraints.txt requirements.lock requirements-cffconvert.lock scripts/install.py
	@echo "contrastlab: VENV=$(VENV) is not this checkout's .venv and its install is missing or out of date; run make install VENV=$(VENV) to install into it (make installs elsewhere only when asked)" >&2; exit 2
endif

ifeq ($(CUDA),)
install: $(BIN)/.installed ## create .venv and install requirements.lock, every package hash-checked (once; again when it changes); CUDA=12.6 (or cpu): (re)install with that torch build, not hash-checked
else
install:                 # with CUDA=12.6 (or cpu): (re)install with that torch build (help: the line above)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python scripts/install.py --cuda "$$CUDA"
	touch $(BIN)/.installed
endif

lock-deps: install       ## after a pin changed in constraints*.txt or pyproject.toml: requirements*.lock anew (every sha256; needs the registry)
	$(BIN)/python scripts/install.py --lock

test: install            ## the whole suite on both cores (pyproject's addopts: -n 2), Snakemake runs included
	$(BIN)/python -m pytest -q

test-fast: install       ## the inner loop: no Snakemake (tests/e2e), no slow runs (real SentEval, TensorBoard), both cores
	$(BIN)/python -m pytest -q --ignore=tests/e2e -m "not slow"

faults: install          ## the fault-injection suite; ends with a table and "N faults injected, N handled"
	$(BIN)/python -m pytest -q -m fault

demo: install            ## offline toy reproduction on CPU: results/demo/tables/*.{csv,md,tex}, results/demo/report.html
	$(SNAKEMAKE) --configfile config/demo.yaml --cores 2

cpu: install             ## MiniLM + InfoNCE on the Wikipedia sample, real SentEval: results/cpu (SHARED=<folder with data/senteval, data/wiki1m-head>)
	$(SNAKEMAKE) --configfile config/cpu.yaml --cores 2 \
	  --config "data={senteval_dir: $$SHARED/data/senteval, wiki_path: $$SHARED/data/wiki1m-head/wiki1m_head.txt}"

lock: install            ## CONFIG's data and backbone steps only (downloads, checks, no training): writes artifacts.lock.json
	$(CONFIG_EXISTS)
	$(SNAKEMAKE) --configfile "$$CONFIG" --cores 2 --until senteval_data corpus image_data fetch_backbone
	@$(BIN)/python -m contrastlab.artifacts "$$($(BIN)/python -c 'import sys; from contrastlab.config import load; print(load(sys.argv[1])["artifacts_lock"])' "$$CONFIG")"

gpu-check: install      ## the GPU path in ~7 minutes on one GPU: results/gpu-check/report.md, calibration.json
	$(BIN)/python scripts/gpu_check.py

gpu-bench: install      ## a new GPU in ~9 minutes, no Snakemake: results/gpu-bench/gpu_bench.{md,json}
	$(BIN)/python benchmarks/gpu_bench.py $(if $(wildcard $(SHARED)/data/senteval),--senteval "$$SHARED/data/senteval",)

plan: install            ## projected GPU-hours, GPU memory and makespan on 1/8/64 (GPUS=N) GPUs of CONFIG's cells
	$(BIN)/python scripts/plan.py --configfile "$$CONFIG" --precision "$$PRECISION" $(if $(GPUS),--gpus "$$GPUS",) $(if $(GPU_MODEL),--gpu-model "$$GPU_MODEL",)

dry-run: install         ## the plan, then every job of CONFIG (default config.yaml), counted per rule
	$(CONFIG_EXISTS)
	$(BIN)/python scripts/plan.py --configfile "$$CONFIG" --precision "$$PRECISION"
	$(BIN)/snakemake -n --cores all --quiet rules --configfile "$$CONFIG"
	@echo "The hyperparameter searches (make search), counted per rule:"
	$(BIN)/snakemake searches -n --cores all --quiet rules --configfile "$$CONFIG"

search: install          ## CONFIG's hyperparameter searches with everything else; tables and report show them
	$(CONFIG_EXISTS)
	$(SNAKEMAKE) --configfile "$$CONFIG" --config 'searches={in_all: true}'

monitor: install         ## live training curves and HParams: TensorBoard over CONFIG's <results_dir>/tensorboard, localhost:PORT
	$(CONFIG_EXISTS)
	@results="$$($(BIN)/python -c 'import sys; from contrastlab.config import ConfigError, load; sys.excepthook = lambda kind, error, tb: print(f"contrastlab: monitor: {error}", file=sys.stderr) if issubclass(kind, ConfigError) else sys.__excepthook__(kind, error, tb); print(load(sys.argv[1])["results_dir"])' "$$CONFIG")" || exit 1; \
	mkdir -p "$$results/tensorboard"; \
	echo "TensorBoard over $$results/tensorboard: http://localhost:$$PORT/ (Ctrl-C stops it)"; \
	exec $(BIN)/tensorboard --logdir "$$results/tensorboard" --host localhost --port "$$PORT"

lint: install            ## Snakemake's lint of the workflow, ruff, and the import contracts (lint-imports)
	$(BIN)/snakemake --lint
	$(BIN)/ruff check src tests scripts benchmarks
	$(BIN)/lint-imports

clean-demo:              ## delete the demo's results (results/demo, results/plots/demo)
	rm -rf results/demo results/plots/demo

publish: install         ## CELL=<experiment>/<backbone>/<method>/seed<seed> REPO=<user>/<name>: list the one commit's files (PUSH=1: make it)
	$(BIN)/python scripts/publish.py --configfile "$$CONFIG" --cell "$$CELL" --repo "$$REPO" $(if $(CODE),--code "$$CODE",) $(if $(PUSH),--push,)

cards: install           ## every finished cell's model card (Hugging Face README.md) under <results_dir>/cards/, from its files
	$(BIN)/python scripts/publish.py --configfile "$$CONFIG" --cards

mteb-submit: install     ## CELL=<experiment>/<backbone>/<method>/seed<seed> [REPO=<user>/<name> REVISION=<commit>]: stage MTEB's results for embeddings-benchmark/results and print the PR's steps (PR=1: mteb's submit_results opens the PR)
	$(BIN)/python scripts/mteb_submit.py --configfile "$$CONFIG" --cell "$$CELL" $(if $(REPO),--repo "$$REPO",) $(if $(REVISION),--revision "$$REVISION",) $(if $(CODE),--code "$$CODE",) $(if $(PR),--pull-request,)

compare: install         ## two runs side by side, A=<results> B=<results>: per cell the means, B - A and whether seed noise explains it; per claim both verdicts (<B>/compare.md)
	$(BIN)/python scripts/compare.py "$$A" "$$B" $(if $(OUT),--out "$$OUT",)

add-seeds: install       ## print the commands adding seeds to the cells of undecided claims only (TARGET=power: the seeds make plan's claims section needs; RUN=1: run them)
	$(BIN)/python scripts/add_seeds.py --configfile "$$CONFIG" $(if $(TARGET),--target "$$TARGET",) $(if $(RUN),--run,)

# Snakemake runs the workflow; DVC runs it per preset (dvc.yaml) and versions it (contrastlab.versioning).
freeze: install          ## dvc repro of CONFIG's stage (nothing left to run) + dvc add resources + dvc push (a default remote)
	$(BIN)/python scripts/freeze.py --configfile "$$CONFIG"

restore: install         ## after `dvc pull`: Snakemake takes the pulled outputs as done; tables and PNGs re-rendered
	$(BIN)/python scripts/restore.py --configfile "$$CONFIG"

screenshots: install     ## docs/screenshots/*.png anew from results/demo/report.html (make demo first; needs Chromium)
	$(BIN)/python -c 'from tests.report.chromium import docs_screenshots; docs_screenshots()'

help:                    ## this list: every target and what it does (the values it takes: the top of the Makefile)
	@echo "make <target> [NAME=value ...]:"
	@awk 'match($$0, /^[a-z][a-z-]*:.*## /) { printf "  %-12s %s\n", substr($$0, 1, index($$0, ":") - 1), \
	  substr($$0, RLENGTH + 1) }' $(firstword $(MAKEFILE_LIST))
