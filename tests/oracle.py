r"""A brute-force search over the same files, the reference the engine is checked against.

It shares nothing with the engine's parser, index, planner or evaluator: it lists files with the
git command line (or os.walk), applies the indexing rules with plain Python (sets of 3-byte
windows for the trigram count), runs ctags in batch mode for symbols (of the languages the
index takes symbols from), and evaluates a query tree on every file with google-re2 directly.
Only the language detector is shared (it has its own tests).

The tree is not parsed from the query string: the tests write it by hand next to the query (or
generate the tree and render the query from it), so a parser bug cannot hide by making engine
and oracle agree on the same wrong tree. A tree is nested tuples:

    ("and", t1, t2, ...)   ("or", t1, t2, ...)   ("not", t)   ("false",)  (matches nothing)
    ("text", "foo")        a literal substring of the content
    ("regex", r"fo+")      a regular expression over the content
    ("file", r"\.py$")     a regex over the path          ("sym", "^main$")  over symbol names
    ("repo", "plain")      a regex over the repo name, always case-insensitive
    ("lang", "Go")  ("rev", "dev")  ("reposet", ("a", "b"))  ("context", "web")
    ("archived", "no")  ("fork", "only")  ("visibility", "private")

The case-sensitivity toggle is the search's, as for the engine: it applies to text, regex, file
and sym leaves. Match ranges come from the leaves under an even number of negations, except those
in a part whose value does not depend on its leaves: an AND that is false for every document
(it has ``("false",)`` or another never-true part) or an OR that is true for every document
(it has ``("not", ("false",))`` or another always-true part) shows nothing. `search` returns the set of (repo, path, branches, start, end) match spans, plus
the set of matching files, to compare with the engine's answer for the query.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field

import re2
import regex

from codesearch.index.language import detect, wants_symbols


@dataclass
class Doc:
    repo: str
    path: str
    content: bytes  # b"" when skipped
    branches: list[str]  # full ref names, in the repo's branch order
    skipped: bool
    language: str
    symbols: list[tuple[str, int]] = field(default_factory=list)  # (name, line)


def _ascii_lower(b: bytes) -> bytes:
    return b.translate(bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz"))


def skipped(content: bytes, size: int, max_file_size: int, max_trigrams: int) -> bool:
    """The indexing rules of docs/indexing.md#what-gets-indexed, written plainly."""
    if size > max_file_size or b"\0" in content:
        return True
    folded = _ascii_lower(content.replace("\u212a".encode(), b"k").replace("\u017f".encode(), b"s"))
    return len({folded[i : i + 3] for i in range(len(folded) - 2)}) > max_trigrams


def ctags_symbols(root: str, rel_paths: list[str]) -> dict[str, list[tuple[str, int]]]:
    """Symbols of files on disk, from ctags in batch mode."""
    if not rel_paths:
        return {}
    out = subprocess.run(
        ["ctags", "--output-format=json", "--fields=*", "--extras=-{anonymous}", "-f", "-", *rel_paths],
        cwd=root, capture_output=True, check=False,
    ).stdout
    syms: dict[str, list[tuple[str, int]]] = {}
    for line in out.splitlines():
        m = json.loads(line)
        if m.get("_type") == "tag" and isinstance(m.get("line"), int):
            syms.setdefault(m["path"], []).append((m["name"], m["line"]))
    return syms


def docs_from_dir(root: str, repo: str, max_file_size=2097152, max_trigrams=20000) -> list[Doc]:
    docs = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                continue
            rel = os.path.relpath(full, root)
            content = open(full, "rb").read()
            skip = skipped(content, len(content), max_file_size, max_trigrams)
            docs.append(Doc(repo, rel, b"" if skip else content, ["HEAD"], skip, "skipped" if skip else detect(rel, content)))
    syms = ctags_symbols(root, [d.path for d in docs if wants_symbols(d.language) and d.content])
    for d in docs:
        d.symbols = syms.get(d.path, [])
    return docs


def _git(repo_dir: str, *args) -> bytes:
    return subprocess.run(["git", *args], cwd=repo_dir, capture_output=True, check=True).stdout


def docs_from_git(repo_dir: str, repo: str, branches: list[str], scratch: str, max_file_size=2097152, max_trigrams=20000) -> list[Doc]:
    """One Doc per (path, blob) over the given full ref names (the first is the default)."""
    by_key: dict[tuple[str, str], Doc] = {}
    for ref in branches:
        for rec in _git(repo_dir, "ls-tree", "-r", "-z", ref).split(b"\0"):
            if not rec:
                continue
            meta, _, path = rec.partition(b"\t")
            mode, kind, sha = meta.split()
            if kind != b"blob" or mode == b"120000":
                continue
            key = (path.decode(), sha.decode())
            if key in by_key:
                by_key[key].branches.append(ref)
                continue
            content = _git(repo_dir, "cat-file", "blob", sha.decode())
            skip = skipped(content, len(content), max_file_size, max_trigrams)
            by_key[key] = Doc(repo, key[0], b"" if skip else content, [ref], skip, "skipped" if skip else detect(key[0], content))
    # Symbols: write each distinct blob to a scratch tree and run ctags over it.
    for i, d in enumerate(by_key.values()):
        if not wants_symbols(d.language) or not d.content:
            continue
        target = os.path.join(scratch, str(i), d.path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(d.content)
        d.symbols = ctags_symbols(os.path.join(scratch, str(i)), [d.path]).get(d.path, [])
    return list(by_key.values())


def _compile(pattern: str, case_sensitive: bool):
    """RE2, or for syntax RE2 lacks the `regex` module in bytes mode (test patterns are ASCII)."""
    o = re2.Options()
    o.case_sensitive = case_sensitive
    o.log_errors = False
    try:
        return re2.compile("(?m)" + pattern, o)
    except re2.error:
        return regex.compile(pattern.encode(), regex.MULTILINE | (0 if case_sensitive else regex.IGNORECASE))


def _line_bounds(content: bytes, line: int) -> tuple[int, int]:
    lines = content.split(b"\n")
    start = sum(len(l) + 1 for l in lines[: line - 1])
    return start, start + len(lines[line - 1])


#: Tree node kind -> number of arguments (None: two or more subtrees).
ARITY = {
    "and": None, "or": None, "not": 1, "false": 0,
    "text": 1, "regex": 1, "file": 1, "sym": 1, "repo": 1, "lang": 1, "rev": 1,
    "reposet": 1, "context": 1, "archived": 1, "fork": 1, "visibility": 1,
}


def check_tree(t) -> None:
    """Raise ValueError naming the first malformed node of `t` (a typo in a test table)."""
    stack = [t]
    while stack:
        n = stack.pop()
        if not isinstance(n, tuple) or not n or n[0] not in ARITY:
            raise ValueError(f"not a query tree node: {n!r}")
        arity = ARITY[n[0]]
        if arity is None:
            if len(n) < 3:
                raise ValueError(f"{n[0]} needs two or more subtrees: {n!r}")
            stack.extend(n[1:])
        elif len(n) != arity + 1:
            raise ValueError(f"{n[0]} takes {arity} argument(s): {n!r}")
        elif n[0] == "not":
            stack.append(n[1])


def walk_tree(t):
    """Yield `t` and every node below it."""
    yield t
    if t[0] in ("and", "or"):
        for c in t[1:]:
            yield from walk_tree(c)
    elif t[0] == "not":
        yield from walk_tree(t[1])


def _never(t) -> bool:
    """`t` is false for every document, whatever its leaves say."""
    if t[0] == "false":
        return True
    if t[0] == "not":
        return _always(t[1])
    if t[0] == "and":
        return any(_never(c) for c in t[1:])
    if t[0] == "or":
        return all(_never(c) for c in t[1:])
    return False


def _always(t) -> bool:
    """`t` is true for every document, whatever its leaves say."""
    if t[0] == "not":
        return _never(t[1])
    if t[0] == "and":
        return all(_always(c) for c in t[1:])
    if t[0] == "or":
        return any(_always(c) for c in t[1:])
    return False


class Oracle:
    def __init__(self, docs: list[Doc], repos: dict[str, dict] | None = None, contexts=None):
        self.docs = docs
        self.repos = repos or {}
        self.contexts = contexts or {}

    def _repo_attr(self, repo: str, key: str, default=False):
        return self.repos.get(repo, {}).get(key, default)

    def _true(self, t, d: Doc, cs: bool) -> bool:
        kind = t[0]
        if kind == "and":
            return all(self._true(c, d, cs) for c in t[1:])
        if kind == "or":
            return any(self._true(c, d, cs) for c in t[1:])
        if kind == "not":
            return not self._true(t[1], d, cs)
        if kind == "false":
            return False
        if kind in ("text", "regex"):
            return bool(self._content_spans(t, d, cs))
        if kind == "file":
            return _compile(t[1], cs).search(d.path.encode()) is not None
        if kind == "sym":
            return bool(self._symbol_spans(t, d, cs))
        if kind == "lang":
            return d.language.lower() == t[1].lower()
        if kind == "rev":
            return any(t[1] == "*" or t[1] in b for b in d.branches)
        if kind == "repo":
            return _compile(t[1], False).search(d.repo.encode()) is not None
        if kind == "reposet":
            return d.repo in t[1]
        if kind == "context":
            return d.repo in self.contexts[t[1]]
        if kind in ("archived", "fork"):
            flag = self._repo_attr(d.repo, kind)
            return {"yes": True, "no": not flag, "only": flag}[t[1]]
        if kind == "visibility":
            public = self._repo_attr(d.repo, "public", True)
            return {"any": True, "public": public, "private": not public}[t[1]]
        raise TypeError(t)

    def _content_spans(self, t, d: Doc, cs: bool) -> list[tuple[int, int]]:
        if not d.content:
            return []
        pattern = t[1] if t[0] == "regex" else re2.escape(t[1])
        return [m.span() for m in _compile(pattern, cs).finditer(d.content)]

    def _symbol_spans(self, t, d: Doc, cs: bool) -> list[tuple[int, int]]:
        rx = _compile(t[1], cs)
        spans = []
        for name, line in d.symbols:
            if rx.search(name.encode()) is None:
                continue
            a, b = _line_bounds(d.content, line)
            at = d.content.find(name.encode(), a, b + 1)
            if at >= 0:
                spans.append((at, at + len(name.encode())))
        return spans

    def _positive(self, t, negated=False):
        """The leaves of `t` under an even number of negations, outside never-true ANDs."""
        if _never(t) or t[0] == "or" and _always(t):
            return
        if t[0] in ("and", "or"):
            for c in t[1:]:
                yield from self._positive(c, negated)
        elif t[0] == "not":
            yield from self._positive(t[1], not negated)
        elif not negated:
            yield t

    def search(self, tree, *, case_sensitive: bool = False):
        """Spans and files the query whose tree is `tree` must find (see the module docstring)."""
        check_tree(tree)
        cs = case_sensitive
        has_rev = any(n[0] == "rev" for n in walk_tree(tree))
        positive = list(self._positive(tree))
        rev_patterns = [x[1] for x in positive if x[0] == "rev"]
        spans, files = set(), set()
        for d in self.docs:
            branches = list(d.branches)
            if not has_rev:
                if branches[0] != self._default(d):
                    continue
                branches = branches[:1]
            elif rev_patterns:
                branches = [b for b in branches if any(p == "*" or p in b for p in rev_patterns)]
            if not self._true(tree, d, cs):
                continue
            key = (d.repo, d.path, tuple(branches))
            files.add(key)
            for leaf in positive:
                if leaf[0] in ("text", "regex"):
                    spans.update(key + s for s in self._content_spans(leaf, d, cs))
                elif leaf[0] == "sym":
                    spans.update(key + s for s in self._symbol_spans(leaf, d, cs))
        return spans, files

    def _default(self, d: Doc) -> str:
        return self.repos.get(d.repo, {}).get("default", "HEAD")


def engine_spans(resp: dict):
    """The same (repo, path, branches, start, end) spans and file keys from an engine response."""
    spans, files = set(), set()
    for f in resp["files"]:
        key = (f["repository"], f["fileName"]["text"], tuple(f["branches"]))
        files.add(key)
        for ch in f["chunks"]:
            for r in ch["matchRanges"]:
                spans.add(key + (r["start"]["byteOffset"], r["end"]["byteOffset"]))
    return spans, files


def assert_engine_equals_oracle(index_dir: str, oracle, queries) -> None:
    """Every (query, flags, tree) of `queries`: the engine over `index_dir` finds exactly the
    spans `oracle` finds for the tree (parsed from the table, not by our parser)."""
    from codesearch.search.engine import Searcher

    s = Searcher(index_dir)
    try:
        for query, flags, tree in queries:
            want = oracle.search(tree, case_sensitive=flags.get("case_sensitive", False))
            assert engine_spans(s.search(query, matches=10**6, **flags)) == want, query
    finally:
        s.close()
