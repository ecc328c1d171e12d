"""One candidate document of a shard, checked exactly: its content read once, the query evaluated
on it, the match ranges of the positive terms collected and the file scored (`DocContext`); and
what a match is before presentation (`FileMatch`, `SymbolHit`).

`codesearch.search.evaluate` decides which documents to check and when to stop; this module
decides whether one document matches and where. It reads contents and symbol names through a
`DocReader`: the shard itself, or a batch's reader that reads a document once for every query
that checks it (`codesearch.search.batch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from codesearch.index.format import mask_names
from codesearch.index.shard import Shard, ShardSymbol, is_reference
from codesearch.query import ast
from codesearch.query.planner import ContentLeaf, FileLeaf, Plan, RepoLeaf, SymbolLeaf
from codesearch.search.ranking import SCORE_SYMBOL, definition_bonus, score_file
from codesearch.search.symbol_match import matching_symbols

if TYPE_CHECKING:
    from codesearch.search.options import Stats


class DocReader(Protocol):
    """What verification reads of a candidate document (a `Shard` is one)."""

    def content(self, doc: int) -> bytes: ...

    def content_view(self, doc: int) -> memoryview | bytes: ...

    def symbol_names(self, doc: int) -> list[bytes]: ...


class Verifier(Protocol):
    """What checking one document asks of the search over its shard (`evaluate.ShardEvaluator`)."""

    shard: Shard
    reader: DocReader
    stats: Stats
    #: `time.monotonic()` past which regexes give up
    deadline: float
    #: the query's positive terms, whose matches are shown, and their ids
    positive: list[ast.Node]
    positive_ids: frozenset[int]
    #: the positive terms that name an identifier (their definitions rank first)
    identifiers: list[ContentLeaf]
    plan: Plan

    def lang_set(self, name: str) -> set[int]:
        """The language ids `lang:name` means in this shard."""
        ...

    def branch_mask(self, pattern: str) -> list[int]:
        """Per repository of the shard, the bit mask of its branches that `rev:pattern` names."""
        ...


@dataclass
class SymbolHit:
    symbol: ShardSymbol
    start: int
    end: int


@dataclass
class FileMatch:
    """A matching document of one shard, before presentation."""

    shard: Shard
    doc: int
    ranges: list[tuple[int, int]]  # byte spans in the content, sorted
    name_ranges: list[tuple[int, int]]  # byte spans in the path
    symbol_hits: list[SymbolHit]
    branches: list[str]
    score: int = 0
    order: tuple[int, ...] = ()  # (searcher, shard, document): ties broken in index order
    #: Content ranges that are the definition of a searched identifier (kept when capped).
    definition_ranges: list[tuple[int, int]] = field(default_factory=list)
    #: Match ranges found in the file but cut by a cap (`truncate_match`), and whether that count
    #: is exact (False: the file was searched for at most a limit of ranges, and had that many).
    more: int = 0
    more_exact: bool = True

    @property
    def match_count(self) -> int:
        return len(self.ranges) + len(self.name_ranges)


def truncate_match(fm: FileMatch, keep: int) -> FileMatch:
    """`fm` cut to `keep` match ranges: file-name ranges first, then its definition ranges,
    then the rest in file order; the ranges cut are counted in `FileMatch.more`."""
    before = fm.match_count
    fm.name_ranges = fm.name_ranges[:keep]
    room = keep - len(fm.name_ranges)
    if len(fm.ranges) > room:
        kept = set(fm.definition_ranges[:room])
        for r in fm.ranges:
            if len(kept) >= room:
                break
            kept.add(r)
        fm.ranges = sorted(kept)
    kept_ranges = set(fm.ranges)
    fm.symbol_hits = [h for h in fm.symbol_hits if (h.start, h.end) in kept_ranges]
    fm.more += before - fm.match_count
    return fm


class DocContext:
    """One candidate document: lazy content, exact evaluation, match collection, score."""

    def __init__(self, ev: Verifier, doc: int, limit: int):
        self.ev = ev
        self.doc = doc
        self.limit = limit  # most content ranges worth collecting (the rest of the budget + 1)
        self._spans: dict[int, list[tuple[int, int]]] = {}
        self._content: bytes | None = None
        self._path: bytes | None = None
        self._symbol_names: list[bytes] | None = None
        self._symbol_matches: dict[int, list[int]] = {}  # id of a SymbolLeaf → its symbols here
        #: name → the lines where the document defines it (filled by `_is_definition`)
        self._defined: dict[bytes, set[int]] = {}
        self._loaded = False  # the content was counted as read (`_count_loaded`)

    @property
    def content(self) -> bytes:
        if self._content is None:
            self._content = self.ev.reader.content(self.doc)
            self._count_loaded(len(self._content))
        return self._content

    def _count_loaded(self, size: int) -> None:
        """Count the document's content as read, once whichever way it was (`_absent` reads it
        where it lies)."""
        if not self._loaded:
            self._loaded = True
            self.ev.stats.filesLoaded += 1
            self.ev.stats.contentBytesLoaded += size

    @property
    def path(self) -> bytes:
        if self._path is None:
            self._path = self.ev.shard.doc_path(self.doc).encode("utf-8", "replace")
        return self._path

    @property
    def symbol_names(self) -> list[bytes]:
        if self._symbol_names is None:
            self._symbol_names = self.ev.reader.symbol_names(self.doc)
        return self._symbol_names

    def match(self, node: ast.Node) -> bool:
        ev, s, doc = self.ev, self.ev.shard, self.doc
        if isinstance(node, ast.And):
            return all(self.match(c) for c in node.children)
        if isinstance(node, ast.Or):
            return any(self.match(c) for c in node.children)
        if isinstance(node, ast.Not):
            return not self.match(node.child)
        if isinstance(node, ast.Const):
            return node.value
        if isinstance(node, ContentLeaf):
            if id(node) in ev.positive_ids:  # its matches are wanted anyway: find them once
                return bool(self.content_spans(node))
            ev.stats.regexpsConsidered += 1
            return bool(self.content) and node.regex.search(self.content, ev.deadline)
        if isinstance(node, FileLeaf):
            return node.regex.search(self.path, ev.deadline)
        if isinstance(node, SymbolLeaf):
            return bool(self.symbol_matches(node))
        if isinstance(node, ast.Language):
            return int(s.doc_lang[doc]) in ev.lang_set(node.name)
        if isinstance(node, ast.Branch):
            return bool(s.branch_bits(doc) & ev.branch_mask(node.pattern)[int(s.doc_repo[doc])])
        if isinstance(node, RepoLeaf):
            return node.test(s.repo(doc))
        raise TypeError(f"unexpected plan node {node!r}")

    def symbol_matches(self, leaf: SymbolLeaf) -> list[int]:
        """The document's symbols (indexes in its order) whose name `leaf` matches, found once per
        document, all names in one pass (`symbol_match`)."""
        found = self._symbol_matches.get(id(leaf))
        if found is None:
            found = matching_symbols(self.ev.shard, self.doc, leaf.regex, self.ev.deadline)
            self._symbol_matches[id(leaf)] = found
        return found

    def _symbol_spans(self, leaf: SymbolLeaf) -> list[SymbolHit]:
        hits: list[SymbolHit] = []
        s = self.ev.shard
        starts = s.line_starts(self.doc)
        content = self.content
        first = s.symbol_range(self.doc).start
        for k in self.symbol_matches(leaf):
            name = self.symbol_names[k]
            sym = s.symbol(first + k)
            if not 1 <= sym.line <= len(starts):
                continue
            a = int(starts[sym.line - 1])
            b = int(starts[sym.line]) if sym.line < len(starts) else len(content)
            at = content.find(name, a, b)
            if at >= 0:
                hits.append(SymbolHit(sym, at, at + len(name)))
        return hits

    def content_spans(self, leaf: ContentLeaf) -> list[tuple[int, int]]:
        """The leaf's matches in the content (at most `limit`), computed once per document."""
        spans = self._spans.get(id(leaf))
        if spans is None:
            spans = []
            if self._content is None and self._absent(leaf):
                self.ev.stats.regexpsConsidered += 1
            elif self.content:
                self.ev.stats.regexpsConsidered += 1
                for span in leaf.regex.finditer(self.content, self.ev.deadline):
                    spans.append(span)
                    if len(spans) >= self.limit:
                        break
            self._spans[id(leaf)] = spans
        return spans

    def _absent(self, leaf: ContentLeaf) -> bool:
        """True when the leaf certainly does not match, known from the content where it lies
        (`absent_from`) without reading it into bytes; it counts as loaded all the same."""
        view = self.ev.reader.content_view(self.doc)
        if not view or not leaf.regex.absent_from(view):
            return False
        self._count_loaded(len(view))
        return True

    def file_match(self, branch_masks: list[list[int]]) -> FileMatch:
        """Collect the match ranges of the positive terms (at most `limit` content ranges)."""
        limit = self.limit
        ranges: list[tuple[int, int]] = []
        name_ranges: list[tuple[int, int]] = []
        sym_hits: list[SymbolHit] = []
        for leaf in self.ev.positive:
            if isinstance(leaf, ContentLeaf):
                ranges.extend(self.content_spans(leaf))
            elif isinstance(leaf, FileLeaf):
                name_ranges.extend(leaf.regex.finditer(self.path, self.ev.deadline))
            elif isinstance(leaf, SymbolLeaf):
                hits = self._symbol_spans(leaf)
                sym_hits.extend(hits)
                ranges.extend((h.start, h.end) for h in hits)
        found = [self._definitions(leaf) for leaf in self.ev.identifiers]
        definitions = sorted({span for spans, _ in found for span in spans})
        if ranges:
            ranges = sorted(set(ranges))
            if len(ranges) > limit:  # the definitions stay, the rest fills the limit in file order
                keep = set(definitions)
                keep.update(r for r in ranges[: max(limit - len(keep), 0)])
                ranges = sorted(keep)
        fm = FileMatch(
            self.ev.shard,
            self.doc,
            ranges,
            sorted(set(name_ranges)),
            sym_hits,
            self._branches(branch_masks),
            definition_ranges=definitions,
        )
        fm.score = score_file(
            self.content if ranges else b"", fm.ranges, bool(fm.name_ranges), bool(sym_hits), self._is_definition
        )
        if definitions:
            fm.score = max(fm.score, SCORE_SYMBOL + max(bonus for spans, bonus in found if spans))
        return fm

    def _definitions(self, leaf: ContentLeaf) -> tuple[list[tuple[int, int]], int]:
        """Where this document defines the identifier `leaf` searches for (its matches on the
        lines of symbols with that name, the name compared as the leaf compares text), and the
        best `definition_bonus` among those symbols."""
        if not self.content_spans(leaf):
            return [], 0
        want = leaf.node.pattern.encode("utf-8")
        s = self.ev.shard
        language = s.language(self.doc)
        lines: dict[int, int] = {}  # line → best bonus of a definition on it
        for k in s.symbols_named(want, self.doc):
            exact = bytes(s.sym_name[int(s.sym_noff[k]) : int(s.sym_noff[k + 1])]) == want
            if not exact and leaf.node.case_sensitive:
                continue
            kind = s.symbol_kinds[int(s.sym_kind[k])]
            if is_reference(kind, language):
                continue
            line = int(s.sym_line[k])
            lines[line] = max(lines.get(line, 0), definition_bonus(kind, exact))
        starts = s.line_starts(self.doc)
        content = self.content
        spans: list[tuple[int, int]] = []
        best = 0
        for line, bonus in sorted(lines.items()):
            if not 1 <= line <= len(starts):
                continue
            a = int(starts[line - 1])
            b = int(starts[line]) if line < len(starts) else len(content)
            found = [(a + x, a + y) for x, y in leaf.regex.finditer(content[a:b], self.ev.deadline)]
            if found:
                spans.extend(found)
                best = max(best, bonus)
        return spans, best

    def _branches(self, masks: list[list[int]]) -> list[str]:
        s, doc = self.ev.shard, self.doc
        repo = s.repo(doc)
        bits = s.branch_bits(doc)
        if self.ev.plan.default_branch_only:
            bits &= 1
        elif masks:
            r = int(s.doc_repo[doc])
            want = 0
            for m in masks:
                want |= m[r]
            bits &= want
        return mask_names(repo.branches, bits)

    def _is_definition(self, a: int, b: int) -> bool:
        """True when content[a:b] is the name of a symbol defined on that line. Scoring asks for
        each whole-word match until one is a definition: the lines that define a name are looked
        up once per name (`Shard.symbols_named`, a binary search; a large file has thousands of
        symbols) and kept in `_defined`."""
        name = self.content[a:b]
        lines = self._defined.get(name)
        if lines is None:
            shard = self.ev.shard
            lines = {
                int(shard.sym_line[k]) for k in shard.symbols_named(name, self.doc) if shard.symbol_name(k) == name
            }
            self._defined[name] = lines
        if not lines:
            return False
        return int(self.ev.shard.line_starts(self.doc).searchsorted(np.uint32(a), side="right")) in lines
