"""Presentation: ranked file matches → the JSON shape of ``POST /api/search`` (docs/http-api.md#search).

Only the files that survive ranking and the `matches` cap are turned into chunks, so the cost
of presentation follows the size of the answer, not of the search.

Positions: ``byteOffset`` is 0-based in bytes, ``lineNumber`` 1-based, ``column`` 1-based in
characters (UTF-8 code points; an invalid byte counts as one character).
"""

from __future__ import annotations

import datetime
import urllib.parse
from typing import Any

import numpy as np

from codesearch.index.sources import RepoInfo
from codesearch.search.document import FileMatch

_LEAD = np.ones(256, dtype=bool)
_LEAD[0x80:0xC0] = False  # UTF-8 continuation bytes do not start a character


def iso_time(unix: int) -> str:
    """Unix seconds as the API writes times: ISO 8601 in UTC, to the second (``2024-05-01T12:00:00Z``)."""
    return datetime.datetime.fromtimestamp(unix, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def short_ref(ref: str) -> str:
    for prefix in ("refs/heads/", "refs/tags/"):
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return ref


def web_url(public_url: str, repo: RepoInfo, branch: str, path: str) -> str:
    """This service's page of a file: ``<public URL>/browse/<repo>@<branch>/-/blob/<path>``."""
    q = urllib.parse.quote
    return f"{public_url.rstrip('/')}/browse/{q(repo.name)}@{q(short_ref(branch), safe='')}/-/blob/{q(path)}"


def external_url(repo: RepoInfo, branch: str, path: str) -> str:
    if not repo.file_url_template:
        return ""
    return repo.file_url_template.replace("{branch}", urllib.parse.quote(short_ref(branch), safe="/")).replace(
        "{path}", urllib.parse.quote(path)
    )


class _Lines:
    """Line and column arithmetic over one file's content."""

    def __init__(self, content: bytes, starts: np.ndarray):
        self.content = content
        self.starts = starts

    def lines_of(self, offsets: list[int]) -> list[int]:
        """The 0-based line index of each byte offset, in one lookup: a file's ranges are
        presented together (one `searchsorted` per offset was most of what presenting a search
        cost)."""
        at = self.starts.searchsorted(np.asarray(offsets, dtype=self.starts.dtype), side="right") - 1
        found: list[int] = np.maximum(at, 0).tolist()
        return found

    def line_end(self, line: int) -> int:
        """Offset of the end of a line, without its newline."""
        if line + 1 < len(self.starts):
            return int(self.starts[line + 1]) - 1
        n = len(self.content)
        return n - 1 if n and self.content[n - 1] == 10 else n

    def position_on(self, offset: int, line: int) -> dict[str, int]:
        """The API position of `offset`, which lies on `line` (0-based)."""
        start = int(self.starts[line])
        prefix = self.content[start:offset]
        column = len(prefix) + 1 if prefix.isascii() else int(_LEAD[np.frombuffer(prefix, dtype=np.uint8)].sum()) + 1
        return {"byteOffset": offset, "lineNumber": line + 1, "column": column}


def _path_position(path: bytes, offset: int) -> dict[str, int]:
    return {"byteOffset": offset, "lineNumber": 1, "column": len(path[:offset].decode("utf-8", "replace")) + 1}


def chunks(fm: FileMatch, context_lines: int) -> list[dict[str, Any]]:
    """Matching lines merged with `context_lines` of context, with absolute match ranges."""
    if not fm.ranges:
        return []
    content = fm.shard.content(fm.doc)
    lines = _Lines(content, fm.shard.line_starts(fm.doc))
    last_line = len(lines.starts) - 1
    n = len(fm.ranges)
    # Per range: the line it starts on, the line of its last byte, the line of its end offset.
    starts, ends = [a for a, _ in fm.ranges], [b for _, b in fm.ranges]
    found = lines.lines_of(starts + [max(a, b - 1) for a, b in fm.ranges] + ends)
    line_a, line_last, line_b = found[:n], found[n : 2 * n], found[2 * n :]
    # (first line, last line, [(range start, its line, range end, its line)])
    groups: list[tuple[int, int, list[tuple[int, int, int, int]]]] = []
    for i, (a, b) in enumerate(fm.ranges):
        lo, hi = max(line_a[i] - context_lines, 0), min(line_last[i] + context_lines, last_line)
        ranged = (a, line_a[i], b, line_b[i])
        if groups and lo <= groups[-1][1] + 1:
            group_lo, group_hi, group_ranges = groups[-1]
            group_ranges.append(ranged)
            groups[-1] = (group_lo, max(group_hi, hi), group_ranges)
        else:
            groups.append((lo, hi, [ranged]))
    hits_by_start = {h.start: h for h in fm.symbol_hits}
    out: list[dict[str, Any]] = []
    for lo, hi, rs in groups:
        start, end = int(lines.starts[lo]), lines.line_end(hi)
        syms: list[dict[str, Any]] = []
        for a, *_ in rs:
            h = hits_by_start.get(a)
            if h is not None:
                syms.append(
                    {
                        "symbol": h.symbol.name,
                        "kind": h.symbol.kind,
                        "parent": {"symbol": h.symbol.parent, "kind": h.symbol.parent_kind}
                        if h.symbol.parent
                        else None,
                    }
                )
        out.append(
            {
                "content": content[start:end].decode("utf-8", "replace"),
                "matchRanges": [
                    {"start": lines.position_on(a, la), "end": lines.position_on(b, lb)} for a, la, b, lb in rs
                ],
                "contentStart": {"byteOffset": start, "lineNumber": lo + 1, "column": 1},
                "symbols": syms,
            }
        )
    return out


def match_lines(fm: FileMatch) -> list[tuple[int, int, str]]:
    """``(line number, column, line)`` of each content match range of `fm`, in order: what a client
    reads of each match of the chunks (`codesearch.client.results.Match`: the line a range starts
    on, where on it, that whole line), without building the chunks (a batch's rows)."""
    if not fm.ranges:
        return []
    content = fm.shard.content(fm.doc)
    lines = _Lines(content, fm.shard.line_starts(fm.doc))
    out = []
    for (a, _), line in zip(fm.ranges, lines.lines_of([a for a, _ in fm.ranges]), strict=True):
        pos = lines.position_on(a, line)
        text = content[int(lines.starts[line]) : lines.line_end(line)].decode("utf-8", "replace").rstrip("\r")
        out.append((pos["lineNumber"], pos["column"], text))
    return out


def file_result(fm: FileMatch, context_lines: int, whole: bool, public_url: str) -> dict[str, Any]:
    s, doc = fm.shard, fm.doc
    repo = s.repo(doc)
    path = s.doc_path(doc)
    branch = fm.branches[0] if fm.branches else (repo.branches[0] if repo.branches else "HEAD")
    path_b = path.encode("utf-8", "replace")
    result: dict[str, Any] = {
        "fileName": {
            "text": path,
            "matchRanges": [
                {"start": _path_position(path_b, a), "end": _path_position(path_b, b)} for a, b in fm.name_ranges
            ],
        },
        "webUrl": web_url(public_url, repo, branch, path),
        "repository": repo.name,
        "repositoryId": repo.id,
        "language": s.language(doc),
        "chunks": chunks(fm, context_lines),
        "branches": fm.branches,
    }
    ext = external_url(repo, branch, path)
    if ext:
        result["externalWebUrl"] = ext
    oid = s.content_id(doc)
    if oid is not None:
        result["contentHash"] = oid.hex()
    when = s.commit_time(doc)
    if when > 0:
        result["lastCommitTime"] = iso_time(when)
    if whole:
        result["content"] = s.content(doc).decode("utf-8", "replace")
    return result


def repository_info(repo: RepoInfo) -> dict[str, Any]:
    return {
        "id": repo.id,
        "codeHostType": repo.code_host_type,
        "name": repo.name,
        "displayName": repo.display_name,
        "webUrl": repo.web_url,
    }


def truncate_file_result(result: dict[str, Any], keep: int, context_lines: int) -> dict[str, Any]:
    """A presented file cut to its first `keep` match ranges (file-name ranges first).

    Used when merging the answers of several searchers crosses the `matches` cap inside a
    file. Chunks after the last kept range go; the chunk holding it is cut after the kept
    range's last line plus `context_lines`, so every chunk stays exactly what `chunks` would
    have built for the kept ranges.
    """
    result = dict(result)
    names = result["fileName"]["matchRanges"][:keep]
    result["fileName"] = {**result["fileName"], "matchRanges": names}
    quota = keep - len(names)
    chunks_out = []
    for ch in result["chunks"]:
        if quota <= 0:
            break
        ranges = ch["matchRanges"][:quota]
        quota -= len(ranges)
        if len(ranges) < len(ch["matchRanges"]):
            ch = _cut_chunk(ch, ranges, context_lines)
        chunks_out.append(ch)
    result["chunks"] = chunks_out
    return result


def _cut_chunk(ch: dict[str, Any], ranges: list[dict[str, Any]], context_lines: int) -> dict[str, Any]:
    end = ranges[-1]["end"]
    start = ranges[-1]["start"]
    last_line = end["lineNumber"]
    if end["column"] == 1 and end["byteOffset"] > start["byteOffset"]:
        last_line -= 1  # the match ends with a newline: its last line is the previous one
    first = ch["contentStart"]["lineNumber"]
    lines = ch["content"].split("\n")
    lines = lines[: max(last_line + context_lines - first + 1, 1)]
    content = "\n".join(lines)
    kept_text = set()
    raw = ch["content"].encode("utf-8")
    base = ch["contentStart"]["byteOffset"]
    for r in ranges:
        kept_text.add(raw[r["start"]["byteOffset"] - base : r["end"]["byteOffset"] - base].decode("utf-8", "replace"))
    symbols = [s for s in ch["symbols"] if s["symbol"] in kept_text]
    return {**ch, "content": content, "matchRanges": ranges, "symbols": symbols}
