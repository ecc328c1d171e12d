"""Which symbols of a document a ``sym:`` pattern matches, in one pass over all their names.

Why. A ``sym:`` term is verified on every candidate document (one that has symbols and holds the
pattern's trigrams somewhere in its content), and it used to run the pattern once per symbol
name: a Python call and an RE2 call per name, about 1.5 µs each. Over 600 repositories of real
Python code, ``sym:validate_python`` has 215 candidate files with 28,000 symbols between them:
34 ms of a search whose answer is one file.

How. The document's names joined by ``\\n`` are one text (`Shard.symbol_text`) that the pattern
scans once. Patterns are compiled with multi-line anchors and ``.`` does not match a newline
(`codesearch.query.regex`), so at a name's edges ``^``, ``$``, ``\\b`` and ``\\B`` see a newline
where the name alone would see the start or end of its text, and decide the same. Hence: a text
without a match has no name that matches (most candidates: one `search` each); a match that lies
within one line is a match of that name; and a name that matches alone has a match within its
line unless an earlier match ran across a newline into it. Where that reasoning does not hold,
the names are matched one by one, as before:

- a match that crosses a newline (a pattern that can match one: ``\\s``, ``[^x]``, ``(?s)``): it
  could hide the match of a name it runs into;
- a pattern that may look at the text as a whole or change the engine's modes: ``\\A``, ``\\z``,
  ``\\Z``, ``\\G``, or a ``(?`` other than a plain group ``(?:`` or case folding ``(?i)``,
  ``(?i:`` (inline flags such as ``(?s)`` or ``(?-m)``, look-around); decided from the pattern's
  text, erring on the side of the slow way;
- names that contain a newline themselves (ctags writes none; checked, not assumed).

The answers are the same either way (`tests/engine/test_symbol_match.py` checks one pass against one
call per name on a table of patterns and names); only the cost differs.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from codesearch.index.shard import Shard
    from codesearch.query.regex import CompiledRegex

#: Pattern text after which a match within a line may not be a match of that name alone.
_WHOLE_TEXT = re.compile(r"\\[AzZG]|\(\?(?!:|i\)|i:)")


@functools.lru_cache(maxsize=512)
def one_pass(pattern: str) -> bool:
    """Whether `pattern` may be run over the joined names (see the module docstring)."""
    return _WHOLE_TEXT.search(pattern) is None


def matching_symbols(shard: Shard, doc: int, regex: CompiledRegex, deadline: float | None = None) -> list[int]:
    """The indexes (0-based, in the document's order) of `doc`'s symbols whose name `regex`
    matches, in order."""
    if one_pass(regex.pattern):
        text = shard.symbol_text(doc)
        if not regex.search(text, deadline):
            return []
        found = joined_matches(text, shard.symbol_starts(doc), regex, deadline)
        if found is not None:
            return found
    return [k for k, name in enumerate(shard.symbol_names(doc)) if regex.search(name, deadline)]


def joined_matches(
    text: bytes, starts: np.ndarray, regex: CompiledRegex, deadline: float | None = None
) -> list[int] | None:
    """The names of `text` (names joined by ``\\n``, name ``k`` starting at ``starts[k]``) that
    `regex` matches, from one scan; None when one scan cannot tell (a name holds a newline, or a
    match crosses one)."""
    n = len(starts)
    if not n:
        return []
    if text.count(b"\n") != n - 1:
        return None
    begins = starts.tolist()
    ends = begins[1:] + [len(text) + 1]  # name k ends at ends[k] - 1 (the newline after it)
    found: list[int] = []
    for a, b in regex.finditer(text, deadline):
        k = bisect_right(begins, a) - 1
        if b > ends[k] - 1:
            return None
        if not found or found[-1] != k:
            found.append(k)
    return found
