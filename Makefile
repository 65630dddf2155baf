# Two entry points for a fresh clone: `make serve` and `make test`.
PYTHON ?= $(shell scripts/find-python)
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 5006

.PHONY: install install-test serve test test-fast bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

install-test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"

serve: install
	$(BIN)/gplvm-explorer --port $(PORT) --show

test: install-test
	$(BIN)/python -m pytest -q -ra

test-fast: install-test
	$(BIN)/python -m pytest -q -ra -m "not e2e and not slow"

bench: install
	$(BIN)/python benchmarks/bench_gplvm.py
	$(BIN)/python benchmarks/bench_bayesian.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
