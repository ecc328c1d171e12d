"""Code navigation over HTTP, in Sourcebot's shapes (its ``/api/find_definitions``,
``/api/find_references`` and ``POST /api/tree``).

``POST /api/find_definitions`` and ``POST /api/find_references``
    body ``{symbolName, language?, repoName?, revisionName?}`` →
    ``{stats: {matchCount}, files: [{fileName, repository, repositoryId, webUrl, language,
    matches: [{lineContent, range}]}], repositoryInfo, isSearchExhaustive}``
    (`codesearch.tools.codenav`: ctags definitions, word-boundary references; at most 1000
    occurrences). Sourcebot requires `language`; here it is optional (no language: every one).

``POST /api/tree``
    body ``{repoName, revisionName, paths: [dir, …]}`` → ``{tree: {name: "root", path: "",
    type: "tree", children: [...]}}``: the repository's top level plus the entries of each
    directory in `paths` (and the directories leading to it), each node
    ``{name, path, type: "tree"|"blob", children}``, directories first then by name. At most
    `MAX_TREE_PATHS` paths and `MAX_TREE_ENTRIES` entries per directory (``truncated: true`` on
    a directory node that had more).

Every answer goes through the caller's `ToolContext`: searches through the searchers with the
caller's visible repositories, repositories through `ToolContext.repo` (a hidden repository is
answered exactly as a missing one). Bad bodies are 400 ``INVALID_REQUEST_BODY`` naming the field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StrictStr
from starlette.concurrency import run_in_threadpool

from codesearch import audit
from codesearch.app import git_reads
from codesearch.app.context import ToolContext
from codesearch.errors import FileNotFound
from codesearch.git.paths import check_dir, check_ref
from codesearch.permissions import Identity
from codesearch.service.deps import Caller, Services, ServicesDep
from codesearch.service.routes.search import json_body
from codesearch.tools import codenav

MAX_TREE_PATHS = 100
MAX_TREE_ENTRIES = 2000


class RelatedSymbolsRequest(BaseModel):
    """The body of ``/api/find_definitions`` and ``/api/find_references``."""

    model_config = ConfigDict(extra="ignore")

    symbolName: StrictStr = Field(min_length=1, max_length=codenav.MAX_SYMBOL_LENGTH)
    language: StrictStr | None = Field(None, max_length=100)
    revisionName: StrictStr | None = Field(None, min_length=1, max_length=1024)
    repoName: StrictStr | None = Field(None, min_length=1, max_length=1000)


class TreeRequest(BaseModel):
    """The body of ``POST /api/tree``."""

    model_config = ConfigDict(extra="ignore")

    repoName: StrictStr = Field(min_length=1, max_length=1000)
    revisionName: StrictStr = Field(min_length=1, max_length=1024)
    paths: list[StrictStr] = Field(max_length=MAX_TREE_PATHS)


def _node(name: str, path: str, kind: str) -> dict[str, Any]:
    return {"name": name, "path": path, "type": kind, "children": []}


def build_tree(tc: ToolContext, repo: str, ref: str, paths: list[str]) -> dict[str, Any]:
    """The root plus every directory of `paths` (and its parents) expanded one level."""
    row = tc.repo(repo)
    ref = check_ref(ref)
    root = _node("root", "", "tree")
    nodes: dict[str, dict[str, Any]] = {"": root}
    wanted = [""]
    for p in paths:
        under = check_dir(p.strip("/"))
        parts = [x for x in under.split("/") if x]
        wanted += ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for under in dict.fromkeys(wanted):  # parents before children, each once
        node = nodes.get(under)
        if node is None:  # a path below a file, or below a directory that does not exist
            raise FileNotFound(f"path {under!r} is not a directory at {ref}")
        if node["type"] != "tree":
            raise FileNotFound(f"path {under!r} is a file, not a directory, at {ref}")
        if node["children"]:
            continue
        listing = git_reads.list_tree(tc, row, under, ref, depth=1, max_entries=MAX_TREE_ENTRIES)
        for e in sorted(listing.entries, key=lambda e: (not e.is_dir, e.name.lower(), e.name)):
            child = _node(e.name, e.path, "tree" if e.is_dir else "blob")
            node["children"].append(child)
            nodes[e.path] = child
        if listing.truncated:
            node["truncated"] = True
    return {"tree": root}


router = APIRouter()


async def _related(
    request: Request, identity: Identity, services: Services, lookup: Callable[..., dict[str, Any]], kind: str
) -> dict[str, Any]:
    body = await json_body(request, RelatedSymbolsRequest)
    codenav.check_symbol(body.symbolName)
    audit.record(request, identity, "search", body.symbolName, repo=body.repoName, language=body.language, symbols=kind)

    def run() -> dict[str, Any]:
        return lookup(
            services.make_context(identity),
            body.symbolName,
            repo=body.repoName,
            language=body.language or None,
            revision=body.revisionName,
        )

    return await run_in_threadpool(run)


@router.post("/api/find_definitions")
async def find_definitions(request: Request, identity: Caller, services: ServicesDep) -> dict[str, Any]:
    return await _related(request, identity, services, codenav.find_definitions, "definitions")


@router.post("/api/find_references")
async def find_references(request: Request, identity: Caller, services: ServicesDep) -> dict[str, Any]:
    return await _related(request, identity, services, codenav.find_references, "references")


@router.post("/api/tree")
async def tree(request: Request, identity: Caller, services: ServicesDep) -> dict[str, Any]:
    body = await json_body(request, TreeRequest)
    audit.record(request, identity, "tree.read", body.repoName, ref=body.revisionName)

    def run() -> dict[str, Any]:
        return build_tree(services.make_context(identity), body.repoName, body.revisionName, body.paths)

    return await run_in_threadpool(run)
