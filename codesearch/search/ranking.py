"""Ranking: which matching files come first.

A file's score is the best of its signals, far apart so that one strong signal beats any number
of weak ones (docs/architecture.md#ranking):

    SCORE_SYMBOL       a `sym:` hit, or a content match that is exactly a symbol defined on its line
    SCORE_FILE_NAME    a `file:` match
    SCORE_WORD         a content match with word boundaries on both sides
    SCORE_PARTIAL_WORD a word boundary on one side
    SCORE_SUBSTRING    inside a word
    SCORE_NO_RANGE     the file matched on predicates alone (language, branch, repository)

A file that defines a searched identifier scores `SCORE_SYMBOL` plus `definition_bonus`: a
definition spelled exactly as searched beats one that matches only case-insensitively (``class
Session`` over a ``session`` method), and a type beats a function, which beats a member or a
variable. Ties keep file order: shards store ordinary source before tests, docs and vendored code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

SCORE_SYMBOL = 1000
SCORE_FILE_NAME = 800
SCORE_WORD = 500
SCORE_PARTIAL_WORD = 300
SCORE_SUBSTRING = 100
SCORE_NO_RANGE = 50

#: Bytes that count as part of a word: ASCII letters, digits, "_" and every non-ASCII byte.
WORD_BYTE = np.zeros(256, dtype=bool)
WORD_BYTE[[*range(48, 58), *range(65, 91), *range(97, 123), 95, *range(128, 256)]] = True

#: Only the first ranges of a file are looked at: enough to find its best signal.
MAX_RANGES_SCORED = 64

#: ctags kind names by how much a definition of that kind says "this is the thing": types,
#: then callables, then members (any other kind: variables, labels, ... counts 0).
_KIND_WEIGHT = {
    **dict.fromkeys(
        (
            "class",
            "struct",
            "interface",
            "trait",
            "enum",
            "union",
            "type",
            "typedef",
            "protocol",
            "object",
            "record",
            "module",
            "namespace",
            "alias",
        ),
        3,
    ),
    **dict.fromkeys(
        (
            "function",
            "func",
            "method",
            "procedure",
            "subroutine",
            "macro",
            "constructor",
            "singletonMethod",
            "generator",
        ),
        2,
    ),
    **dict.fromkeys(("member", "field", "property", "constant", "define", "enumerator", "attribute"), 1),
}


#: What a definition adds when it is written as searched, not only up to ASCII case.
EXACT_CASE_BONUS = 100


def definition_bonus(kind: str, exact_case: bool) -> int:
    """What a definition of `kind` adds to `SCORE_SYMBOL` (see the module docstring)."""
    return (EXACT_CASE_BONUS if exact_case else 0) + 20 * _KIND_WEIGHT.get(kind, 0)


@functools.lru_cache(maxsize=256)
def _kind_weights(kinds: tuple[str, ...]) -> np.ndarray:
    return np.array([definition_bonus(k, False) for k in kinds], dtype=np.int64)


def kind_weights(kinds: Sequence[str]) -> np.ndarray:
    """`definition_bonus` without the exact-case part for each of a shard's `symbol_kinds`, as an
    array to index by kind (shards share a few lists of kinds: the table is kept per list)."""
    return _kind_weights(tuple(kinds))


def score_file(
    content: bytes,
    ranges: list[tuple[int, int]],
    name_match: bool,
    symbol_hit: bool,
    is_definition: Callable[[int, int], bool],
) -> int:
    """The score of a matching file (see the module docstring)."""
    if symbol_hit:
        return SCORE_SYMBOL
    best = SCORE_FILE_NAME if name_match else (SCORE_NO_RANGE if not ranges else 0)
    for a, b in ranges[:MAX_RANGES_SCORED]:
        before = a == 0 or not WORD_BYTE[content[a - 1]]
        after = b >= len(content) or not WORD_BYTE[content[b]]
        if before and after:
            if is_definition(a, b):
                return SCORE_SYMBOL
            best = max(best, SCORE_WORD)
        elif before or after:
            best = max(best, SCORE_PARTIAL_WORD)
        else:
            best = max(best, SCORE_SUBSTRING)
    return best
