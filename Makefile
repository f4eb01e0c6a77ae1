# Two commands do everything on a fresh machine:
#   make run    - create .venv, install the embedded default (NumPy + PyTorch CPU), run the quick smoke study,
#                 write its HTML report to reports/smoke.html
#   make test   - create .venv, install every framework that installs here + dev tools, run the whole suite
# On a machine with an NVIDIA GPU:
#   make gpu-check - GPU evidence under results/evidence/<gpu>/ (results/evidence/README.md says what and how)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU machines must pin torch: any other request pulls several GB of CUDA packages.
TORCH_SPEC ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo torch || echo torch==2.13.0)
PIP := $(BIN)/python -m pip install --disable-pip-version-check -q

.PHONY: run test venv install-default install-all install-gpu gpu-check gpu-kit gpu-kit-test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

venv: $(BIN)/python

$(VENV)/.default-installed: pyproject.toml | $(BIN)/python
	$(PIP) "$(TORCH_SPEC)"
	$(PIP) -e ".[torch]"
	touch $@

$(VENV)/.all-installed: pyproject.toml $(VENV)/.default-installed
	$(PIP) -e ".[torch,tensorflow,jax,pytensor,postgres,runtimes,serving,fleet,hf,dev]"
	touch $@

# The GPU extras (NVML, CuPy, NVTX) on top of everything; GPU_EXTRA is `gpu` (CUDA 13) or `gpu-cuda12`;
# GPU_EXTRA_PKGS adds more, e.g. "jax[cuda13]".
GPU_EXTRA ?= gpu
GPU_EXTRA_PKGS ?=
$(VENV)/.gpu-installed: pyproject.toml $(VENV)/.all-installed
	$(PIP) -e ".[torch,tensorflow,jax,pytensor,postgres,runtimes,serving,fleet,hf,dev,$(GPU_EXTRA)]" $(GPU_EXTRA_PKGS)
	touch $@

install-default: $(VENV)/.default-installed
install-all: $(VENV)/.all-installed
install-gpu: $(VENV)/.gpu-installed

# The quick smoke study, then its self-contained HTML report (the last line names the page and its size).
run: install-default
	$(BIN)/dlperf run smoke --quick
	$(BIN)/dlperf report latest --format html -o reports/smoke.html

# The concurrency tests run against a real PostgreSQL server the suite starts itself, and the browser tests
# open the HTML report in headless Chromium (Debian's, never Playwright's download; DLPERF_CHROMIUM=/path names
# another): both are installed where missing (scripts/ensure_postgres.sh, scripts/ensure_chromium.sh), and
# DLPERF_REQUIRE_POSTGRES=1 / DLPERF_REQUIRE_CHROMIUM=1 make those tests fail rather than skip where they still cannot run.
# The tests run in TEST_WORKERS processes at once (pytest-xdist; each test looks only at its own processes, files
# and ports, so they pass beside each other), a test file's tests in one process (`--dist loadfile`: its module
# fixtures, a study run or a README command's output, are built once), the slowest files first (tests/conftest.py);
# then the tests marked `alone`, which check a measurement on an idle machine, by themselves.
# PYTHONDONTWRITEBYTECODE is cleared for the tests: they start a few thousand Python processes (CLI runs, case
# workers), each of which would compile dlperf's sources again, and pytest would rewrite every test module's
# asserts again in each of its processes (about 0.05 s a process, and 8 s a pytest process, on the 2-core VM).
# Three test processes on two cores: with two, the cores were busy 82% of the suite (user+sys 1,590 s over 970 s;
# the rest is tests waiting on time-outs, LoadGen's durations, servers and sleeps); with three, 95%, and the suite
# took 13:45 instead of 15:17-16:09 on the same VM (2026-11-28). The tests pass beside other work by design.
TEST_WORKERS ?= 3
PYTEST := PYTHONDONTWRITEBYTECODE= DLPERF_REQUIRE_POSTGRES=1 DLPERF_REQUIRE_CHROMIUM=1 DLPERF_REQUIRE_GPU_KIT=1 $(BIN)/python -m pytest
# The type check (mypy: ~35 s of one core from a fresh clone) runs beside the suite's first part, where the other
# core would otherwise wait for it; its output is printed, and its verdict counts, once that part has ended, and it
# has always ended before the test that needs an idle machine starts.
test: install-all gpu-kit-test
	$(BIN)/ruff check src tests benchmarks scripts
	sh scripts/ensure_postgres.sh
	sh scripts/ensure_chromium.sh
	types=$$(mktemp); echo "type check (scripts/typecheck.py) running beside the tests"; \
	$(BIN)/python scripts/typecheck.py >$$types 2>&1 & checker=$$!; \
	$(PYTEST) -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not alone" --durations=30; tests=$$?; \
	wait $$checker; typed=$$?; echo "type check:"; cat $$types; rm -f $$types; \
	test $$tests -eq 0 && test $$typed -eq 0
	$(PYTEST) -m alone

# make gpu-check [STEPS="install tests studies"] [STUDIES="peaks ops"] [GPU_PYTHON=/path/to/python3]
# Each step has a time-out and a failed step does not stop the next; exit 1 if any failed. Without an
# NVIDIA GPU: one line and exit 2, before anything is installed. GPU_PYTHON: an interpreter that already has
# dlperf's dependencies (nothing is installed). GPU_CHECK_ARGS: more options of scripts/gpu_check.py.
STEPS ?=
STUDIES ?=
GPU_PYTHON ?=
GPU_CHECK_ARGS ?=
gpu-check:
	@$(PYTHON) scripts/gpu_check.py --venv $(VENV) $(addprefix --step ,$(STEPS)) $(addprefix --study ,$(STUDIES)) \
		$(if $(GPU_PYTHON),--python $(GPU_PYTHON)) $(GPU_CHECK_ARGS)

# make gpu-kit [PYTHON_VERSION=3.12] [GPU_FREEZE=freeze.txt] [GPU_KIT_ARGS=...]: the wheels of dlperf's
# dependencies that a GPU node's Python lacks (its `pip freeze` in GPU_FREEZE, else the lent GPU image's list,
# scripts/gpu_image_packages.txt), for manylinux x86_64, into gpu-kit/cpXY/ with MANIFEST.txt; fails over 64 MiB.
# On the node: python3 scripts/gpu_check.py --python python3 --wheels gpu-kit/cp312 --step quick
PYTHON_VERSION ?= 3.12
GPU_FREEZE ?=
GPU_KIT_ARGS ?=
gpu-kit:
	@$(PYTHON) scripts/gpu_kit.py --python-version $(PYTHON_VERSION) $(if $(GPU_FREEZE),--freeze $(GPU_FREEZE)) \
		$(GPU_KIT_ARGS)

# The offline install's test (tests/cli/test_gpu_kit_install.py) needs, made here while the index is reachable:
# image/, the wheels of a stand-in GPU image for this Python (dlperf's dependencies the lent image has, and the
# local torch wheel), and kit/, gpu_kit.py's kit against them. The test then installs both with --no-index.
GPU_KIT_TEST := gpu-kit/test-local
GPU_KIT_TEST_IMAGE := numpy scipy click rich PyYAML psutil threadpoolctl matplotlib scikit-learn Jinja2 torch==2.13.0
$(GPU_KIT_TEST)/.done: pyproject.toml scripts/gpu_kit.py | $(BIN)/python
	rm -rf $(GPU_KIT_TEST)
	$(BIN)/python -m pip download -q --disable-pip-version-check --only-binary=:all: -d $(GPU_KIT_TEST)/image \
		$(GPU_KIT_TEST_IMAGE)
	$(BIN)/python scripts/gpu_kit.py --extras torch --target-wheels $(GPU_KIT_TEST)/image --out $(GPU_KIT_TEST)/kit \
		--python-version $$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])') >/dev/null
	touch $@
gpu-kit-test: $(GPU_KIT_TEST)/.done

bench: install-all
	$(BIN)/python benchmarks/timer_fidelity.py
	$(BIN)/python benchmarks/cli_startup.py
	$(BIN)/python benchmarks/ops_roofline.py
	$(BIN)/python benchmarks/mlp_overhead.py
	$(BIN)/python benchmarks/nn_vs_torch.py
	$(BIN)/python benchmarks/contention.py
	$(BIN)/python benchmarks/transformer_loop.py
	$(BIN)/python benchmarks/per_call_overhead.py
	$(BIN)/python benchmarks/runtime_latency.py
	$(BIN)/python benchmarks/model_overhead.py
	$(BIN)/python benchmarks/compile_overhead.py
	$(BIN)/python benchmarks/xla_warm_compile.py
	$(BIN)/python benchmarks/inductor_warm_compile.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
