# The two entry points are `make demo` and `make test`; both build the virtualenv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck pytest bench proto clean

$(STAMP): pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e clients/python -e '.[test]'
	touch $@

demo: $(STAMP)
	$(BIN)/scout-arena demo

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest

bench: $(STAMP)
	mkdir -p bench/results
	$(BIN)/python bench/engine.py --json bench/results/engine.json
	$(BIN)/python bench/bots.py --json bench/results/bots.json
	$(BIN)/python bench/referee.py --json bench/results/referee.json
	$(BIN)/python bench/tournament.py --json bench/results/tournament.json

# Regenerate the committed Python stubs from proto/ (tests fail when they drift).
proto: $(STAMP)
	$(BIN)/python proto/generate.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache bench/results
