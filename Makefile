# Quick start:  make serve   (set up, index a demo corpus, run sample searches)
#               make test    (set up and run every test)
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
DATA    ?= .data
STAMP   := $(VENV)/.installed

.PHONY: install deps test serve bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

# Debian packages the project needs: universal-ctags (symbols), ripgrep (benchmark peer), git.
deps:
	@missing=""; \
	  (ctags --list-features 2>/dev/null | grep -q json) || missing="$$missing universal-ctags"; \
	  command -v rg >/dev/null || missing="$$missing ripgrep"; \
	  command -v git >/dev/null || missing="$$missing git"; \
	  if [ -n "$$missing" ]; then \
	    echo "installing Debian packages:$$missing"; \
	    SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	    $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	  fi

test: install deps
	$(PY) -m pytest -q -p no:cacheprovider

STDLIB = $$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')

serve: install deps
	$(VENV)/bin/codesearch index . $(STDLIB)/json $(STDLIB)/email $(STDLIB)/http $(STDLIB)/urllib $(STDLIB)/asyncio --out $(DATA)/demo-index
	$(VENV)/bin/codesearch search 'sym:^Searcher$$' --index $(DATA)/demo-index
	$(VENV)/bin/codesearch search 'lang:python def\s+\w*split\w*\(' --regex --index $(DATA)/demo-index --matches 10

bench: install deps
	$(PY) bench/corpus.py && $(PY) bench/bench_engine.py

clean:
	rm -rf $(DATA) .pytest_cache
