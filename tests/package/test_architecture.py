"""The package's shape, checked: no import cycle, layers that only import downwards, small modules,
and an engine that never imports Ray (docs/development.md#repository-layout).

The import graph is read with `ast` (`tests.import_graph`), function-local imports included: a cycle
held open only by importing inside a function is still a cycle a reader has to untangle. Imports
under ``if TYPE_CHECKING:`` are left out of the layer checks (annotations only: nothing runs them),
but not out of the cycle check: two modules that name each other's types are still one knot (a
`Protocol` in the lower one cuts it).
"""

from __future__ import annotations

import ast

import pytest

from tests.import_graph import ROOT, graph, modules, package_of, strongly_connected

GRAPH = graph()

#: What each layer may NOT import (packages under ``codesearch.``): the layers, bottom to top, are the
#: engine (index, query, search) and the stores and config; the runtime (Ray actors); the application
#: layer (`codesearch.app`: the caller's context, search and git reads as a caller); the HTTP domain the
#: API and the pages share (`forwarded`: who sent a request; `audit`, `sessions` with CSRF, `oauth`: the
#: OAuth 2.0 server's protocol); the front doors (the MCP tools, the HTTP service, and the web UI above
#: it); serving (composition and Ray Serve lifecycle) and the front ends (cli, client, and data: batch
#: search as a Ray Dataset, over the client's back ends).
HTTP = {"forwarded", "audit", "sessions", "oauth"}
FORBIDDEN = {
    "index": {"runtime", "service", "web", "serving", "app", "tools", "client", "cli", "store", "sso", "llm", "data"} | HTTP,
    "query": {"runtime", "service", "web", "serving", "app", "tools", "client", "cli", "store", "sso", "llm", "data"} | HTTP,
    "search": {"runtime", "service", "web", "serving", "app", "tools", "client", "cli", "sso", "llm", "data"} | HTTP,
    "config": {"runtime", "service", "web", "serving", "app", "tools", "client", "cli", "llm", "store", "data"} | HTTP,
    "store": {"runtime", "service", "web", "serving", "app", "tools", "client", "cli", "data"} | HTTP,
    "runtime": {"service", "web", "serving", "app", "client", "cli", "data"} | HTTP,
    "tools": {"service", "web", "serving", "client", "cli", "data"},
    "app": {"tools", "service", "web", "serving", "client", "cli", "data"},
    "service": {"web", "serving", "client", "cli", "data"},
    "web": {"serving", "client", "cli", "data"},
    "markup": {"runtime", "service", "web", "serving", "app", "tools", "client", "cli", "data"} | HTTP,
    "forwarded": {"runtime", "service", "web", "serving", "app", "tools", "client", "cli", "store", "data"} | HTTP,
    "audit": {"service", "web", "serving", "tools", "client", "cli", "sessions", "oauth", "data"},
    "oauth": {"service", "web", "serving", "tools", "client", "cli", "audit", "sessions", "data"},
    "sessions": {"service", "web", "serving", "tools", "client", "cli", "audit", "oauth", "data"},
    # batch search as a Ray Dataset: over the client's back ends and the engine, under the command line
    "data": {"runtime", "service", "web", "serving", "app", "tools", "cli", "store", "sso", "llm"} | HTTP,
    "serving": {"data"},
    "client": {"data"},
    # insights over history: the engine's and the store's user, below the runtime (whose scheduler
    # adds their points) and the front doors (the API, the pages)
    "insights": {"runtime", "service", "web", "serving", "app", "tools", "client", "cli", "llm", "sso", "data"} | HTTP,
}

#: The engine core: it runs in notebooks, in `codesearch index` and inside the actors alike.
ENGINE = ("index", "query", "search")

MAX_LINES = 600


def test_no_import_cycle():
    cycles = strongly_connected(GRAPH)
    assert cycles == [], "modules that import each other (directly or around a loop):\n" + "\n".join(
        ", ".join(c) for c in cycles
    )


def test_no_import_cycle_even_through_annotations():
    cycles = strongly_connected(graph(annotations=True))
    assert cycles == [], "modules that name each other's types (a Protocol in the lower one cuts it):\n" + "\n".join(
        ", ".join(c) for c in cycles
    )


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_only_downwards(layer):
    upward = sorted(
        f"{m} -> {d}"
        for m, deps in GRAPH.items()
        if package_of(m) == f"codesearch.{layer}"
        for d in deps
        if package_of(d).removeprefix("codesearch.") in FORBIDDEN[layer]
    )
    assert upward == [], f"codesearch.{layer} reaches up:\n" + "\n".join(upward)


def test_no_module_is_longer_than_600_lines():
    long = sorted(
        (n, name) for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES
    )
    assert long == [], "split these by responsibility: " + ", ".join(f"{name} ({n} lines)" for n, name in long)


#: The HTTP service's top level: who is calling (`auth`, `anonymous`), the app's one state container
#: (`deps.Services`) and the error bodies; everything else is a route (`service/routes/`) or a
#: middleware (`service/middleware/`).
SERVICE_TOP = {"anonymous", "auth", "deps", "errors"}


def test_the_service_top_holds_only_the_caller_the_app_state_and_errors():
    assert {p.stem for p in (ROOT / "service").glob("*.py") if p.stem != "__init__"} == SERVICE_TOP


def _makes_a_router(tree: ast.AST) -> bool:
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "APIRouter"
        for node in ast.walk(tree)
    )


def test_the_service_routers_are_in_routes():
    outside = [
        str(path.relative_to(ROOT.parent))
        for path in sorted((ROOT / "service").rglob("*.py"))
        if "routes" not in path.relative_to(ROOT / "service").parts and _makes_a_router(ast.parse(path.read_text()))
    ]
    assert outside == []


def _imports_ray(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "ray" or a.name.startswith("ray.") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "ray":
            return True
    return False


@pytest.mark.parametrize("package", ENGINE)
def test_the_engine_never_imports_ray(package):
    offenders = [
        str(path.relative_to(ROOT.parent))
        for path in sorted((ROOT / package).rglob("*.py"))
        if _imports_ray(ast.parse(path.read_text()))
    ]
    assert offenders == []


#: The modules of `codesearch.insights` that run anywhere (a notebook, a Ray task, the scheduler):
#: only its Ray layer (`dataset`) imports Ray.
INSIGHTS_RAY_LAYER = ("dataset.py",)


def test_the_insights_engine_never_imports_ray():
    offenders = [
        path.name
        for path in sorted((ROOT / "insights").glob("*.py"))
        if path.name not in INSIGHTS_RAY_LAYER and _imports_ray(ast.parse(path.read_text()))
    ]
    assert offenders == []


# The checks above must be able to fail: each is run on a small graph or tree that breaks it.


def test_the_cycle_check_finds_a_loop_through_a_function_local_import(tmp_path):
    from tests.import_graph import _imports

    a = ast.parse("from codesearch.b import f\n")
    b = ast.parse("def g():\n    from codesearch.a import h\n")
    typed = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from codesearch.a import h\n")
    known = {"codesearch.a", "codesearch.b", "codesearch.c"}
    g = {
        "codesearch.a": _imports(a, "codesearch.a", False, known),
        "codesearch.b": _imports(b, "codesearch.b", False, known),
        "codesearch.c": _imports(typed, "codesearch.c", False, known),
    }
    assert g["codesearch.c"] == set()  # annotations only
    assert _imports(typed, "codesearch.c", False, known, annotations=True) == {"codesearch.a"}
    assert strongly_connected(g) == [["codesearch.a", "codesearch.b"]]


def test_the_router_check_sees_a_router():
    assert _makes_a_router(ast.parse("from fastapi import APIRouter\nrouter = APIRouter()"))
    assert not _makes_a_router(ast.parse("from fastapi import APIRouter\ndef f(r: APIRouter): ..."))


def test_the_ray_check_sees_every_form_of_import():
    for code in ("import ray", "from ray import serve", "import ray.util as u", "def f():\n    from ray.util import x"):
        assert _imports_ray(ast.parse(code)), code
    assert not _imports_ray(ast.parse("import rayon\nfrom raylib import x"))
