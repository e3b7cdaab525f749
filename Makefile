# The two entry points are `make demo` and `make test`; both build the virtualenv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck pytest postgres browser bubblewrap screenshots bench proto clean

$(STAMP): pyproject.toml proto/python/pyproject.toml referee/rules/pyproject.toml clients/python/pyproject.toml \
		referee/rules/setup.py referee/rules/src/scout_rules/_speedups.c \
		referee/rules/src/scout_rules/_playout.c referee/rules/src/scout_rules/_groups.h \
		referee/rules/src/scout_rules/_objects.h
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e proto/python -e referee/rules -e clients/python -e '.[bots,test,sprt,ray,rl,openspiel,train,profile]'
	touch $@

# The demo tournament adds every starter kit that is built; these two build in seconds.
DEMO_KITS := typescript go

demo: $(STAMP)
	@for kit in $(DEMO_KITS); do \
		$(MAKE) --no-print-directory -C clients/$$kit build >/dev/null 2>&1 \
			&& echo "built the $$kit starter kit" \
			|| echo "could not build the $$kit starter kit; the demo goes on without it"; \
	done
	$(BIN)/scout-arena demo

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The ladder's storage tests run against SQLite and a throwaway PostgreSQL on 127.0.0.1:55432
# (.ci/postgres.sh installs, creates and starts it as needed, and prints its URL).
postgres:
	bash .ci/postgres.sh

# The web pages' browser tests drive Debian's chromium with its chromedriver (never a download).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null \
		|| { [ "$$(id -u)" = 0 ] && { apt-get install -y chromium chromium-driver \
			|| { apt-get update && apt-get install -y chromium chromium-driver; }; }; } \
		|| echo "chromium/chromedriver missing and not root: the browser tests will fail"

# Hosted bots run inside Debian's bubblewrap (tests/test_sandbox_*.py start real sandboxes).
bubblewrap:
	@command -v bwrap >/dev/null \
		|| { [ "$$(id -u)" = 0 ] && { apt-get install -y bubblewrap \
			|| { apt-get update && apt-get install -y bubblewrap; }; }; } \
		|| echo "bwrap missing and not root: the sandbox tests will fail"

pytest: $(STAMP) postgres browser bubblewrap
	SCOUT_TEST_POSTGRES_URL=$$(bash .ci/postgres.sh --url) $(BIN)/pytest

# Refresh the pictures in docs/screenshots/ (the web pages' browser tests take them).
screenshots: $(STAMP) postgres browser
	SCOUT_SCREENSHOTS=docs/screenshots $(BIN)/pytest tests/test_web.py tests/test_web_owner.py -k browser

bench: $(STAMP) bubblewrap
	mkdir -p bench/results
	$(BIN)/python bench/engine.py --json bench/results/engine.json
	$(BIN)/python bench/cli_start.py --json bench/results/cli_start.json
	$(BIN)/python bench/env.py --json bench/results/env.json
	$(BIN)/python bench/bots.py --json bench/results/bots.json
	$(BIN)/python bench/sdk.py --json bench/results/sdk.json
	$(BIN)/python bench/search.py --json bench/results/search.json
	$(BIN)/python bench/strength.py --json bench/results/strength.json
	$(BIN)/python bench/referee.py --json bench/results/referee.json
	$(BIN)/python bench/referee_cpu.py --json bench/results/referee_cpu.json
	$(BIN)/python bench/hosted.py --json bench/results/hosted.json
	$(BIN)/python bench/tournament.py --json bench/results/tournament.json
	$(BIN)/python bench/distributed.py --json bench/results/distributed.json
	$(BIN)/python bench/sprt.py --json bench/results/sprt.json
	$(BIN)/python bench/ladder.py --json bench/results/ladder.json
	$(BIN)/python bench/soak.py --json bench/results/soak.json
	$(BIN)/python bench/ladder_kill.py --json bench/results/ladder_kill.json
	$(BIN)/python bench/nodes.py --seconds 45 --json bench/results/nodes.json
	$(BIN)/python bench/sandbox.py --json bench/results/sandbox.json

# Regenerate the committed Python stubs from proto/ (tests fail when they drift).
proto: $(STAMP)
	$(BIN)/python proto/generate.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache bench/results
