"""Counts in words: "1 match in 1 file", "3 matches in 2 files", never "1 matches" or "file(s)".

Used wherever text for people or agents carries a count: the MCP tools' answers, messages of
the API, the pages (as the Jinja filter ``plural``: ``{{ n|plural("line") }}``, grouped
thousands). English only:
the irregular plurals are passed in (``plural(n, "entry", "entries")``).
"""

from __future__ import annotations


def noun(n: int, word: str, many: str | None = None) -> str:
    """`word` for `n` things: itself for one, else `many` (default: `word` + "es" after s, x,
    z, ch or sh, + "s" otherwise)."""
    if n == 1:
        return word
    if many is not None:
        return many
    return word + ("es" if word.endswith(("s", "x", "z", "ch", "sh")) else "s")


def plural(n: int, word: str, many: str | None = None, *, grouped: bool = False) -> str:
    """``"<n> <word or its plural>"``: ``plural(3, "line")`` → ``"3 lines"``; with `grouped`,
    thousands separated as the pages show them (``"1,200 lines"``)."""
    return f"{n:,} {noun(n, word, many)}" if grouped else f"{n} {noun(n, word, many)}"
