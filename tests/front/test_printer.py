"""The grep-style printer of `codesearch search` (codesearch/cli/printer.py), on hand-written
responses: one table row per shape of output (match and context lines, name-only files, colours,
ranges across lines, overlapping and empty ranges, multi-byte text, the truncation note)."""

from __future__ import annotations

import io
import json

import pytest

from codesearch.cli import printer

M, OFF, P, LN, SEP = "\033[1;31m", "\033[0m", "\033[35m", "\033[32m", "\033[36m"


def chunk(content: str, first_line: int, base: int, *ranges: tuple[int, int]) -> dict:
    """A response chunk: `content` starting at byte `base` of the file, on line `first_line`;
    `ranges` are byte offsets into the file."""
    def pos(b: int) -> dict:
        return {"byteOffset": b, "lineNumber": 0, "column": 0}  # the printer reads byte offsets only

    return {"content": content, "contentStart": {"byteOffset": base, "lineNumber": first_line, "column": 1},
            "matchRanges": [{"start": pos(a), "end": pos(b)} for a, b in ranges]}


def response(*files: tuple[str, list[dict]], exhaustive: bool = True, shown: int = 1, total: int = 1) -> dict:
    return {"files": [{"repository": "github.com/acme/api", "fileName": {"text": name}, "chunks": chunks}
                      for name, chunks in files],
            "isSearchExhaustive": exhaustive, "stats": {"actualMatchCount": shown, "totalMatchCount": total}}


R = "github.com/acme/api"

CASES = [
    ("one match", response(("a.py", [chunk("hello world", 3, 40, (40, 45))])), False,
     [f"{R}/a.py:3:hello world"]),
    ("context lines take '-'", response(("a.py", [chunk("x = 1\nhello()\ny = 2", 9, 100, (106, 111))])), False,
     [f"{R}/a.py-9-x = 1", f"{R}/a.py:10:hello()", f"{R}/a.py-11-y = 2"]),
    ("a file matched by name only", response(("docs/hello.md", [])), False, [f"{R}/docs/hello.md"]),
    ("two chunks, two files", response(("a.py", [chunk("one", 1, 0, (0, 3)), chunk("two", 7, 30, (30, 33))]),
                                       ("b.py", [chunk("three", 2, 5, (5, 10))])), False,
     [f"{R}/a.py:1:one", f"{R}/a.py:7:two", f"{R}/b.py:2:three"]),
    ("colours", response(("a.py", [chunk("say hello", 1, 0, (4, 9))])), True,
     [f"{P}{R}/a.py{OFF}{SEP}:{OFF}{LN}1{OFF}{SEP}:{OFF}say {M}hello{OFF}"]),
    ("colours of a context line", response(("a.py", [chunk("ctx\nhit", 4, 0, (4, 7))])), True,
     [f"{P}{R}/a.py{OFF}{SEP}-{OFF}{LN}4{OFF}{SEP}-{OFF}ctx", f"{P}{R}/a.py{OFF}{SEP}:{OFF}{LN}5{OFF}{SEP}:{OFF}{M}hit{OFF}"]),
    ("a name-only file in colour", response(("a.py", [])), True, [f"{P}{R}/a.py{OFF}"]),
    ("a range across two lines marks both", response(("a.py", [chunk("if x:\n    go()", 1, 0, (3, 10))])), True,
     [f"{P}{R}/a.py{OFF}{SEP}:{OFF}{LN}1{OFF}{SEP}:{OFF}if {M}x:{OFF}",
      f"{P}{R}/a.py{OFF}{SEP}:{OFF}{LN}2{OFF}{SEP}:{OFF}{M}    {OFF}go()"]),
    ("two ranges on one line, given out of order", response(("a.py", [chunk("a b a", 1, 0, (4, 5), (0, 1))])), True,
     [f"{P}{R}/a.py{OFF}{SEP}:{OFF}{LN}1{OFF}{SEP}:{OFF}{M}a{OFF} b {M}a{OFF}"]),
    ("overlapping ranges: the first wins", response(("a.py", [chunk("abcdef", 1, 0, (0, 4), (2, 6))])), True,
     [f"{P}{R}/a.py{OFF}{SEP}:{OFF}{LN}1{OFF}{SEP}:{OFF}{M}abcd{OFF}ef"]),
    ("an empty range on an empty line (^$)", response(("a.py", [chunk("x\n\ny", 1, 0, (2, 2))])), False,
     [f"{R}/a.py-1-x", f"{R}/a.py:2:", f"{R}/a.py-3-y"]),
    ("byte offsets in multi-byte text", response(("a.txt", [chunk("grüße ü", 1, 0, (2, 7))])), True,
     [f"{P}{R}/a.txt{OFF}{SEP}:{OFF}{LN}1{OFF}{SEP}:{OFF}gr{M}üße{OFF} ü"]),
]


@pytest.mark.parametrize("resp,color,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_lines(resp, color, expected):
    out, err = io.StringIO(), io.StringIO()
    printer.print_text(resp, color, out, err)
    assert out.getvalue() == "".join(line + "\n" for line in expected)
    assert err.getvalue() == ""


@pytest.mark.parametrize("lines,ranges,spans", [
    ([b"hello"], [(1, 3)], {0: [(1, 3)]}),
    ([b"ab", b"cd"], [(1, 4)], {0: [(1, 2)], 1: [(0, 1)]}),  # byte 2 is the newline
    ([b"ab", b"cd"], [(2, 3)], {1: [(0, 0)]}),  # only the newline: the next line matches, nothing to colour
    ([b"ab", b"", b"cd"], [(3, 3)], {1: [(0, 0)]}),  # ^$ on the empty line
    ([b"ab", b"cd"], [], {}),
])
def test_line_spans(lines, ranges, spans):
    assert printer.line_spans(lines, ranges) == spans


def test_truncation_note_goes_to_stderr():
    resp = response(("a.py", [chunk("hit", 1, 0, (0, 3))]), exhaustive=False, shown=100, total=250)
    out, err = io.StringIO(), io.StringIO()
    printer.print_text(resp, False, out, err)
    assert out.getvalue() == f"{R}/a.py:1:hit\n"
    assert err.getvalue() == "(showing 100 of 250+ matches; raise --matches for more)\n"


def test_json_is_one_line_and_keeps_non_ascii():
    resp = response(("grüße.txt", []))
    out = io.StringIO()
    printer.print_json(resp, out)
    text = out.getvalue()
    assert text.count("\n") == 1 and "grüße.txt" in text and json.loads(text) == resp


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty,environ,color", [
    (True, {}, True),
    (True, {"NO_COLOR": "1"}, False),
    (True, {"NO_COLOR": ""}, True),  # no-color.org: only a non-empty value disables
    (False, {}, False),
])
def test_use_color(tty, environ, color):
    assert printer.use_color(_Stream(tty), environ) is color
