"""Syntax highlighting for the file view (Pygments), one HTML fragment per line.

Repository text is never trusted: Pygments escapes every token (``&``, ``<``, ``>``, quotes), and
the plain fallback escapes with `markupsafe.escape`, so a file holding ``<script>`` shows it as
text. Each returned line is a self-contained fragment (every ``<span>`` it opens, it closes), so
the page can give each line its own element and anchor (``#L12``).

Line numbers follow the index's (and the search results'): lines are split on ``\\n`` only; a
file whose highlighted form would number its lines differently (lone ``\\r``, which Pygments
treats as a line break) falls back to plain text.

`stylesheet()` is the token CSS for light and dark mode (the system setting decides, like
``style.css``), served by the pages at ``/highlight.css``.
"""

from __future__ import annotations

import functools

from markupsafe import escape
from pygments import highlight as _highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.util import ClassNotFound

#: Files larger than this many bytes, or with more lines than `MAX_HIGHLIGHT_LINES`, are shown
#: without highlighting (lexing them would take seconds and the page would be huge anyway).
MAX_HIGHLIGHT_BYTES = 1_000_000
MAX_HIGHLIGHT_LINES = 20_000
#: The file view shows at most this many lines.
MAX_SHOWN_LINES = 20_000

LIGHT_STYLE = "default"
DARK_STYLE = "github-dark"
#: Where the token colours apply: the file pages' code and the results page's snippets.
SCOPE = (".code", ".ctext")

#: The formatter of the file page and of the result snippets (`codesearch.web.snippets`).
FORMATTER = HtmlFormatter(nowrap=True)


def split_lines(text: str) -> list[str]:
    """`text` as lines (split on ``\\n``; a final newline does not start another line)."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def lexer_for(path: str, language: str, text: str) -> Lexer:
    """A Pygments lexer for the file: by file name first, then by the Linguist language name,
    else plain text. Leading and trailing newlines are kept (line numbers must not shift)."""
    options = {"stripnl": False, "stripall": False, "ensurenl": True}
    name = path.rsplit("/", 1)[-1]
    try:
        return get_lexer_for_filename(name, text[:4096], **options)
    except ClassNotFound:
        pass
    if language:
        for candidate in (language.lower(), language.lower().replace(" ", "-"), language.lower().replace(" ", "")):
            try:
                return get_lexer_by_name(candidate, **options)
            except ClassNotFound:
                continue
    return TextLexer(**options)


def plain_lines(lines: list[str]) -> list[str]:
    return [str(escape(line)) for line in lines]


def highlight_lines(path: str, language: str, text: str) -> tuple[list[str], bool]:
    """(HTML of each line, whether it was highlighted). Big files and files Pygments would
    number differently come back escaped but not highlighted."""
    text = text.replace("\r\n", "\n")
    lines = split_lines(text)
    if len(text) > MAX_HIGHLIGHT_BYTES or len(lines) > MAX_HIGHLIGHT_LINES or "\r" in text:
        return plain_lines(lines[:MAX_SHOWN_LINES]), False
    try:
        out = _highlight(text, lexer_for(path, language, text), FORMATTER)
    except Exception:  # a lexer bug must not break the page
        return plain_lines(lines), False
    html_lines = split_lines(out)
    if len(html_lines) != len(lines):
        return plain_lines(lines), False
    return html_lines, True


@functools.lru_cache(maxsize=1)
def stylesheet() -> str:
    """The token colours: `LIGHT_STYLE` by default, `DARK_STYLE` under a dark system setting.
    Backgrounds come from ``style.css`` (the page's own colours)."""

    def rules(style: str) -> str:
        # no boxes around the tokens a lexer did not understand: the file is fine, the lexer is not
        # types-pygments leaves get_token_style_defs unannotated (it returns a list of CSS rules)
        defs: list[str] = HtmlFormatter(style=style).get_token_style_defs(SCOPE)  # type: ignore[no-untyped-call]
        return "\n".join(r for r in defs if "border" not in r)

    light, dark = rules(LIGHT_STYLE), rules(DARK_STYLE)
    return (
        f"/* Pygments {LIGHT_STYLE} (light) and {DARK_STYLE} (dark) */\n"
        f"@media not all and (prefers-color-scheme: dark) {{\n{light}\n}}\n"
        f"@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"
    )
