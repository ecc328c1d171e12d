"""Trigram queries: boolean formulas over trigrams that a document must satisfy to be a candidate.

A `TrigramQuery` is ``all`` (every document is a candidate), ``none`` (no document can match),
or an ``and``/``or`` of trigram leaves and sub-queries, as in Russ Cox's "Regular Expression
Matching with a Trigram Index". It is always an over-approximation: a document that matches the
search never fails its trigram query (a false positive only costs verification time; a false
negative would be a bug).

Trigrams are the ids of `codesearch.index.trigrams`: exact-case 24-bit ids, or ids with any-case
flags for case-insensitive terms (a document satisfies such a leaf when it has any of its
`variants`). Rendering (``str``) gives compact strings for table-driven tests: ``"abc" "bcd"``
for and, ``("abc"|"xyz")`` for or, ``"abc"i`` for a trigram in any case, ``+`` for all and
``-`` for none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from codesearch.index.trigrams import all_letters_any_case, has_non_ascii, render, string_trigrams, variants

ALL = "all"
NONE = "none"
AND = "and"
OR = "or"


@dataclass(frozen=True)
class TrigramQuery:
    op: str
    trigrams: frozenset[int] = field(default_factory=frozenset)
    subs: tuple[TrigramQuery, ...] = ()

    def __str__(self) -> str:
        if self.op == ALL:
            return "+"
        if self.op == NONE:
            return "-"
        parts = [_quoted(t) for t in sorted(self.trigrams, key=_quoted)]
        if self.op == AND:
            return " ".join(parts + [str(s) for s in self.subs])
        parts += [f"({s})" if s.op == AND and s.size() > 1 else str(s) for s in self.subs]
        return "(" + "|".join(parts) + ")"

    def size(self) -> int:
        """Number of leaves, a measure of how complex the query has become."""
        return len(self.trigrams) + sum(s.size() for s in self.subs)

    def satisfied_by(self, trigrams: set[int] | frozenset[int]) -> bool:
        """True when a document with these trigrams is a candidate."""
        if self.op == ALL:
            return True
        if self.op == NONE:
            return False
        if self.op == AND:
            return all(_has(t, trigrams) for t in self.trigrams) and all(s.satisfied_by(trigrams) for s in self.subs)
        return any(_has(t, trigrams) for t in self.trigrams) or any(s.satisfied_by(trigrams) for s in self.subs)


def _has(trigram: int, trigrams: set[int] | frozenset[int]) -> bool:
    """A document with these (index) trigrams has `trigram` (in any of its variants)."""
    return any(v in trigrams for v in variants(trigram))


def _quoted(trigram: int) -> str:
    return '"' + render(trigram) + '"' + ("i" if all_letters_any_case(trigram) else "")


ALL_QUERY = TrigramQuery(ALL)
NONE_QUERY = TrigramQuery(NONE)


def leaf_and(trigrams: Iterable[int]) -> TrigramQuery:
    """The AND of the given trigrams (``all`` when there are none)."""
    ts = frozenset(trigrams)
    return TrigramQuery(AND, ts) if ts else ALL_QUERY


def and_(a: TrigramQuery, b: TrigramQuery) -> TrigramQuery:
    """``a AND b``, simplified."""
    if a.op == NONE or b.op == NONE:
        return NONE_QUERY
    if a.op == ALL:
        return b
    if b.op == ALL:
        return a
    trigrams: set[int] = set()
    subs: list[TrigramQuery] = []
    for q in (a, b):
        if q.op == AND:
            trigrams |= q.trigrams
            subs.extend(q.subs)
        else:
            subs.append(q)
    # x AND (x OR y)  ==  x: drop ORs that the AND's own trigrams already satisfy.
    subs = [s for s in dict.fromkeys(subs) if not (s.op == OR and _satisfied(s, trigrams))]
    if not subs and len(trigrams) == 0:
        return ALL_QUERY
    return TrigramQuery(AND, frozenset(trigrams), tuple(subs))


def _satisfied(q: TrigramQuery, trigrams: set[int]) -> bool:
    """True when every document containing all of `trigrams` satisfies `q`."""
    if q.op == ALL:
        return True
    if q.op == AND:
        return q.trigrams <= trigrams and all(_satisfied(s, trigrams) for s in q.subs)
    if q.op == OR:
        return bool(q.trigrams & trigrams) or any(_satisfied(s, trigrams) for s in q.subs)
    return False


def or_(a: TrigramQuery, b: TrigramQuery) -> TrigramQuery:
    """``a OR b``, simplified."""
    if a.op == ALL or b.op == ALL:
        return ALL_QUERY
    if a.op == NONE:
        return b
    if b.op == NONE:
        return a
    trigrams: set[int] = set()
    subs: list[TrigramQuery] = []
    for q in (a, b):
        if q.op == OR:
            trigrams |= q.trigrams
            subs.extend(q.subs)
        elif q.op == AND and len(q.trigrams) == 1 and not q.subs:
            trigrams |= q.trigrams
        else:
            subs.append(q)
    subs = list(dict.fromkeys(subs))
    # (abc AND x) OR abc  ==  abc: an AND that contains a trigram of the OR adds nothing.
    subs = [s for s in subs if not (s.op == AND and s.trigrams & trigrams)]
    if len(trigrams) == 1 and not subs:
        return TrigramQuery(AND, frozenset(trigrams))
    if not trigrams and len(subs) == 1:
        return subs[0]
    return TrigramQuery(OR, frozenset(trigrams), tuple(subs))


def literal_query(text: str, case_sensitive: bool) -> TrigramQuery:
    """The trigram query of a literal substring search.

    Literals shorter than three bytes give ``all``. For case-insensitive search, the trigrams
    carry any-case flags, and those with non-ASCII bytes are dropped: the other case of a
    non-ASCII letter is other bytes.
    """
    ts = string_trigrams(text, case_sensitive)
    if not case_sensitive:
        ts = [t for t in ts if not has_non_ascii(t)]
    return leaf_and(ts)
