"""The web UI's scripts are native ES modules (no build step): every name a module imports is
exported by the module it names, every page loads its scripts as modules, and a page preloads
every module its script needs (`codesearch.web.modules`), so none is found one round trip late."""

from __future__ import annotations

import os
import re

import pytest
from fastapi.testclient import TestClient

from codesearch.web.assets import STATIC_DIR, TEMPLATES_DIR
from codesearch.web.assets import digest
from codesearch.web.modules import direct_imports, imports_of
from tests.conftest import LOCAL

_NAMED_IMPORT = re.compile(r'^import \{([^}]*)\} from "\./([\w.-]+\.js)";', re.MULTILINE)
_EXPORT = re.compile(r"^export (?:async function|function|const|let|class) (\w+)", re.MULTILINE)


def _scripts() -> list[str]:
    return sorted(f for f in os.listdir(STATIC_DIR) if f.endswith(".js"))


def test_every_imported_name_is_exported_by_its_module():
    for name in _scripts():
        with open(os.path.join(STATIC_DIR, name), encoding="utf-8") as f:
            source = f.read()
        for names, module in _NAMED_IMPORT.findall(source):
            with open(os.path.join(STATIC_DIR, module), encoding="utf-8") as f:
                exported = set(_EXPORT.findall(f.read()))
            wanted = {n.strip() for n in names.split(",") if n.strip()}
            assert wanted <= exported, (name, module, wanted - exported)


def test_no_script_is_loaded_as_a_classic_script_or_leans_on_a_global():
    for template in os.listdir(TEMPLATES_DIR):
        with open(os.path.join(TEMPLATES_DIR, template), encoding="utf-8") as f:
            text = f.read()
        for tag in re.findall(r"<script\b[^>]*\bsrc=[^>]*>", text):
            assert 'type="module"' in tag, (template, tag)
    for name in _scripts():
        with open(os.path.join(STATIC_DIR, name), encoding="utf-8") as f:
            source = f.read()
        assert "window.codesearch" not in source and '"use strict"' not in source, name


def test_imports_of_follows_imports_of_imports(tmp_path):
    (tmp_path / "page.js").write_text('import {a} from "./a.js";\nimport "./b.js";\n')
    (tmp_path / "a.js").write_text('import {c} from "./c.js";\nexport function a() {}\n')
    (tmp_path / "b.js").write_text('import {a} from "./a.js";\n')
    (tmp_path / "c.js").write_text("export const c = 1;\n")
    assert direct_imports("page.js", str(tmp_path)) == ["a.js", "b.js"]
    assert imports_of("page.js", str(tmp_path)) == ("a.js", "b.js", "c.js")
    assert imports_of("c.js", str(tmp_path)) == ()


#: One configured language model (search assist is on the home and results pages with one).
MODELS = ({"provider": "openai-compatible", "model": "m1"},)


def _results_page(tmp_path, models=(), path="/search?q=handle_request") -> str:
    """The results page's HTML for a query (or another page's), from the app over a store that
    lists `models` as the configured language models (none: an empty store)."""
    from codesearch.serving.api import build_app
    from codesearch.store import Store

    store = Store.open(str(tmp_path / "data"))
    try:
        store.replace_language_models(models)
        with TestClient(build_app(lambda: None, get_store=lambda: store, anonymous_access=True, environ={}),
                        base_url=LOCAL) as c:
            return c.get(path).text
    finally:
        store.close()


@pytest.mark.parametrize("path", ["/", "/search?q=handle_request"])
@pytest.mark.parametrize("models", [(), MODELS])
def test_search_assist_is_on_the_page_only_where_a_model_is_configured(tmp_path, path, models):
    """Sourcebot offers search assist only with a language model. The server says so in the page
    (it used to be a GET /api/models after every load): the element, hidden until its module runs,
    and the module named for after the load, are there exactly when a model is configured."""
    html = _results_page(tmp_path, models, path)
    assert ('id="search-assist"' in html) == bool(models)
    assert ('data-after-load="search-assist.js"' in html) == bool(models)
    if models:
        assert re.search(r'<details class="search-assist" id="search-assist"[^>]* hidden>', html)


def test_the_results_page_preloads_what_its_module_imports_before_it_runs(tmp_path):
    html = _results_page(tmp_path)
    needed = imports_of("search-page.js")
    assert {"dom.js", "searchform.js"} <= set(needed)
    static = f"/static/v-{digest(STATIC_DIR)}"
    script = html.index(f'<script type="module" async src="{static}/search-page.js"></script>')
    for module in needed:
        link = html.index(f'<link rel="modulepreload" href="{static}/{module}">')
        assert link < script, module  # fetched alongside the page's module, not after it


def test_every_module_loaded_after_the_page_exists():
    """The modules an element's ``data-after-load`` names (app.js imports them once the page is
    complete) are plain module names of ``static/``."""
    later = set()
    for template in os.listdir(TEMPLATES_DIR):
        with open(os.path.join(TEMPLATES_DIR, template), encoding="utf-8") as f:
            later |= set(re.findall(r'data-after-load="([^"]*)"', f.read()))
    assert later == {"search-assist.js"}
    for module in later:
        assert re.fullmatch(r"[\w-]+\.js", module) and os.path.exists(os.path.join(STATIC_DIR, module)), module


def test_the_results_page_head_fetches_only_what_the_first_result_needs(tmp_path):
    """Issue 29 (time to first result): one stylesheet, and search assist (which waits for the
    complete page anyway) not among what the parser fetches before the first result. With a model
    configured: without one the page has no search assist at all."""
    html = _results_page(tmp_path, MODELS)
    assert 'data-after-load="search-assist.js"' in html
    before_results = html[: html.index('id="results"')]
    assert re.findall(r'<link rel="stylesheet" href="[^"]*/([\w.-]+)">', before_results) == ["style.css"]
    fetched = re.findall(r'(?:modulepreload" href|src)="[^"]*/([\w.-]+\.js)"', before_results)
    assert not {"search-assist.js", "http.js"} & set(fetched), fetched
