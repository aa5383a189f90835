# queuepilot: `make demo` runs the whole loop locally; `make test` runs every test.
# Both set themselves up on a fresh machine: a virtualenv with the Python dependencies, and
# (through apt, when it is there) the servers the tests and the demo run for real.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SERVERS := redis-server prometheus-alertmanager prometheus

.PHONY: test demo lint format bench serve system-deps clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

system-deps:
	@missing=""; for s in $(SERVERS); do command -v $$s >/dev/null 2>&1 || missing="$$missing $$s"; done; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null 2>&1; then \
	    echo "installing:$$missing"; \
	    SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing:$$missing (install them, or the tests that need them are skipped)"; \
	  fi; \
	fi

test: $(STAMP) system-deps
	$(BIN)/ruff check .
	$(BIN)/pytest

demo: $(STAMP)
	@if [ -z "$$REDIS_URL" ] && ! command -v redis-server >/dev/null 2>&1; then $(MAKE) --no-print-directory system-deps SERVERS=redis-server; fi
	$(BIN)/python -m bot demo

bench: $(STAMP)
	@if [ -z "$$REDIS_URL" ] && ! command -v redis-server >/dev/null 2>&1; then $(MAKE) --no-print-directory system-deps SERVERS=redis-server; fi
	$(BIN)/python -m bench.intake

serve: $(STAMP)
	$(BIN)/queuepilot serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
