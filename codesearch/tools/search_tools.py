"""Tools answered from the index: `grep`, `glob` (across repos), `find_symbol_definitions`,
`find_symbol_references` (output formats: docs/mcp-tools.md#tools).

Tool arguments become a query of the query language (docs/query-language.md#syntax) built from quoted terms, so no
argument can change the query's structure: `quote` escapes quotes and backslashes the way the
parser decodes them, and `literal_regex` escapes a name for RE2. A `ref` that the index does not
hold (a commit, or a branch not configured for indexing) is answered by ``git grep`` over the
repository's git objects instead, so `grep` works at any ref of one repository.

Lines in results are the lines where a match starts, each cut at `MAX_LINE_CHARS`. With
`groupByRepo`, grep answers as Sourcebot's does: ``Found matches in N repositories:`` then
``  <repo>: X matches in Y files`` per repository (matches counted as matching lines, as in the
usual ``Found N matches`` header), for questions such as "which repositories use this?".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codesearch.app.context import ToolContext
from codesearch.errors import ToolInputError
from codesearch.globs import glob_to_regex
from codesearch.plurals import plural
from codesearch.store.models import Repo

MAX_LINE_CHARS = 2000
#: matching lines shown per file (the count in the header is of lines shown)
MAX_LINES_PER_FILE = 50
#: grep's `limit` (matching files) when not given: lines are shown, or only counted per repository
DEFAULT_GREP_FILES = 100
DEFAULT_GROUPED_FILES = 10_000
#: the search engine's match cap per requested file (grep's `limit` counts files)
_MATCHES_PER_FILE = 20
_MAX_MATCHES = 50_000


def quote(value: str) -> str:
    """`value` as a quoted term or prefix value of the query language."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


_RE_SPECIAL = set(".^$|?*+()[]{}\\")


def literal_regex(text: str) -> str:
    """A regex (RE2 and Python syntax) matching exactly `text`."""
    return "".join("\\" + c if c in _RE_SPECIAL else c for c in text)


def glob_path_regex(glob: str, under: str = "") -> str:
    """An anchored path regex for `glob` below directory `under` ('' = anywhere from the root).

    A glob without ``/`` matches a file name at any depth (``*.py``); a glob with ``/`` matches the
    path relative to `under` (``src/**/*.ts``)."""
    body = glob_to_regex(glob.lstrip("/"))
    body = body[len("(?s:") : -len(r")\Z")]  # glob_to_regex wraps an anchored body: keep the body
    prefix = "^" + (literal_regex(under) + "/" if under else "")
    if "/" not in glob.strip("/"):
        prefix += "(?:.*/)?"
    return prefix + body + "$"


@dataclass
class FileHits:
    repo: str
    path: str
    lines: list[tuple[int, str]] = field(default_factory=list)  # (line number, text)
    more: int = 0  # matching lines not shown


def hits_from_response(resp: dict[str, Any]) -> list[FileHits]:
    """Per file, the lines where matches start (from the response's chunks), in response order."""
    out = []
    for f in resp.get("files", []):
        hit = FileHits(f.get("repository", ""), f["fileName"]["text"])
        seen = set()
        for chunk in f.get("chunks", []):
            first = chunk["contentStart"]["lineNumber"]
            lines = chunk["content"].split("\n")
            for r in chunk.get("matchRanges", []):
                n = r["start"]["lineNumber"]
                if n in seen:
                    continue
                seen.add(n)
                i = n - first
                text = lines[i] if 0 <= i < len(lines) else ""
                hit.lines.append((n, text.rstrip("\r")))
        hit.lines.sort()
        if len(hit.lines) > MAX_LINES_PER_FILE:
            hit.more = len(hit.lines) - MAX_LINES_PER_FILE
            hit.lines = hit.lines[:MAX_LINES_PER_FILE]
        out.append(hit)
    return out


def cut(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " … (line cut)"


def render_hits(hits: list[FileHits], noun: str, truncated_hint: str | None) -> str:
    """``Found N <noun>s in M files`` (one: ``1 <noun> in 1 file``) then ``[repo] path:`` groups
    of ``  line: text``."""
    if not hits:
        return "No files found"
    n = sum(len(h.lines) + h.more for h in hits)
    out = [f"Found {plural(n, noun)} in {plural(len(hits), 'file')}"]
    for h in hits:
        out.append("")
        out.append(f"[{h.repo}] {h.path}:")
        out.extend(f"  {ln}: {cut(text)}" for ln, text in h.lines)
        if h.more:
            out.append(f"  … {plural(h.more, 'more matching line')} in this file")
    if truncated_hint:
        out += ["", truncated_hint]
    return "\n".join(out)


def with_missing(text: str, resp: dict[str, Any]) -> str:
    """`text`, followed by what the search could not read (``missingRepositories``: a shard of
    the index its checksum refused, or lost), so that a model does not take an answer without
    those repositories' files for a complete one."""
    if "missingRepositories" not in resp:
        return text
    names = [str(r.get("name")) for r in resp["missingRepositories"] if r.get("name")]
    whose = f": files of {', '.join(names)} were not searched" if names else ""
    return (
        f"{text}\n\n(Incomplete: part of the index could not be read{whose}. "
        "The service is rebuilding it; search again in a minute.)"
    )


# ---------------------------------------------------------------------- grep


def _ref_filter(tc: ToolContext, repo: Repo, ref: str) -> tuple[str | None, str | None]:
    """How to search `repo` at `ref` with the index: (the full indexed ref name, its commit), or
    (None, None) when the index does not hold that ref (then git answers)."""
    revs = dict(repo.indexed_revisions or {})
    for full in (ref, f"refs/heads/{ref}", f"refs/tags/{ref}"):
        if full in revs:
            return full, revs[full]
    if re.fullmatch(r"[0-9a-fA-F]{7,40}", ref):
        for full, sha in revs.items():
            if sha and sha.lower().startswith(ref.lower()):
                return full, sha
    return None, None


def grep(
    tc: ToolContext,
    pattern: str,
    path: str | None = None,
    include: str | None = None,
    repo: str | None = None,
    ref: str | None = None,
    limit: int | None = None,
    group_by_repo: bool = False,
) -> str:
    from codesearch.git.paths import check_dir, check_ref

    limit = limit or (DEFAULT_GROUPED_FILES if group_by_repo else DEFAULT_GREP_FILES)
    render = render_repo_counts if group_by_repo else render_hits
    if not pattern:
        raise ToolInputError("pattern is empty: give a regular expression to search for")
    under = check_dir(path) if path else ""
    row = tc.repo(repo) if repo else None
    if ref is not None:
        check_ref(ref)
    full_ref = None
    if ref and row is not None:
        full_ref, _sha = _ref_filter(tc, row, ref)
        if full_ref is None:
            return _git_grep(tc, row, ref, pattern, under, include, limit, render)
    terms = [quote(pattern)]
    if row is not None:
        terms.append("repo:" + quote("^" + literal_regex(row.name) + "$"))
    if include:
        terms.append("file:" + quote(glob_path_regex(include, under)))
    elif under:
        terms.append("file:" + quote("^" + literal_regex(under) + "/"))
    if ref:
        terms.append("rev:" + quote(full_ref or ref))
    resp = tc.search(
        " ".join(terms),
        regex=True,
        case_sensitive=True,
        matches=min(_MAX_MATCHES, max(limit * _MATCHES_PER_FILE, 1000)),
    )
    files = resp.get("files", [])
    if ref:
        files = [f for f in files if _on_ref(f.get("branches") or [], full_ref, ref)]
        resp = {**resp, "files": files}
    hits = hits_from_response(resp)
    truncated = len(hits) > limit or not resp.get("isSearchExhaustive", True)
    hint = None
    if truncated:
        hint = (
            f"(Results truncated: showing {plural(min(len(hits), limit), 'file')}; there may be more. "
            "Narrow the search with path, include or repo, or raise limit.)"
        )
    return with_missing(render(hits[:limit], "match", hint), resp)


def render_repo_counts(hits: list[FileHits], _noun: str, truncated_hint: str | None) -> str:
    """grep with `groupByRepo`: ``Found matches in N repositories:`` then ``  <repo>: X matches
    in Y files`` per repository, in the order the repositories first appear."""
    if not hits:
        return "No files found"
    counts: dict[str, list[int]] = {}
    for h in hits:
        c = counts.setdefault(h.repo, [0, 0])
        c[0] += len(h.lines) + h.more
        c[1] += 1
    out = [f"Found matches in {plural(len(counts), 'repository', 'repositories')}:"]
    for name, (matches, files) in counts.items():
        out.append(f"  {name}: {plural(matches, 'match')} in {plural(files, 'file')}")
    if truncated_hint:
        out += ["", truncated_hint]
    return "\n".join(out)


def _on_ref(branches: list[str], full_ref: str | None, ref: str) -> bool:
    if full_ref:
        return full_ref in branches
    return any(b == ref or b.endswith("/" + ref) for b in branches)


def _git_grep(
    tc: ToolContext,
    row: Repo,
    ref: str,
    pattern: str,
    under: str,
    include: str | None,
    limit: int,
    render: Callable[[list[FileHits], str, str | None], str] = render_hits,
) -> str:
    from codesearch.git.grep import grep as git_grep

    found, truncated = git_grep(tc.git_dir(row), ref, pattern, path=under, include=include, max_files=limit)
    by_file: dict[str, FileHits] = {}
    for h in found:
        fh = by_file.setdefault(h.path, FileHits(row.name, h.path))
        if len(fh.lines) < MAX_LINES_PER_FILE:
            fh.lines.append((h.line, h.text))
        else:
            fh.more += 1
    hint = None
    if truncated:
        hint = (
            f"(Results truncated: showing {plural(len(by_file), 'file')}. Narrow the search with path or include, "
            "or raise limit.)"
        )
    return render(list(by_file.values()), "match", hint)


# ---------------------------------------------------------------------- symbols


def find_symbol_definitions(tc: ToolContext, symbol: str, repo: str) -> str:
    row = tc.repo(repo)
    symbol = _symbol_name(symbol)
    query = "sym:" + quote("^" + literal_regex(symbol) + "$") + " repo:" + quote("^" + literal_regex(row.name) + "$")
    resp = tc.search(query, regex=True, case_sensitive=True, matches=5000)
    hits = hits_from_response(resp)
    if not hits:
        return with_missing(
            f"No definition of {symbol!r} found in {row.name}. Definitions come from the symbol index (ctags); "
            "try find_symbol_references or grep for other spellings.",
            resp,
        )
    return with_missing(
        render_hits(hits, "definition", None if resp.get("isSearchExhaustive", True) else "(More definitions exist.)"),
        resp,
    )


def find_symbol_references(tc: ToolContext, symbol: str, repo: str) -> str:
    row = tc.repo(repo)
    symbol = _symbol_name(symbol)
    word = literal_regex(symbol)
    # \b only works next to word characters: a symbol like `operator+` is matched as typed there
    left = r"\b" if re.match(r"\w", symbol) else ""
    right = r"\b" if re.search(r"\w$", symbol) else ""
    query = quote(left + word + right) + " repo:" + quote("^" + literal_regex(row.name) + "$")
    resp = tc.search(query, regex=True, case_sensitive=True, matches=5000)
    hits = hits_from_response(resp)
    if not hits:
        return with_missing(f"No references to {symbol!r} found in {row.name}.", resp)
    hint = (
        None
        if resp.get("isSearchExhaustive", True)
        else "(Results truncated: more references exist; use grep with path or include to narrow.)"
    )
    return with_missing(render_hits(hits, "reference", hint), resp)


def _symbol_name(symbol: str) -> str:
    symbol = (symbol or "").strip()
    if not symbol:
        raise ToolInputError("symbol is empty: give a symbol name such as a function or class name")
    if len(symbol) > 500 or "\n" in symbol:
        raise ToolInputError("symbol must be one name on one line (at most 500 characters)")
    return symbol


# ---------------------------------------------------------------------- glob


def glob(
    tc: ToolContext,
    pattern: str,
    path: str | None = None,
    repo: str | None = None,
    ref: str | None = None,
    limit: int = 100,
) -> str:
    """Files whose paths match `pattern`: from git (every file at `ref`) when `repo` is given,
    else from the index (indexed files of every visible repo's default branch)."""
    from codesearch.git.paths import check_dir, check_ref
    from codesearch.git.trees import list_files

    if not pattern or not pattern.strip("/"):
        raise ToolInputError("pattern is empty: give a glob such as **/*.py or src/{a,b}/*.ts")
    under = check_dir(path) if path else ""
    resp: dict[str, Any] = {}  # the index's answer, when the index is asked
    if ref is not None:
        check_ref(ref)
    rx = re.compile(glob_path_regex(pattern, under))
    groups: dict[str, list[str]] = {}
    truncated = False
    if repo:
        row = tc.repo(repo)
        paths = [p for p in list_files(tc.git_dir(row), ref or tc.default_ref(row), under) if rx.search(p)]
        truncated = len(paths) > limit
        if paths:
            groups[row.name] = paths[:limit]
    else:
        if ref:
            raise ToolInputError("ref needs repo: give the repository whose ref to list, or leave ref out")
        query = "file:" + quote(rx.pattern)
        resp = tc.search(query, regex=True, case_sensitive=True, matches=min(_MAX_MATCHES, limit * 2 + 10))
        for n, f in enumerate(resp.get("files", [])):
            if n >= limit:
                truncated = True
                break
            groups.setdefault(f["repository"], []).append(f["fileName"]["text"])
        truncated = truncated or not resp.get("isSearchExhaustive", True)
    total = sum(len(v) for v in groups.values())
    if not total:
        return with_missing(f'No files found matching "{pattern}"', resp)
    out = [f'Found {plural(total, "file")} matching "{pattern}":']
    for name in sorted(groups):
        out.append("")
        out.append(f"[{name}]")
        out.extend(f"  {p}" for p in sorted(groups[name]))
    if truncated:
        out += ["", f"(Results truncated at {plural(limit, 'file')}. Narrow the pattern or path, or raise limit.)"]
    return with_missing("\n".join(out), resp)
