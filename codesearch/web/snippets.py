"""The result snippets of the results page, highlighted by language with the file page's
highlighter (`codesearch.web.highlight`: the same Pygments lexers and token classes, less the
spans the stylesheet does not colour), the match ranges kept as ``<mark>``.

A snippet is a few lines cut out of a file, lexed on its own (a snippet that starts inside a
multi-line string is coloured as if it did not: the colours are a reading aid, the marks are
exact). Highlighting is bounded in time: a `SnippetBudget` per page; once spent, or for a chunk
too big to be worth it, the lines are plain text with their marks, as they always were.

Every piece of repository text is escaped here (`markupsafe.escape`); what comes out is markup.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator

from markupsafe import Markup, escape
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import _TokenType
from pygments.util import ClassNotFound

from codesearch.web.highlight import FORMATTER, coloured_classes

#: Seconds of highlighting one results page may spend; past it, its snippets are plain.
PAGE_BUDGET_S = 0.15
#: A chunk longer than this (characters) is shown plain: minified or generated text.
MAX_CHUNK_CHARS = 20_000

#: (text, is a match) pieces of one line (`codesearch.web.results_page.marked`).
Pieces = list[tuple[str, bool]]

#: A token type's CSS classes, as the file page's formatter writes them (its own method: the
#: classes are the formatter's, whatever Pygments version; the type stubs leave it out).
_formatter_classes: Callable[[_TokenType], str] = FORMATTER._get_css_classes  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=512)
def _css_classes(ttype: _TokenType) -> str:
    """`ttype`'s classes as the file page writes them, or "" (no span) when the stylesheet colours
    none of them: most tokens of code are plain names, and their spans only cost the page elements."""
    classes = _formatter_classes(ttype)
    return classes if coloured_classes().intersection(classes.split()) else ""


class SnippetBudget:
    """The time a page may spend highlighting its snippets (`PAGE_BUDGET_S`)."""

    def __init__(self, seconds: float = PAGE_BUDGET_S, clock: Callable[[], float] = time.perf_counter):
        self.left = seconds
        self.clock = clock

    def spent(self) -> bool:
        return self.left <= 0

    def charge(self, seconds: float) -> None:
        self.left -= seconds


@functools.lru_cache(maxsize=1024)
def snippet_lexer(name: str, language: str) -> Lexer | None:
    """The lexer the file page would pick for a file called `name` (by file name, then by
    language), or None for plain text. Snippets are lexed without the file's whole content, so
    the choice depends on nothing else (and is cached)."""
    options = {"stripnl": False, "stripall": False, "ensurenl": True}
    try:
        lexer = get_lexer_for_filename(name, None, **options)
    except ClassNotFound:
        lexer = None
    for candidate in (language.lower(), language.lower().replace(" ", "-"), language.lower().replace(" ", "")):
        if lexer is not None or not candidate:
            break
        try:
            lexer = get_lexer_by_name(candidate, **options)
        except ClassNotFound:
            continue
    return None if lexer is None or isinstance(lexer, TextLexer) else lexer


#: File names whose lexers `warm_up` loads: the languages most results are in.
WARM_NAMES = ("a.py", "a.js", "a.ts", "a.tsx", "a.go", "a.java", "a.rs", "a.c", "a.cpp", "a.rb", "a.md", "a.json")


def warm_up() -> None:
    """Load Pygments' table of lexers and the common lexers' modules: the first lookup of a process
    reads every lexer's file patterns and imports the candidates (a few hundred ms on a loaded
    machine; each further language tens of ms), which would otherwise fall on the first results
    page of a replica, before its first file leaves. `codesearch.web.mount` runs it in a thread."""
    for name in WARM_NAMES:
        snippet_lexer(name, "")


def plain_line(pieces: Pieces) -> Markup:
    """One line with its marks, not highlighted."""
    return Markup("").join(Markup("<mark>{}</mark>").format(t) if hit else escape(t) for t, hit in pieces)


def highlight_chunk(lexer: Lexer, lines: list[Pieces]) -> list[Markup]:
    """The lines of one chunk (each as its marked pieces) lexed together, as HTML: the token
    spans of the file page, each run of marked text inside one ``<mark>``."""
    text = "\n".join("".join(t for t, _ in line) for line in lines)
    bounds = [_mark_bounds(line) for line in lines]
    tokens = list(lexer.get_tokens(text))
    if not "".join(v for _, v in tokens).startswith(text):  # the lexer changed the text (a BOM): no colours
        raise ValueError("the lexer did not keep the text")
    out: list[list[tuple[str, str, bool]]] = [[] for _ in lines]
    row, col = 0, 0
    for ttype, value in tokens:
        cls = _css_classes(ttype)
        for k, part in enumerate(value.split("\n")):
            if k:
                row, col = row + 1, 0
            if row >= len(lines):
                break
            for piece, hit in _cut(part, col, bounds[row]):
                out[row].append((cls, piece, hit))
            col += len(part)
    return [_line_html(segments) for segments in out]


def _mark_bounds(pieces: Pieces) -> list[tuple[int, int, bool]]:
    """The pieces of a line as ``(from, to, is a match)`` character intervals."""
    out: list[tuple[int, int, bool]] = []
    pos = 0
    for t, hit in pieces:
        out.append((pos, pos + len(t), hit))
        pos += len(t)
    return out


def _cut(part: str, col: int, bounds: list[tuple[int, int, bool]]) -> Iterator[tuple[str, bool]]:
    """`part` (a token's text on one line, starting at column `col`) cut where marks begin and end."""
    end = col + len(part)
    for lo, hi, hit in bounds:
        if hi <= col or lo >= end:
            continue
        a, b = max(lo, col), min(hi, end)
        if b > a:
            yield part[a - col : b - col], hit


def _line_html(segments: Iterable[tuple[str, str, bool]]) -> Markup:
    """Segments ``(classes, text, in a mark)`` as HTML: neighbours of the same class share a span,
    neighbours in a mark share the ``<mark>``."""
    merged: list[tuple[str, str, bool]] = []
    for cls, text, hit in segments:
        if merged and merged[-1][0] == cls and merged[-1][2] == hit:
            merged[-1] = (cls, merged[-1][1] + text, hit)
        else:
            merged.append((cls, text, hit))
    html: list[str] = []
    in_mark = False
    for cls, text, hit in merged:
        if hit and not in_mark:
            html.append("<mark>")
        elif in_mark and not hit:
            html.append("</mark>")
        in_mark = hit
        body = str(escape(text))
        html.append(f'<span class="{cls}">{body}</span>' if cls else body)
    if in_mark:
        html.append("</mark>")
    return Markup("".join(html))


def snippet_html(path: str, language: str, chunks: list[list[Pieces]], budget: SnippetBudget) -> list[list[Markup]]:
    """Each line of each chunk of one file as HTML: highlighted while `budget` lasts (and the file
    has a lexer), else plain; marks kept either way."""
    t0 = budget.clock()
    lexer = None if budget.spent() else snippet_lexer(path.rsplit("/", 1)[-1], language)
    budget.charge(budget.clock() - t0)  # the first file of a language imports its lexer: tens of ms
    out: list[list[Markup]] = []
    for lines in chunks:
        size = sum(len(t) for line in lines for t, _ in line)
        if lexer is None or budget.spent() or size > MAX_CHUNK_CHARS:
            out.append([plain_line(line) for line in lines])
            continue
        t0 = budget.clock()
        try:
            out.append(highlight_chunk(lexer, lines))
        except Exception:  # noqa: BLE001 - a lexer bug must not cost the result: plain, as the file page does
            out.append([plain_line(line) for line in lines])
        budget.charge(budget.clock() - t0)
    return out
