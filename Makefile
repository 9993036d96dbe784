# mysqlq — developer entry points.  `make test` is all CI runs (see .ci/run).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# Small pip-installable packages: handler entry points (tests, demo) and the tests' harness
# (private servers, test hosts, waiting), which the demo and the benchmark use too.
LOCAL_PKGS := tests/handlers tests/harness scripts/handlers

# Debian packages needed to build mysqlclient and systemd-python (libsystemd-dev: the journal and
# systemd's notifications through systemd's own binding), to run mariadbd, the browser the dashboard
# tests drive (Playwright talks to Debian's chromium; it never downloads a browser), and Galera with
# its state-transfer tools for the cluster tests.
DEB_PACKAGES := pkg-config gcc python3-dev python3-venv libmariadb-dev libsystemd-dev \
                mariadb-server mariadb-client systemd chromium \
                galera-4 mariadb-backup socat
# What the demo needs of them: the build tools, the server, and systemd for the private one its
# workers run under (where it cannot run, they run in the foreground).
DEMO_DEB_PACKAGES := pkg-config gcc python3-dev python3-venv libmariadb-dev libsystemd-dev \
                     mariadb-server mariadb-client systemd

# Use sudo for apt-get when not root (and sudo exists).
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || command -v sudo)

PYTEST_ARGS ?=
BENCH_ARGS  ?=

# Django 6 needs Python 3.12 or later: the Django backend's tests run again in a venv of their own
# on the first such interpreter found (pyenv's, or python3.12/3.13 on the PATH).
PY312 := $(firstword $(wildcard $(HOME)/.pyenv/versions/3.1[23]*/bin/python3) \
                     $(shell command -v python3.13 python3.12 2>/dev/null))
VENV6 := .venv-django6

.PHONY: all deps venv lint docs dist test test-fast test-wheel test-django6 test-mysql mysql demo bench clean distclean

all: test

# deps: install whichever of DEB_PACKAGES are missing (silent when none are).
deps:
	@if ! command -v dpkg-query >/dev/null 2>&1; then \
	  echo "deps: not a Debian system; install the equivalents of: $(DEB_PACKAGES)" >&2; \
	  exit 0; \
	fi; \
	missing=""; \
	for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'install ok installed' \
	    || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y --no-install-recommends $$missing; \
	fi

# venv: .venv with the package (editable, dev extras) and the handler packages;
# reinstalled only when one of the pyproject.toml files changes.
venv: $(STAMP)

$(STAMP): pyproject.toml $(wildcard $(addsuffix /pyproject.toml,$(LOCAL_PKGS))) | deps
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,docs]' \
	  $(foreach d,$(LOCAL_PKGS),$(if $(wildcard $(d)/pyproject.toml $(d)/setup.py),-e ./$(d)))
	@touch $@

# lint: ruff over all Python code, mypy over the package, and the layers (imports only downward).
lint: venv
	$(BIN)/ruff check mysqlq tests scripts scripts/bench scripts/demo scripts/rehearse scripts/wheel-smoke docs/recipes
	$(BIN)/mypy mysqlq
	$(BIN)/lint-imports --no-cache

# docs: the documentation site into build/site, strictly (a warning fails the build).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# dist: the sdist and the wheel into dist/ (the wheel built from the sdist, so the sdist is complete),
# and their metadata checked as the package index would.
dist: venv
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# test-wheel: the built wheel installed into a fresh venv outside the repository on every supported
# Python found here, and used from there: the CLI, a producer, a worker (also under systemd), the dashboard.
test-wheel: deps dist
	$(BIN)/python scripts/wheel-smoke

# test: lint, the wheel, then pytest (the session fixture starts a private mariadbd itself,
# or uses MYSQLQ_TEST_DSN), the Django 6 lane, and the whole suite again on MySQL.
# Extra pytest options: make test PYTEST_ARGS='-k claim -x'
test: deps venv lint docs test-wheel
	$(BIN)/pytest $(PYTEST_ARGS)
	$(MAKE) test-django6
	$(MAKE) test-mysql

# test-fast: only the tests that need no database server (tests/unit), in seconds; no server is started.
test-fast: venv
	$(BIN)/pytest -q tests/unit $(PYTEST_ARGS)

# mysql: a private MySQL server's files (Debian sid's mysql-server-core and its libraries, unpacked
# by the harness into ~/.cache/mysqlq-mysql/root with the machine's own apt; nothing installed
# system-wide), for the tests and the benchmark.
mysql: venv
	$(BIN)/python -m mysqlq_harness.mysql install

# test-mysql: the whole suite again, on a private MySQL server instead of mariadbd.
test-mysql: deps venv mysql
	MYSQLQ_TEST_SERVER=mysql $(BIN)/pytest $(PYTEST_ARGS)

# test-django6: the Django backend's tests on Django 6 (django.tasks itself) with Python 3.12+.
# Without such an interpreter it says so, and fails under CI.
test-django6: deps
	@if [ -z "$(PY312)" ]; then \
	  echo "test-django6: no Python 3.12 or later here, which Django 6 needs" >&2; \
	  if [ -n "$$CI" ]; then exit 1; else exit 0; fi; \
	fi; \
	test -x $(VENV6)/bin/python || $(PY312) -m venv $(VENV6); \
	$(VENV6)/bin/python -m pip install -q --upgrade pip && \
	$(VENV6)/bin/python -m pip install -q -e . 'django>=6.0' 'pytest>=8' 'pytest-timeout>=2.2' \
	  -e ./tests/handlers -e ./tests/harness && \
	$(VENV6)/bin/python -m pytest -q tests/applications/test_django.py

# demo: run the end-to-end demo script: workers installed and started as units under systemd (this
# machine's when it is PID 1, else a private one), in the foreground where none can run.
demo: DEB_PACKAGES := $(DEMO_DEB_PACKAGES)
demo: deps venv
	$(BIN)/python scripts/demo

# bench: run the benchmark; options via BENCH_ARGS='...'.
bench: deps venv
	$(BIN)/python scripts/bench $(BENCH_ARGS)

# clean: stop a local private server, remove its data and all caches/build output.
clean:
	@if [ -d .mysqlq ]; then \
	  find .mysqlq -name mariadbd.pid -exec sh -c \
	    'PYTHONPATH=tests/harness $(PYTHON) -m mysqlq_harness.mariadb stop "$$(dirname "$$1")" || true' _ {} \; ; \
	fi
	rm -rf .mysqlq build dist .mypy_cache .ruff_cache .pytest_cache
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name '*.egg-info' \) \
	  -prune -exec rm -rf {} +

# distclean: clean, and remove the virtualenv too.
distclean: clean
	rm -rf $(VENV) $(VENV6)
