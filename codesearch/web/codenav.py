"""What the file page's code navigation (``static/codenav.js``) needs from the server, computed
once when the page is rendered:

* the repository's branches and tags for the ref selector (`refs_of`, newest first, at most
  `MAX_REFS` of each, the indexed ones marked: code navigation answers from the index);
* the searched terms to highlight when the page is opened from a search result
  (`highlight_terms`: the positive content terms of the query the result link carries as
  ``?q=…&regex=1&case=1``; prefixes such as ``lang:`` or ``repo:`` highlight nothing);
* `nav_config`, the JSON the page embeds (read as data by the script, never as HTML).

Everything else (definitions, references, the tree, the file list) the script asks the REST API
for, with the visitor's session, so the permission rule of those routes applies.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from codesearch.errors import CodesearchError
from codesearch.git.process import Git
from codesearch.git.refs import list_branches
from codesearch.query import ast
from codesearch.query.parser import parse
from codesearch.search.present import short_ref

MAX_REFS = 200
MAX_TERMS = 20


def _tags(git_dir: str) -> list[str]:
    """Tag names, newest first (``git for-each-ref --sort=-creatordate refs/tags/``)."""
    res = Git.at(git_dir).run(
        ["for-each-ref", "--sort=-creatordate", f"--count={MAX_REFS + 1}", "--format=%(refname)", "refs/tags/"]
    )
    if res.returncode != 0:
        return []
    out = []
    for line in res.stdout.split(b"\n"):
        if line.startswith(b"refs/tags/"):
            out.append(line[len(b"refs/tags/") :].decode("utf-8", "replace"))
    return out


def refs_of(git_dir: str, indexed: dict[str, Any] | None) -> dict[str, Any]:
    """``{branches: [{name, indexed}], tags: [...], truncated}`` of the repository."""
    indexed_names = {short_ref(r) for r in (indexed or {})}
    try:
        branches = [b.name for b in list_branches(git_dir)]
    except CodesearchError:
        branches = []
    tags = _tags(git_dir)
    truncated = len(branches) > MAX_REFS or len(tags) > MAX_REFS
    return {
        "branches": [{"name": b, "indexed": b in indexed_names} for b in branches[:MAX_REFS]],
        "tags": [{"name": t, "indexed": t in indexed_names} for t in tags[:MAX_REFS]],
        "truncated": truncated,
    }


def _positive_contents(node: ast.Node, negated: bool = False) -> Iterator[ast.Content]:
    if isinstance(node, ast.Not):
        yield from _positive_contents(node.child, not negated)
    elif isinstance(node, (ast.And, ast.Or)):
        for child in node.children:
            yield from _positive_contents(child, negated)
    elif isinstance(node, ast.Content) and not negated and node.pattern:
        yield node


def highlight_terms(q: str, regex: bool, case: bool) -> list[dict[str, Any]]:
    """``[{pattern, regex, case}]`` to mark in the file: the content terms of `q` that are not
    negated (none when `q` does not parse: a page never fails over its highlight)."""
    if not q or not q.strip():
        return []
    try:
        tree = parse(q, is_regex=regex, case_sensitive=case)
    except CodesearchError:
        return []
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, bool, bool]] = set()
    for c in _positive_contents(tree):
        key = (c.pattern, c.is_regex, c.case_sensitive)
        if key not in seen:
            seen.add(key)
            out.append({"pattern": c.pattern, "regex": c.is_regex, "case": c.case_sensitive})
    return out[:MAX_TERMS]


def nav_config(
    *,
    root: str,
    repo: str,
    rev: str,
    ref: str,
    path: str,
    language: str,
    git_dir: str,
    indexed: dict[str, Any] | None,
    q: str = "",
    regex: bool = False,
    case: bool = False,
) -> dict[str, Any]:
    return {
        "root": root,
        "repo": repo,
        "rev": rev,
        "ref": ref,
        "path": path,
        "language": language,
        "refs": refs_of(git_dir, indexed),
        "highlight": highlight_terms(q, regex, case),
    }
