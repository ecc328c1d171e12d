"""Ranking on real projects: a plain search for an identifier puts the file that defines it first.

The corpus is real third-party code already on the machine: packages of Python's standard
library and libraries installed in the test environment (SQLAlchemy's ORM is the Django-like
case: ``Session`` or ``Query`` appear in hundreds of files, defined in one). Each package is
indexed as its own repository. Each row of `TABLE` is a fact about that code (checked before
it is used: the file exists and defines the name), and the search runs with a small cap, so
that a defining file found late in document order would not even be verified without the
ranking rule.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sysconfig

import pytest

from codesearch.index.paths import index_paths
from codesearch.search.engine import Searcher

STDLIB = sysconfig.get_paths()["stdlib"]


def _package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, f"{name} is not installed"
    return list(spec.submodule_search_locations)[0]


PACKAGES = {  # repository name → folder
    **{f"python/{p}": os.path.join(STDLIB, p) for p in
       ("urllib", "http", "json", "concurrent", "collections", "logging", "unittest", "email", "asyncio", "xml")},
    **{f"pypi/{p}": _package_dir(p) for p in ("sqlalchemy", "starlette", "fastapi", "httpx", "pydantic", "jinja2")},
}

#: identifier → (repository, path of the file that defines it)
TABLE = [
    ("urlsplit", "python/urllib", "parse.py"),
    ("HTTPServer", "python/http", "server.py"),
    ("JSONDecoder", "python/json", "decoder.py"),
    ("ThreadPoolExecutor", "python/concurrent", "futures/thread.py"),
    ("OrderedDict", "python/collections", "__init__.py"),
    ("QueueHandler", "python/logging", "handlers.py"),
    ("TestCase", "python/unittest", "case.py"),
    ("EmailMessage", "python/email", "message.py"),
    ("AbstractEventLoop", "python/asyncio", "events.py"),
    ("SubElement", "python/xml", "etree/ElementTree.py"),
    ("Session", "pypi/sqlalchemy", "orm/session.py"),
    ("sessionmaker", "pypi/sqlalchemy", "orm/session.py"),
    ("DeclarativeBase", "pypi/sqlalchemy", "orm/decl_api.py"),
    ("create_engine", "pypi/sqlalchemy", "engine/create.py"),
    ("StaticFiles", "pypi/starlette", "staticfiles.py"),
    ("APIRouter", "pypi/fastapi", "routing.py"),
    ("AsyncClient", "pypi/httpx", "_client.py"),
    ("BaseModel", "pypi/pydantic", "main.py"),
    ("Environment", "pypi/jinja2", "environment.py"),
]


@pytest.fixture(scope="module")
def real_code(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ranking") / "index")
    index_paths(list(PACKAGES.values()), out)
    s = Searcher(out)
    names = {r.name for sh in s.shards for r in sh.repos}
    yield s, {repo: next(n for n in names if n.endswith(PACKAGES[repo].strip("/"))) for repo in PACKAGES}
    s.close()


@pytest.mark.parametrize("identifier,repo,path", TABLE, ids=[t[0] for t in TABLE])
@pytest.mark.parametrize("matches", [20, 500])
def test_the_defining_file_comes_first(real_code, identifier, repo, path, matches):
    with open(os.path.join(PACKAGES[repo], path), encoding="utf-8") as f:  # the row is a fact
        assert re.search(rf"^\s*(class|def)\s+{identifier}\b", f.read(), re.M), f"{path} does not define {identifier}"
    searcher, repo_names = real_code
    resp = searcher.search(identifier, matches=matches)
    top = [(f["repository"], f["fileName"]["text"]) for f in resp["files"][:3]]
    assert (repo_names[repo], path) in top, f"{identifier}: top 3 are {top}"
    # the definition itself is among the ranges shown for that file
    f = next(f for f in resp["files"] if (f["repository"], f["fileName"]["text"]) == (repo_names[repo], path))
    lines = [line for c in f["chunks"] for line in c["content"].split("\n")]
    assert any(re.match(rf"\s*(class|def)\s+{identifier}\b", line) for line in lines), (
        f"{identifier}: no definition shown"
    )


#: names with a few definitions and with hundreds (``__init__``), written as defined and not
DEFINED_NAMES = ["Session", "session", "SESSION", "__init__", "get", "urlsplit", "no_such_name_here"]


def _brute_definitions(shard, name: str) -> list[tuple[int, str, bool]]:
    """`Shard.definitions` from each document's symbols, one by one: the oracle of the arrays."""
    from codesearch.index.shard import is_reference

    out = []
    for doc in range(shard.doc_count):
        for sym in shard.symbols(doc):
            if sym.name.lower() == name.lower() and not is_reference(sym.kind, shard.language(doc)):
                out.append((doc, sym.kind, sym.name == name))
    return sorted(out)


@pytest.mark.parametrize("name", DEFINED_NAMES)
def test_definitions_are_every_symbol_of_that_name_that_is_not_an_import(real_code, name):
    searcher, _ = real_code
    for shard in searcher.shards:
        found = shard.definitions(name.encode())
        got = sorted(
            zip(found.docs.tolist(), [shard.symbol_kinds[k] for k in found.kinds.tolist()], found.exact.tolist())
        )
        assert got == _brute_definitions(shard, name), shard.path


@pytest.mark.parametrize("name", DEFINED_NAMES)
@pytest.mark.parametrize("case_sensitive", [False, True])
@pytest.mark.parametrize("limit", [1, 3, 10_000])
def test_ranked_definitions_are_the_best_first_then_in_document_order(real_code, name, case_sensitive, limit):
    from codesearch.search.engine import make_plan
    from codesearch.search.evaluate import ShardEvaluator
    from codesearch.search.options import SearchOptions
    from codesearch.search.ranking import definition_bonus

    searcher, _ = real_code
    plan = make_plan(name, SearchOptions(case_sensitive=case_sensitive))
    for shard in searcher.shards:
        best: dict[int, int] = {}
        for doc, kind, exact in _brute_definitions(shard, name):
            if exact or not case_sensitive:
                best[doc] = max(best.get(doc, -1), definition_bonus(kind, exact))
        want = sorted(((b, doc) for doc, b in best.items()), key=lambda x: (-x[0], x[1]))[:limit]
        ev = ShardEvaluator(shard, plan, 100, float("inf"))
        assert ev.start() is not None
        assert ev.ranked_definitions(limit) == want, shard.path
