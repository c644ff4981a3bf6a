# Two commands for a newcomer: `make demo` (the bot on its local simulators) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint manifest bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || \
		{ echo "Python 3.11 is required; run e.g. 'make clean; make PYTHON=python3.11 demo'"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m sim demo

test: $(STAMP)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/hadolint Dockerfile

manifest: $(STAMP)
	$(BIN)/python -m bot manifest > app_manifest.yaml

bench: $(STAMP)
	$(BIN)/python bench/status.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
