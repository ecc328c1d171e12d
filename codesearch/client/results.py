"""Result objects of `codesearch.Client`: typed, iterable, and readable in Jupyter.

`SearchResult` wraps a ``POST /api/search`` response (the same dict whatever the back end):
iterating yields one `Match` per match range (repo, path, branch, line, column, text, language),
`.files` the `FileResult`s, `.to_pandas()` one row per match, and `_repr_html_` renders a table
with the matched text highlighted and linked to the file's page. Every string from a repository
is HTML-escaped: a file containing ``<script>`` shows as text.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # pandas ships no types (pandas-stubs is not among the dependencies): a DataFrame is Any to mypy
    from pandas import DataFrame  # type: ignore[import-untyped]

MATCH_COLUMNS = ["repo", "path", "branch", "line", "column", "text", "language"]
_HTML_ROWS = 200


@dataclass(frozen=True)
class Match:
    """One match: where it starts, and the line it starts on."""

    repo: str
    path: str
    branch: str
    line: int  # 1-based
    column: int  # 1-based, in characters
    text: str  # the whole line the match starts on
    language: str
    #: the match within `text`, as character offsets [start, end) (end cut at the line's end)
    span: tuple[int, int] = (0, 0)
    url: str = ""

    def row(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in MATCH_COLUMNS}


@dataclass
class FileResult:
    repo: str
    path: str
    language: str
    branches: list[str]
    url: str
    matches: list[Match] = field(default_factory=list)
    #: the whole file, when the search asked for it (`whole=True`)
    content: str | None = None


def _matches_of(f: dict[str, Any]) -> list[Match]:
    branch = (f.get("branches") or [""])[0]
    out: list[Match] = []
    for chunk in f.get("chunks", []):
        lines = chunk["content"].split("\n")
        first = chunk["contentStart"]["lineNumber"]
        for r in chunk.get("matchRanges", []):
            start, end = r["start"], r["end"]
            i = start["lineNumber"] - first
            text = lines[i].rstrip("\r") if 0 <= i < len(lines) else ""
            a = start["column"] - 1
            b = end["column"] - 1 if end["lineNumber"] == start["lineNumber"] else len(text)
            out.append(
                Match(
                    f["repository"],
                    f["fileName"]["text"],
                    branch,
                    start["lineNumber"],
                    start["column"],
                    text,
                    f.get("language", ""),
                    (a, max(a, b)),
                    f.get("webUrl", ""),
                )
            )
    return out


class SearchResult:
    """The answer to one search (or one streamed chunk of it)."""

    def __init__(self, response: dict[str, Any], query: str = ""):
        self.response = response
        self.query = query
        self.files = [
            FileResult(
                f["repository"],
                f["fileName"]["text"],
                f.get("language", ""),
                list(f.get("branches") or []),
                f.get("webUrl", ""),
                _matches_of(f),
                f.get("content"),
            )
            for f in response.get("files", [])
        ]

    @property
    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.response.get("stats", {})
        return stats

    @property
    def exhaustive(self) -> bool:
        """False when more matches exist than were returned (raise `matches` to see them)."""
        return bool(self.response.get("isSearchExhaustive", True))

    @property
    def matches(self) -> list[Match]:
        return [m for f in self.files for m in f.matches]

    def __iter__(self) -> Iterator[Match]:
        return iter(self.matches)

    def __len__(self) -> int:
        return len(self.matches)

    def __repr__(self) -> str:
        more = "" if self.exhaustive else ", more exist"
        return f"<SearchResult {self.query!r}: {len(self)} matches in {len(self.files)} files{more}>"

    def to_pandas(self) -> DataFrame:
        """One row per match: repo, path, branch, line, column, text, language (needs pandas:
        ``pip install codesearch-ray[notebook]``)."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("to_pandas needs pandas: pip install 'codesearch-ray[notebook]'") from e
        return pd.DataFrame([m.row() for m in self.matches], columns=MATCH_COLUMNS)

    def _repr_html_(self) -> str:
        e = html.escape
        rows = []
        for m in self.matches[:_HTML_ROWS]:
            a, b = m.span
            text = f"{e(m.text[:a])}<mark>{e(m.text[a:b])}</mark>{e(m.text[b:])}"
            where = f'<a href="{e(m.url, quote=True)}">{e(m.path)}</a>' if m.url else e(m.path)
            rows.append(
                f"<tr><td>{e(m.repo)}</td><td>{where}</td><td>{m.line}</td>"
                f"<td style='text-align:left'><code>{text}</code></td><td>{e(m.language)}</td></tr>"
            )
        more = len(self.matches) - _HTML_ROWS
        foot = f"<p>… and {more} more matches (use .to_pandas() for all)</p>" if more > 0 else ""
        more_exist = "" if self.exhaustive else " (more exist: raise <code>matches</code>)"
        return (
            f"<p><b>{len(self)}</b> matches in <b>{len(self.files)}</b> files for <code>{e(self.query)}</code>"
            f"{more_exist}</p><table><thead><tr><th>repo</th><th>path</th><th>line</th><th>text</th>"
            f"<th>language</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{foot}"
        )


@dataclass(frozen=True)
class Repo:
    name: str
    display_name: str = ""
    code_host_type: str = ""
    url: str = ""
    default_branch: str | None = None
    indexed_at: str | None = None


class RepoList(list[Repo]):
    """A list of `Repo`s that renders as a table."""

    def to_pandas(self) -> DataFrame:
        import pandas as pd

        return pd.DataFrame([r.__dict__ for r in self])

    def _repr_html_(self) -> str:
        e = html.escape
        rows = "".join(
            f"<tr><td>{e(r.name)}</td><td>{e(r.code_host_type)}</td><td>{e(r.default_branch or '')}</td>"
            f"<td>{e(r.indexed_at or '')}</td></tr>"
            for r in self
        )
        return (
            f"<table><thead><tr><th>repo</th><th>host</th><th>default branch</th><th>indexed</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )


@dataclass(frozen=True)
class FileContent:
    repo: str
    path: str
    ref: str
    text: str
    language: str = ""

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return (
            f"<p><b>{html.escape(self.repo)}</b> {html.escape(self.path)} @ {html.escape(self.ref)}</p>"
            f"<pre>{html.escape(self.text)}</pre>"
        )


@dataclass(frozen=True)
class TreeEntry:
    path: str
    is_dir: bool
    depth: int


@dataclass(frozen=True)
class Commit:
    hash: str
    date: str
    message: str
    author_name: str
    author_email: str
    body: str = ""
    refs: tuple[str, ...] = ()


class Explanation(dict[str, Any]):
    """The parsed query, its plan, and per shard the candidate documents and their cost."""

    def __repr__(self) -> str:
        lines = [
            f"query: {self['query']}",
            f"plan:  {self['plan']}",
            f"candidates: {self['candidates']} of {self['documents']} documents"
            f"{' (default branch only)' if self.get('defaultBranchOnly') else ''}",
        ]
        for s in self.get("shards", []):
            state = "skipped" if s["skipped"] else f"{s['candidates']}/{s['documents']} candidates"
            lines.append(
                f"  {s['shard']}: {state}, {s['trigramLookups']} trigram lookups, "
                f"{s['indexBytesLoaded']} index bytes, {s['durationNs'] / 1e6:.2f} ms"
            )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(repr(self))}</pre>"
