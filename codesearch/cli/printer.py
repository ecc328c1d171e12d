"""Search results as text: grep-style lines, or the API's JSON.

`codesearch search` prints each line of each returned chunk as ``repo/path:LINE:text`` when the
line holds a match and ``repo/path-LINE-text`` when it is context (grep's ``-C`` convention); a
file matched by name only (no chunks) is one line with its path. On a terminal (and without
``NO_COLOR``) the path, line number, separators and the matched bytes are coloured like grep's.
With ``--json`` the output is exactly the ``POST /api/search`` response, one line.

Match ranges are byte offsets into the file; a chunk carries the offset of its first byte, so a
range is located inside the chunk by subtraction. A range that spans lines highlights its part
of each line. This module only formats: it never searches, so it is tested on hand-written
responses (tests/front/test_printer.py).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TextIO

#: grep's default colours (GREP_COLORS ``fn=35:ln=32:ms=01;31:se=36``)
COLORS = {"path": "\033[35m", "line": "\033[32m", "match": "\033[1;31m", "sep": "\033[36m", "off": "\033[0m"}
PLAIN = {k: "" for k in COLORS}


def use_color(stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Colour on a terminal unless ``NO_COLOR`` is set (https://no-color.org)."""
    return stream.isatty() and not environ.get("NO_COLOR")


def line_spans(lines: list[bytes], ranges: Iterable[tuple[int, int]]) -> dict[int, list[tuple[int, int]]]:
    """The matched byte spans of each line, by line index: `ranges` are ``(start, end)`` offsets
    into the lines joined by ``\\n``; a span is ``(start, end)`` within its line. An empty range
    at the start of a line (``^`` on an empty line) marks that line as matching."""
    starts, offset = [], 0
    for line in lines:
        starts.append(offset)
        offset += len(line) + 1
    spans: dict[int, list[tuple[int, int]]] = {}
    for a, b in ranges:
        for i, s in enumerate(starts):
            e = s + len(lines[i])
            if a <= e and b >= s and (a < e or a == s):
                spans.setdefault(i, []).append((max(a, s) - s, min(b, e) - s))
    return spans


def highlight(line: bytes, spans: list[tuple[int, int]], palette: Mapping[str, str]) -> bytes:
    """`line` with each span wrapped in the match colour (overlapping spans: the first wins)."""
    on, off = palette["match"].encode(), palette["off"].encode()
    parts, pos = [], 0
    for a, b in sorted(spans):
        if a < pos:
            continue
        parts += [line[pos:a], on, line[a:b], off]
        pos = b
    return b"".join(parts) + line[pos:]


def chunk_lines(where: str, chunk: Mapping[str, Any], palette: Mapping[str, str]) -> Iterator[str]:
    """The printed lines (without newlines) of one chunk of the file at `where`."""
    c = palette
    first = chunk["contentStart"]["lineNumber"]
    base = chunk["contentStart"]["byteOffset"]
    lines = chunk["content"].encode("utf-8").split(b"\n")
    ranges = [(r["start"]["byteOffset"] - base, r["end"]["byteOffset"] - base) for r in chunk["matchRanges"]]
    spans = line_spans(lines, ranges)
    for i, line in enumerate(lines):
        sep = ":" if i in spans else "-"
        text = highlight(line, spans[i], c) if c["match"] and i in spans else line
        yield (
            f"{c['path']}{where}{c['off']}{c['sep']}{sep}{c['off']}{c['line']}{first + i}{c['off']}"
            f"{c['sep']}{sep}{c['off']}{text.decode('utf-8', 'replace')}"
        )


def response_lines(resp: Mapping[str, Any], color: bool) -> Iterator[str]:
    """Every printed line of a search response, file by file."""
    c = COLORS if color else PLAIN
    for f in resp["files"]:
        where = f"{f['repository']}/{f['fileName']['text']}"
        if not f["chunks"]:
            yield f"{c['path']}{where}{c['off']}"
        for chunk in f["chunks"]:
            yield from chunk_lines(where, chunk, c)


def truncation_note(resp: Mapping[str, Any]) -> str | None:
    """What to tell the user when the response stopped short of every match, else None."""
    if resp["isSearchExhaustive"]:
        return None
    s = resp["stats"]
    return f"(showing {s['actualMatchCount']} of {s['totalMatchCount']}+ matches; raise --matches for more)"


def print_text(resp: Mapping[str, Any], color: bool, out: TextIO | None = None, err: TextIO | None = None) -> None:
    """The grep-style lines on `out` (stdout), the truncation note on `err` (stderr)."""
    out, err = out or sys.stdout, err or sys.stderr
    for line in response_lines(resp, color):
        out.write(line + "\n")
    note = truncation_note(resp)
    if note:
        print(note, file=err)


def print_json(resp: Mapping[str, Any], out: TextIO | None = None) -> None:
    """The response as one line of JSON (non-ASCII text as is)."""
    out = out or sys.stdout
    json.dump(resp, out, ensure_ascii=False)
    out.write("\n")
