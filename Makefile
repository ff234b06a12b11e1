# grpo-power: the two set-up commands (see README) and a few helpers.
#   make demo   create the environment and run the study on the embedded default (CPU)
#   make test   create the environment if needed and run the whole test suite
#   make test-fast   the tests not marked slow, for the edit loop
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION ?= 2.13.0
# Where the CPU build of torch comes from on machines without an NVIDIA GPU.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
HAS_NVIDIA_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)

.PHONY: demo test test-fast bench lint clean-env

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
ifeq ($(HAS_NVIDIA_GPU),yes)
	$(BIN)/python -m pip install --quiet "torch==$(TORCH_VERSION)"
else
	@echo "no NVIDIA GPU: installing the CPU build of torch $(TORCH_VERSION) first"
	$(BIN)/python -m pip install --quiet --retries 0 --timeout 15 "torch==$(TORCH_VERSION)" \
		--extra-index-url $(TORCH_CPU_INDEX)
endif
	$(BIN)/python -m pip install --quiet -e ".[train,workflow,dev]"
	touch $@

demo: $(BIN)/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores 2

# As root (CI), a real single-node Slurm is started for the tests and stopped afterwards.
test: $(BIN)/.installed
	$(BIN)/ruff check .
	@if [ "$$(id -u)" = 0 ]; then scripts/slurm/start.sh || echo "no test Slurm: its tests skip"; fi
	status=0; PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest || status=$$?; \
	if [ "$$(id -u)" = 0 ]; then scripts/slurm/stop.sh; fi; exit $$status

# The edit loop: every test not marked slow (no Slurm, no README or whole-study runs).
test-fast: $(BIN)/.installed
	$(BIN)/ruff check .
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -m "not slow"

bench: $(BIN)/.installed
	$(BIN)/python -m benchmarks

lint: $(BIN)/.installed
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean-env:
	rm -rf $(VENV)
