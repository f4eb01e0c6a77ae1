# Two commands do everything on a fresh machine:
#   make run    - create .venv, install the embedded default (NumPy + PyTorch CPU), run the quick smoke study
#   make test   - create .venv, install every framework that installs here + dev tools, run the whole suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU machines must pin torch: any other request pulls several GB of CUDA packages.
TORCH_SPEC ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo torch || echo torch==2.13.0)
PIP := $(BIN)/python -m pip install --disable-pip-version-check -q

.PHONY: run test venv install-default install-all bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

venv: $(BIN)/python

$(VENV)/.default-installed: pyproject.toml | $(BIN)/python
	$(PIP) "$(TORCH_SPEC)"
	$(PIP) -e ".[torch]"
	touch $@

$(VENV)/.all-installed: pyproject.toml $(VENV)/.default-installed
	$(PIP) -e ".[torch,tensorflow,jax,pytensor,postgres,dev]"
	touch $@

install-default: $(VENV)/.default-installed
install-all: $(VENV)/.all-installed

run: install-default
	$(BIN)/dlperf run smoke --quick

test: install-all
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest

bench: install-all
	$(BIN)/python benchmarks/timer_fidelity.py
	$(BIN)/python benchmarks/cli_startup.py
	$(BIN)/python benchmarks/ops_roofline.py
	$(BIN)/python benchmarks/mlp_overhead.py
	$(BIN)/python benchmarks/nn_vs_torch.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
