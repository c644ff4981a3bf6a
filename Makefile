# Two commands for a newcomer: `make demo` (the bot on its local simulators) and `make test`.
# Python 3.11, 3.12 or 3.13: PYTHON defaults to the first of python3, python3.13, python3.12, python3.11 that
# is one of them; `make PYTHON=python3.12 ...` picks one (run `make clean` first to switch an existing .venv).
SUPPORTED := import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))
PYTHON ?= $(firstword $(foreach p,python3 python3.13 python3.12 python3.11,\
	$(shell command -v $(p) >/dev/null 2>&1 && $(p) -c '$(SUPPORTED)' 2>/dev/null && echo $(p))))
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Every package of the tree, pinned with hashes for Python 3.11-3.13 (`make lock` writes them with uv).
LOCK := requirements-dev.lock
UV_COMPILE := $(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command 'make lock'

.PHONY: install demo test check lint lock manifest docs revision bench clean

$(STAMP): pyproject.toml $(LOCK)
	@test -n "$(PYTHON)" && $(PYTHON) -c '$(SUPPORTED)' 2>/dev/null || \
		{ echo "Python 3.11, 3.12 or 3.13 is required; none found as python3 or python3.1[1-3]" \
			"(or PYTHON=$(PYTHON) is another version); run e.g. 'make PYTHON=/path/to/python3.12 demo'"; exit 1; }
	@echo "installing the locked dependencies into $(VENV) (first time: about 4-5 minutes, quietly)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(LOCK)
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m sim demo

# `make test ARGS="tests/unit -q"` runs part of the suite (ARGS are pytest's arguments; `ARGS="-n 0"`: one
# process). Everything: the simulators, demo worlds, sshd, PostgreSQL and llama.cpp tests, in two worker
# processes, each test module's tests in one of them (--dist loadfile: a module shares its demo world); about
# 17 minutes on two cores (2,853 tests, with CI's lint, image build and second Python beside it).
test: $(STAMP)
	$(BIN)/pytest -n 2 --dist loadfile $(ARGS)

# The fast tier: pure logic, property tests and the contract, in two worker processes, without the tests
# marked slow (those that start a demo world, a simulator, a server or a subprocess: tests/conftest.py);
# about 25 s on two cores (2,575 tests; longer while other work runs beside it).
CHECK_TIER := tests/unit tests/property tests/test_contract.py
check: $(STAMP)
	$(BIN)/pytest -q -n 2 -m "not slow" $(CHECK_TIER) $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/hadolint Dockerfile

# After changing a pin in pyproject.toml: rewrite both lock files (the image installs requirements.lock).
lock: $(STAMP)
	$(UV_COMPILE) -o requirements.lock
	$(UV_COMPILE) --extra dev -o $(LOCK)

manifest: $(STAMP)
	$(BIN)/python -m bot.slack.manifest > app_manifest.yaml

# The reference docs generated from the code (docs/commands.md, settings.md, faults.md); a test fails if they drift.
docs: $(STAMP)
	$(BIN)/python -m bot.docs

# A new schema revision of the state store after changing a table in the code: `make revision MSG="add x"`
# writes ops/store/migrations/versions/rNNNN_add_x.py by comparing the code's tables with a scratch database
# brought to the newest revision (alembic.ini); read it and fix it before committing.
NEXT_REVISION = $(shell printf %04d $$(( $$(ls ops/store/migrations/versions/r[0-9]*.py | wc -l) + 1 )))
revision: $(STAMP)
	@test -n "$(MSG)" || { echo 'usage: make revision MSG="what the revision changes"'; exit 1; }
	rm -f revision-scratch.db
	$(BIN)/alembic upgrade head
	$(BIN)/alembic revision --autogenerate --rev-id $(NEXT_REVISION) -m "$(MSG)"
	rm -f revision-scratch.db
	$(BIN)/ruff format ops/store/migrations/versions

bench: $(STAMP)
	$(BIN)/python bench/status.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
