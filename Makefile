# qsrank: `make help` lists the targets.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help install test bench bench-large clean

help:  ## list the targets
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install qsrank with its test tools

test: $(STAMP)  ## run the test suite
	$(PY) -m pytest -q

bench: $(STAMP)  ## time the LAI methods as negatives vary (paper 000, Figures 2-3 settings)
	$(VENV)/bin/qsrank bench --vary negatives

bench-large: $(STAMP)  ## the scaling curves up to 10^7 negatives
	$(VENV)/bin/qsrank bench --vary negatives --preset large

clean:  ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
