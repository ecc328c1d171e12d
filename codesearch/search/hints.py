"""Why a search found nothing, and the query that would fix it.

A query that returns zero files is often a typo (``lang:pyhton``), a repository name the caller
cannot see or mistyped, or one filter too many. Sourcebot answers such a query with an empty
list and nothing else; we add a ``hints`` list to the answer (`/api/search`, the ``final``
event of `/api/stream_search`) that the search page shows. Each hint is::

    {"kind": "unknownLanguage" | "languageNotIndexed" | "unknownRepository" | "filterEmptied",
     "term": "lang:pyhton",            # the part of the query the hint is about, as written
     "message": "no language named pyhton; did you mean Python?",
     "suggestions": [{"label": "Python", "query": "lang:Python foo"}]}   # fixed queries

Everything here is plain Python over the parsed query (no Ray): the caller gives the names of
the repositories the caller may see (never others: a hint must not reveal a hidden repository)
and a `has_results(query)` function that runs one small search as that caller. The names are
asked for (`repo_names`, a function) only when the query has a ``repo:`` term to judge: reading
them costs a store read of every repository (18 ms for 600), which a query without one must not
pay.

What hints cost: the parse of the query and, for a query with filters, up to `MAX_RETRIES`
searches (and one per known ``lang:``). That is why the search routes compute them only for a
caller that asks (``withHints``, docs/http-api.md#hints-error-positions-suggestions): the web
page does, an API client that does not ask pays nothing for them.

Only queries whose tree has no ``or`` get the "filter that emptied it" hint (each prefix term
is dropped in turn and the rest searched again, at most `MAX_RETRIES` searches): with an ``or``
the term that matters is ambiguous, and the searches would multiply.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable
from typing import Any

from codesearch.errors import QueryParseError
from codesearch.query import ast
from codesearch.query.parser import PREFIXES, parse

#: At most this many extra searches to find the filter that emptied a result.
MAX_RETRIES = 4
#: At most this many close names in a "did you mean".
MAX_SUGGESTIONS = 3

#: Prefix terms at the top level of a query: start of query or after whitespace, an optional
#: dash, a known prefix name, a quoted or bare value. Group 0 is the term as written.
_TERM = re.compile(r'(?:(?<=\s)|^)(-?)([a-z]+):("(?:[^"\\]|\\.)*"|[^\s"]+)')
#: Terms whose removal can widen a result (content terms are what is searched for).
_FILTERS = {"file", "lang", "repo", "rev", "sym", "archived", "fork", "visibility", "context", "reposet"}

#: Popular languages first when several names fit what was typed.
POPULAR = (
    "Python",
    "JavaScript",
    "TypeScript",
    "Go",
    "Java",
    "C",
    "C++",
    "C#",
    "Rust",
    "Ruby",
    "PHP",
    "Shell",
    "Kotlin",
    "Swift",
    "Scala",
    "HTML",
    "CSS",
    "Markdown",
    "JSON",
    "YAML",
    "SQL",
    "Dockerfile",
    "Makefile",
    "TOML",
    "TSX",
    "Vue",
    "Lua",
    "Perl",
    "R",
    "Haskell",
    "Elixir",
    "Erlang",
    "Dart",
)


@functools.lru_cache(maxsize=1)
def language_names() -> tuple[str, ...]:
    """The language names `lang:` understands: GitHub Linguist's (what the index records, see
    `codesearch.index.language`). enry has no list of its names, so the list is Pygments'
    lexer names that enry knows as Linguist languages, plus the popular ones."""
    import enry
    import pygments.lexers

    names = {n for n in POPULAR}
    for lexer in pygments.lexers.get_all_lexers():
        name = lexer[0]
        if enry.get_language_type(name) != "unknown":
            names.add(name)
    return tuple(sorted(names, key=str.lower))


def canonical_language(name: str) -> str | None:
    """The Linguist spelling of `name` (matched case-insensitively), or None when unknown."""
    want = name.lower()
    for known in language_names():
        if known.lower() == want:
            return known
    return None


def close_languages(name: str, n: int = MAX_SUGGESTIONS) -> list[str]:
    """Known language names close to `name` (a typo, a prefix, another spelling)."""
    by_lower = {k.lower(): k for k in language_names()}
    want = name.lower()
    out = [by_lower[m] for m in difflib.get_close_matches(want, list(by_lower), n=n, cutoff=0.6)]
    for k in language_names():
        if len(out) >= n:
            break
        if k not in out and len(want) >= 2 and k.lower().startswith(want):
            out.append(k)
    return out[:n]


def close_names(name: str, candidates: list[str], n: int = MAX_SUGGESTIONS) -> list[str]:
    """Names among `candidates` that look like `name`: those containing it, then the closest
    by edit similarity (on the whole name and on its last path segment)."""
    want = name.lower().strip("^$")
    out: list[str] = [c for c in candidates if want and want in c.lower()][:n]
    if len(out) < n:
        tails: dict[str, str] = {}
        for c in candidates:
            tails.setdefault(c.lower().rsplit("/", 1)[-1], c)
        for m in difflib.get_close_matches(want, list(tails), n=n, cutoff=0.5):
            if tails[m] not in out:
                out.append(tails[m])
        lowers = {c.lower(): c for c in candidates}
        for m in difflib.get_close_matches(want, list(lowers), n=n, cutoff=0.5):
            if lowers[m] not in out:
                out.append(lowers[m])
    return out[:n]


def _terms(query: str) -> list[tuple[re.Match[str], str]]:
    """The top-level prefix terms of `query` with their canonical prefix (aliases resolved),
    outside quoted strings and groups."""
    out = []
    depth = 0
    quoted = False
    i = 0
    # Positions outside quotes and brackets: a term found elsewhere is part of another term.
    outside = bytearray(len(query) + 1)
    while i < len(query):
        c = query[i]
        if quoted:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            outside[i] = 1
        i += 1
    for m in _TERM.finditer(query):
        written = m.group(2)
        if written in PREFIXES and outside[m.start()]:
            out.append((m, PREFIXES[written]))
    return out


def _value(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':
        return re.sub(r'\\(["\\])', r"\1", raw[1:-1])
    return raw


def _quote(value: str) -> str:
    return value if re.fullmatch(r'[^\s"()]+', value) else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _replace(query: str, m: re.Match[str], new: str) -> str:
    """`query` with the term `m` replaced by `new` (or dropped when `new` is empty)."""
    before, after = query[: m.start()], query[m.end() :]
    if not new:
        return (before.rstrip() + " " + after.lstrip()).strip()
    return before + new + after


def _has_or(node: ast.Node) -> bool:
    return any(isinstance(n, ast.Or) for n in ast.walk(node))


def zero_result_hints(
    query: str,
    *,
    is_regex: bool = False,
    case_sensitive: bool = False,
    repo_names: Callable[[], list[str] | None] | None = None,
    has_results: Callable[[str], bool] | None = None,
) -> list[dict[str, Any]]:
    """Hints for a query that found no file (see the module docstring). `repo_names()`: the
    names of the repositories the caller may see, called at most once and only for a query with
    a ``repo:`` term (None, or a None answer: do not judge ``repo:`` terms); `has_results(query)`:
    whether a query finds anything for the caller (None: no re-search)."""
    try:
        tree = parse(query, is_regex=is_regex, case_sensitive=case_sensitive)
    except QueryParseError:
        return []

    @functools.cache
    def visible_names() -> list[str] | None:
        return repo_names() if repo_names is not None else None

    terms = _terms(query)
    hints: list[dict[str, Any]] = []
    explained: set[int] = set()  # terms (by start) a hint already names

    def term_of(kind: str, value: str) -> re.Match[str] | None:
        for m, k in terms:
            if k == kind and not m.group(1) and _value(m.group(3)) == value:
                return m
        return None

    leaves = list(ast.positive_leaves(tree))
    for leaf in leaves:
        if isinstance(leaf, ast.Language):
            m = term_of("lang", leaf.name)
            written = m.group(0) if m else f"lang:{leaf.name}"
            known = canonical_language(leaf.name)
            if known is None:
                close = close_languages(leaf.name)
                msg = f"no language named {leaf.name}"
                if close:
                    msg += "; did you mean " + " or ".join(close) + "?"
                sugg = [
                    {"label": c, "query": _replace(query, m, f"{m.group(2)}:{_quote(c)}") if m else None} for c in close
                ]
                hints.append({"kind": "unknownLanguage", "term": written, "message": msg, "suggestions": sugg})
                if m:
                    explained.add(m.start())
            elif has_results is not None and not has_results(f"lang:{_quote(known)}"):
                rest = _replace(query, m, "") if m else ""
                hints.append(
                    {
                        "kind": "languageNotIndexed",
                        "term": written,
                        "message": f"no file you can search is written in {known}",
                        "suggestions": [{"label": f"search without {written}", "query": rest}] if rest else [],
                    }
                )
                if m:
                    explained.add(m.start())
        elif isinstance(leaf, ast.Repo) and repo_names is not None:
            try:
                rx = re.compile(leaf.pattern, re.I)
            except re.error:
                continue  # RE2 syntax Python lacks: no judgement
            visible = visible_names()
            if visible is None or any(rx.search(n) for n in visible):
                continue
            m = term_of("repo", leaf.pattern)
            written = m.group(0) if m else f"repo:{leaf.pattern}"
            close = close_names(leaf.pattern, visible)
            msg = f"no repository you can search matches {written}"
            if close:
                msg += "; did you mean " + " or ".join(close) + "?"
            sugg = [
                {
                    "label": c,
                    "query": _replace(query, m, f"{m.group(2)}:{_quote('^' + re.escape(c) + '$')}") if m else None,
                }
                for c in close
            ]
            hints.append({"kind": "unknownRepository", "term": written, "message": msg, "suggestions": sugg})
            if m:
                explained.add(m.start())

    if has_results is None or _has_or(tree) or hints:
        return hints
    retries = 0
    for m, kind in terms:
        if kind not in _FILTERS or m.start() in explained or retries >= MAX_RETRIES:
            continue
        rest = _replace(query, m, "")
        if not rest:
            continue
        try:
            parse(rest, is_regex=is_regex, case_sensitive=case_sensitive)
        except QueryParseError:
            continue
        retries += 1
        if has_results(rest):
            hints.append(
                {
                    "kind": "filterEmptied",
                    "term": m.group(0),
                    "message": f"{m.group(0)} left no results: the query finds files without it",
                    "suggestions": [{"label": f"search without {m.group(0)}", "query": rest}],
                }
            )
    return hints
