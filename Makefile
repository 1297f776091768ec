# Two commands set up everything on a fresh machine:
#   make up    - run the main job on this machine with embedded defaults
#   make test  - create .venv, install kubenode with its dev tools, run lint, types and the whole suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: up test lint typecheck pytest protos bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

up: $(STAMP)
	$(VENV)/bin/kubenode up

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(STAMP)
	$(PY) -m mypy

pytest: $(STAMP)
	$(PY) -m pytest

protos: $(STAMP)
	$(PY) tools/genproto.py

bench: $(STAMP)
	$(PY) benchmarks/deviceplugin_bench.py
	$(PY) benchmarks/agent_bench.py
	$(PY) benchmarks/scheduler_bench.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
