# queuepilot: `make demo` runs the whole loop locally; `make test` runs every test.
# Both set themselves up on a fresh machine: a virtualenv with the Python dependencies, and
# (through apt, when it is there) the servers the tests and the demo run for real.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Debian ships redis-sentinel as its own package (the failover tests run three of them).
SERVERS := redis-server redis-sentinel prometheus-alertmanager prometheus
# The browser test drives Debian's chromium (never a downloaded browser); the emoji font makes
# the page's screenshots show what Slack shows.
BROWSER := chromium
BROWSER_PACKAGES := chromium fonts-noto-color-emoji

.PHONY: test demo lint format bench serve system-deps browser-deps screenshot apt-install clean image lock release chart-readme

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || $(MAKE) --no-print-directory apt-install PACKAGES=python3-venv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Installs the servers the tests run for real. Without apt (or without root or sudo) it says what
# is missing and goes on: those tests then skip on a developer machine and fail under CI.
system-deps:
	@missing=""; for s in $(SERVERS); do command -v $$s >/dev/null 2>&1 || missing="$$missing $$s"; done; \
	if [ -n "$$missing" ]; then $(MAKE) --no-print-directory apt-install PACKAGES="$$missing"; fi

browser-deps:
	@if ! command -v $(BROWSER) >/dev/null 2>&1 || [ ! -d /usr/share/fonts/truetype/noto ]; then \
	  $(MAKE) --no-print-directory apt-install PACKAGES="$(BROWSER_PACKAGES)"; fi

apt-install:
	@if ! command -v apt-get >/dev/null 2>&1; then \
	  echo "missing:$(PACKAGES) (no apt-get here: install them by hand)"; \
	elif [ "$$(id -u)" -eq 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PACKAGES) >/dev/null; \
	elif command -v sudo >/dev/null 2>&1; then \
	  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PACKAGES) >/dev/null; \
	else \
	  echo "missing:$(PACKAGES) (not root and no sudo: install them by hand)"; \
	fi

# Bytecode is compiled once, before the workers start, and kept: where the environment says not
# to write it (PYTHONDONTWRITEBYTECODE), each of the six workers, and every bot and demo the tests
# start, compiled bot/ and rewrote the tests anew (a worker's collection took 9 s, 4 s kept).
test: $(STAMP) system-deps browser-deps
	$(BIN)/ruff check .
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q bot handlers sandbox tests bench
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest

demo: $(STAMP)
	@if [ -z "$$REDIS_URL" ] && ! command -v redis-server >/dev/null 2>&1; then $(MAKE) --no-print-directory system-deps SERVERS=redis-server; fi
	@$(BIN)/python -m sandbox $(DEMO_ARGS)

# Regenerates docs/demo-thread.png, the README's picture: the demo played to its end in chromium.
screenshot: $(STAMP) browser-deps
	@if [ -z "$$REDIS_URL" ] && ! command -v redis-server >/dev/null 2>&1; then $(MAKE) --no-print-directory system-deps SERVERS=redis-server; fi
	$(BIN)/python -m sandbox.screenshot docs/demo-thread.png

# `make bench BENCH=soak` runs one module alone (BENCH_ARGS are its options).
bench: $(STAMP)
	@if [ -z "$$REDIS_URL" ] && ! command -v redis-server >/dev/null 2>&1; then $(MAKE) --no-print-directory system-deps SERVERS=redis-server; fi
ifdef BENCH
	$(BIN)/python -m bench.$(BENCH) $(BENCH_ARGS)
else
	$(BIN)/python -m bench.intake
	$(BIN)/python -m bench.github_webhooks
	$(BIN)/python -m bench.github_webhooks --flood
	$(BIN)/python -m bench.cost
	$(BIN)/python -m bench.recovery
	$(BIN)/python -m bench.fuzz
	$(BIN)/python -m bench.actions
	$(BIN)/python -m bench.status_tick
	$(BIN)/python -m bench.early_warning
	$(BIN)/python -m bench.pilot
	$(BIN)/python -m bench.footprint
	$(BIN)/python -m bench.storms --write
	$(BIN)/python -m bench.failover --write
	@missing=""; for s in wrk prometheus-alertmanager; do command -v $$s >/dev/null 2>&1 || missing="$$missing $$s"; done; \
	if [ -n "$$missing" ]; then $(MAKE) --no-print-directory apt-install PACKAGES="$$missing"; fi
	$(BIN)/python -m bench.side_by_side --write
	$(BIN)/python -m bench.soak --write
	$(BIN)/python -m bench.soak --case pages --write
endif

serve: $(STAMP)
	$(BIN)/queuepilot serve

# The container image (Dockerfile), built and tested here as root without a registry: buildah
# builds it on a debian:bookworm-slim debootstrapped from this machine's Debian mirror
# (deploy/image/build.sh), then runc runs it as a pod would, against a real Redis and the Slack
# emulator (tests/image).
QUEUEPILOT_IMAGE ?= localhost/queuepilot:dev
IMAGE_TOOLS := buildah debootstrap runc redis-server

image: $(STAMP)
	@missing=""; for s in $(IMAGE_TOOLS); do command -v $$s >/dev/null 2>&1 || missing="$$missing $$s"; done; \
	if [ -n "$$missing" ]; then $(MAKE) --no-print-directory apt-install PACKAGES="$$missing"; fi
	deploy/image/build.sh $(QUEUEPILOT_IMAGE)
	QUEUEPILOT_IMAGE=$(QUEUEPILOT_IMAGE) $(BIN)/pytest -n 0 -m image tests/image

# The image's dependencies, pinned with their hashes (deploy/image/requirements.txt): what
# pyproject.toml asks for at run time (with the `aws` and `github-app` extras, as the image has
# them) and to build the package (setuptools), for Debian bookworm's Python 3.11 on any
# architecture. Run it after changing a dependency, or to take newer releases; commit the result.
LOCK := deploy/image/requirements.txt

lock: $(STAMP)
	@$(BIN)/python -c 'import uv' 2>/dev/null || $(BIN)/pip install --quiet uv
	$(BIN)/python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], sep="\n")' \
	  | $(BIN)/uv pip compile pyproject.toml - --extra aws --extra github-app --generate-hashes \
	    --universal --python-version 3.11 --custom-compile-command "make lock" --quiet \
	    --output-file $(LOCK)

# The chart's README.md, from values.yaml's comments and its schema (a test keeps them equal).
chart-readme: $(STAMP)
	$(BIN)/python deploy/helm/readme.py > deploy/helm/queuepilot/README.md

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info build

# `make release VERSION=0.27.0` writes a release's version everywhere it is named (pyproject.toml,
# the chart's version and appVersion, CHANGELOG's heading); `VERSION=0.28.0.dev0` opens the next.
# docs/releasing.md has the whole procedure.
release: $(STAMP)
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=0.27.0 (or 0.28.0.dev0)"; exit 2; }
	$(BIN)/python deploy/release.py $(VERSION)
