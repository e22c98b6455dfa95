# One entry for every developer task. Each target creates .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup test-packages demo lint typecheck test unit clean

$(BIN)/graphrunner: pyproject.toml workers/example_tools/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m pip install --quiet --no-deps -e workers/example_tools
	touch $@

setup: $(BIN)/graphrunner          ## create .venv and install graphrunner with the dev extra

test-packages:                     ## Debian's chromium (browser tests) and graphviz (DOT tests); only `test` needs them
	@missing=""; [ -x /usr/bin/chromium ] || missing=" chromium"; command -v dot >/dev/null || missing="$$missing graphviz"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get install -y --no-install-recommends $$missing || \
	      { apt-get update && apt-get install -y --no-install-recommends $$missing; }; \
	  else \
	    echo "error: the tests need Debian's$$missing:" \
	         "run 'sudo apt-get install -y --no-install-recommends$$missing'" >&2; exit 1; \
	  fi; \
	fi

demo: setup                        ## run the hello graph end to end
	$(BIN)/graphrunner run graphs/hello.yaml -i name=Ada

lint: setup                        ## ruff lint and format check
	$(BIN)/ruff check graphrunner tests workers
	$(BIN)/ruff format --check graphrunner tests workers

typecheck: setup                   ## mypy, strict, on the package and the example tools plugin
	$(BIN)/mypy
	$(BIN)/mypy --strict workers/example_tools/graphrunner_example_tools workers/worker_config.py workers/example_producer.py

unit: setup                        ## the unit tests only (no Redis, no Celery)
	$(BIN)/pytest tests/unit

test: lint typecheck test-packages ## everything CI runs: lint, types, the whole test suite
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
