"""Evaluate a plan on one shard: candidates from the index, verification, ranking signals.

1. Repository predicates become constants for the shard's repositories; a query that is then
   false is answered without touching the shard (`shardsSkippedFilter`).
2. Candidates: exact bitmaps for cheap predicates (language, branch, repository) from the
   document table; over-approximations for content, file-name and symbol terms from their
   trigram queries, intersecting the smallest posting lists first and stopping at the first
   empty result. Negations of inexact terms cannot prune and yield "all documents".
3. Verification: first the candidates that define a searched identifier (a plain term such as
   ``QuerySet`` that the shard's symbol table names as a definition), then the rest in document
   order (the shard stores the best files first). The whole query is evaluated exactly on each
   candidate; the match ranges of every term that is not under a negation are collected, and a
   defining file's definition ranges always among them. The search stops once more than
   `budget` matches (or files) were found, or at the deadline, and says so (`truncated`). So a
   cap never hides the file that defines what was searched, and ranking puts it first.

Match semantics (the contract the differential tests check): a file matches when the query is
true for it; its match ranges are all matches of its content, file-name and symbol terms that
are not under a negation.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from pyroaring import BitMap

from codesearch.index.shard import Shard, ShardSymbol, TrigramIndex, is_reference
from codesearch.query import ast
from codesearch.query.planner import ContentLeaf, FileLeaf, Plan, RepoFacts, RepoLeaf, SymbolLeaf
from codesearch.query.regex import RegexTimeout
from codesearch.query.trigram_query import ALL, AND, NONE, TrigramQuery
from codesearch.search.options import Stats
from codesearch.search.ranking import SCORE_SYMBOL, definition_bonus, score_file
from codesearch.search.symbol_match import matching_symbols

#: A plain term that can name a symbol: its definitions are verified and ranked first.
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


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

    @property
    def match_count(self) -> int:
        return len(self.ranges) + len(self.name_ranges)


@dataclass
class ShardResult:
    files: list[FileMatch] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    total_matches: int = 0
    truncated: bool = False
    timed_out: bool = False


class _ShardView:
    """Per-shard facts the evaluator needs, computed on demand."""

    def __init__(self, shard: Shard, stats: Stats):
        self.shard = shard
        self.stats = stats
        self.all_docs = shard.docs_where("all")

    def lookup(self, index: TrigramIndex, q: TrigramQuery) -> BitMap | None:
        """Candidate documents of a trigram query (None = every document)."""
        if q.op == ALL:
            return None
        if q.op == NONE:
            return BitMap()
        self.stats.ngramLookups += len(q.trigrams)
        tris = list(q.trigrams)
        cards = sorted(zip(index.cardinalities(tris), tris, strict=True))
        if q.op == AND:
            result: BitMap | None = None
            if cards and cards[0][0] == 0:
                return BitMap()
            for _, t in cards:
                p = self._postings(index, t)
                result = p.copy() if result is None else result & p
                if not result:
                    return result
            for s in sorted(q.subs, key=lambda s: s.size()):
                sub = self.lookup(index, s)
                if sub is not None:
                    result = sub if result is None else result & sub
                    if not result:
                        return result
            return result
        # OR
        result = BitMap()
        for c, t in cards:
            if c:
                result |= self._postings(index, t)
        for s in q.subs:
            sub = self.lookup(index, s)
            if sub is None:
                return None
            result |= sub
        return result

    def _postings(self, index: TrigramIndex, trigram: int) -> BitMap:
        self.stats.indexBytesLoaded += index.stored_size(trigram)
        return index.postings(trigram)

    def from_mask(self, mask: np.ndarray) -> BitMap:
        return BitMap(np.flatnonzero(mask).astype(np.uint32))


def _resolve_repos(node: ast.Node, repos: Sequence[RepoFacts]) -> ast.Node:
    """Replace repository predicates by constants where every repository of the shard agrees."""
    if isinstance(node, RepoLeaf):
        results = {node.test(r) for r in repos}
        return ast.Const(results.pop()) if len(results) == 1 else node
    if isinstance(node, (ast.And, ast.Or)):
        kids = [_resolve_repos(c, repos) for c in node.children]
        neutral = isinstance(node, ast.And)
        if any(isinstance(k, ast.Const) and k.value != neutral for k in kids):
            return ast.Const(not neutral)
        kids = [k for k in kids if not isinstance(k, ast.Const)]
        if not kids:
            return ast.Const(neutral)
        return kids[0] if len(kids) == 1 else type(node)(tuple(kids))
    if isinstance(node, ast.Not):
        child = _resolve_repos(node.child, repos)
        return ast.Const(not child.value) if isinstance(child, ast.Const) else ast.Not(child)
    return node


class ShardEvaluator:
    """Evaluates one plan on one shard (single use)."""

    def __init__(
        self, shard: Shard, plan: Plan, budget: int, deadline: float, cancelled: Callable[[], bool] | None = None
    ):
        self.shard = shard
        self.plan = plan
        self.budget = max(1, budget)
        self.deadline = deadline
        self.cancelled = cancelled
        self.result = ShardResult()
        self.stats = self.result.stats
        self.view = _ShardView(shard, self.stats)
        self.lang_ids: dict[str, set[int]] = {}
        self.branch_masks: dict[str, np.ndarray] = {}
        self.positive: list[ast.Node] = []
        self.positive_ids: set[int] = set()
        self.identifiers: list[ContentLeaf] = []
        self.positive_branch_masks: list[np.ndarray] = []
        self.verified = BitMap()  # documents checked so far

    # -- per-shard predicate data -------------------------------------------------------------

    def _lang_set(self, name: str) -> set[int]:
        if name not in self.lang_ids:
            want = name.lower()
            self.lang_ids[name] = {i for i, lang in enumerate(self.shard.languages) if lang.lower() == want}
        return self.lang_ids[name]

    def _branch_mask(self, pattern: str) -> np.ndarray:
        """Per repository of the shard: the bit mask of branches whose name contains `pattern`."""
        if pattern not in self.branch_masks:
            masks = []
            for r in self.shard.repos:
                m = 0
                for i, b in enumerate(r.branches):
                    if pattern == "*" or pattern in b:
                        m |= 1 << i
                masks.append(m)
            self.branch_masks[pattern] = np.array(masks, dtype=np.uint64)
        return self.branch_masks[pattern]

    def _doc_branch_bits(self, pattern: str) -> np.ndarray:
        masks = self._branch_mask(pattern)
        bits: np.ndarray = (self.shard.doc_branches & masks[self.shard.doc_repo]) != 0
        return bits

    # -- candidates ---------------------------------------------------------------------------

    def candidates(self, node: ast.Node) -> tuple[BitMap | None, bool]:
        """(documents where `node` may be true or None for all, whether that set is exact)."""
        s = self.shard
        if isinstance(node, ast.Const):
            return (None if node.value else BitMap()), True
        if isinstance(node, ContentLeaf):
            found = self.view.lookup(s.content_index, node.trigrams)
            if found is not None and node.quads:
                found = s.quad_filters.select(found, node.quads)
            return found, False
        if isinstance(node, FileLeaf):
            return self.view.lookup(s.name_index, node.trigrams), False
        if isinstance(node, SymbolLeaf):
            base = s.docs_where("has-symbols")
            c = self.view.lookup(s.content_index, node.trigrams)
            return (base if c is None else base & c), False
        if isinstance(node, ast.Language):
            ids = self._lang_set(node.name)
            return (self.view.from_mask(np.isin(s.doc_lang, list(ids))) if ids else BitMap()), True
        if isinstance(node, ast.Branch):
            return self.view.from_mask(self._doc_branch_bits(node.pattern)), True
        if isinstance(node, RepoLeaf):
            ok = np.array([node.test(r) for r in s.repos], dtype=bool)
            return self.view.from_mask(ok[s.doc_repo]), True
        if isinstance(node, ast.And):
            parts = [self.candidates(c) for c in node.children]
            exact = all(e for _, e in parts)
            sets = sorted((b for b, _ in parts if b is not None), key=len)
            if not sets:
                return None, exact
            result = sets[0].copy()
            for b in sets[1:]:
                if not result:
                    break
                result &= b
            return result, exact
        if isinstance(node, ast.Or):
            parts = [self.candidates(c) for c in node.children]
            exact = all(e for _, e in parts)
            sets = [b for b, _ in parts if b is not None]
            if len(sets) < len(parts):  # one child may be true anywhere
                return None, exact
            return BitMap.union(*sets), exact
        if isinstance(node, ast.Not):
            inner, exact = self.candidates(node.child)
            if not exact:
                return None, False
            return (BitMap() if inner is None else self.view.all_docs - inner), True
        raise TypeError(f"unexpected plan node {node!r}")

    # -- verification -------------------------------------------------------------------------

    def _collect_positive(self, node: ast.Node, negated: bool = False) -> None:
        if isinstance(node, (ast.And, ast.Or)):
            for c in node.children:
                self._collect_positive(c, negated)
        elif isinstance(node, ast.Not):
            self._collect_positive(node.child, not negated)
        elif not negated:
            self.positive.append(node)

    def start(self) -> ast.Node | None:
        """Fold repository predicates into the tree: the root to verify, or None when no
        document of the shard can match. Collects the positive terms and identifiers."""
        s, stats = self.shard, self.stats
        stats.shardFilesConsidered = len(s.docs_where("all")) if s.dead else s.doc_count  # live documents only
        live = s.live_repos  # tombstoned repositories are not part of this version of the index
        root = _resolve_repos(self.plan.root, live)
        if isinstance(root, ast.Const) and not root.value or s.doc_count == 0 or not live:
            stats.shardsSkippedFilter = 1
            return None
        self._collect_positive(root)
        self.positive_ids = {id(n) for n in self.positive}
        self.positive_branch_masks = [self._branch_mask(n.pattern) for n in self.positive if isinstance(n, ast.Branch)]
        self.identifiers = identifier_leaves(self.positive)
        return root

    def run(self, exclude: BitMap | None = None) -> ShardResult:
        """Verify the shard's candidates in document order, except those in `exclude` (verified
        already: the definitions `search_shards` checks first)."""
        t0 = time.perf_counter_ns()
        s, stats = self.shard, self.stats
        root = self.start()
        if root is None:
            return self.result
        cand, _ = self.candidates(root)
        if self.plan.default_branch_only:
            on_default = s.docs_where("default-branch")
            cand = on_default if cand is None else cand & on_default
        if cand is None:
            cand = self.view.all_docs
        elif s.dead:
            cand = cand & self.view.all_docs  # (a new set: `cand` may be a cached one)
        stats.ngramMatches = len(cand)
        if exclude:
            cand = cand - exclude
        if not cand and not exclude:
            stats.shardsSkippedFilter = 1
            return self.result
        stats.shardsScanned = 1
        self._verify(root, cand, len(cand))
        stats.matchTreeSearch = time.perf_counter_ns() - t0
        return self.result

    def ranked_definitions(self) -> list[tuple[int, int]]:
        """``(definition_bonus, doc)`` for each document of the shard that defines a searched
        identifier (on the searched branches): what `search_shards` verifies first, best first.
        Call `start` first."""
        best: dict[int, int] = {}
        for leaf in self.identifiers:
            want = leaf.node.pattern.encode("utf-8")
            for doc, kind, written in self.shard.definitions(want):
                exact = written == want
                if exact or not leaf.node.case_sensitive:
                    best[doc] = max(best.get(doc, 0), definition_bonus(kind, exact))
        if best and self.plan.default_branch_only:
            on_default = self.shard.docs_where("default-branch")
            best = {doc: b for doc, b in best.items() if doc in on_default}
        return [(b, doc) for doc, b in best.items()]

    def check(self, root: ast.Node, doc: int, limit: int) -> FileMatch | None:
        """Evaluate `root` exactly on `doc`, collecting at most `limit` content ranges; a match
        is added to the result."""
        self.stats.filesConsidered += 1
        self.verified.add(doc)
        ctx = _DocContext(self, doc, limit)
        try:
            if not ctx.match(root):
                return None
            fm = ctx.file_match(self.positive_branch_masks)
        except RegexTimeout:  # this document ran out of its budget (or the search of its deadline)
            self.result.truncated = True
            return None
        self.result.files.append(fm)
        self.result.total_matches += fm.match_count
        return fm

    def _verify(self, root: ast.Node, docs: Iterable[int], n_cand: int) -> None:
        """Evaluate `root` exactly on each of `docs` until the budget or the deadline."""
        examined = 0
        for doc in docs:
            if time.monotonic() > self.deadline or (examined % 64 == 63 and self.cancelled and self.cancelled()):
                self.result.timed_out = self.result.truncated = True
                break
            examined += 1
            if self.check(root, doc, self.budget - self.result.total_matches + 1) is None:
                continue
            if self.result.total_matches > self.budget or len(self.result.files) > self.budget:
                self.result.truncated = examined < n_cand or self.result.total_matches > self.budget
                break
        self.stats.filesSkipped += n_cand - examined


def is_identifier(pattern: str) -> bool:
    """Whether a content term's pattern can name a symbol (a plain identifier)."""
    return _IDENTIFIER.fullmatch(pattern) is not None


def identifier_leaves(positive: list[ast.Node]) -> list[ContentLeaf]:
    """The positive content terms that can name a symbol (plain identifiers)."""
    return [leaf for leaf in positive if isinstance(leaf, ContentLeaf) and is_identifier(leaf.node.pattern)]


def searches_identifiers(plan: Plan) -> bool:
    """True when `plan` has a positive content term that is an identifier (see `ranked_definitions`)."""
    ev = ShardEvaluator.__new__(ShardEvaluator)
    ev.positive = []
    ev._collect_positive(plan.root)
    return bool(identifier_leaves(ev.positive))


class _DocContext:
    """One candidate document: lazy content, exact evaluation, match collection, score."""

    def __init__(self, ev: ShardEvaluator, doc: int, limit: int):
        self.ev = ev
        self.doc = doc
        self.limit = limit  # most content ranges worth collecting (the rest of the budget + 1)
        self._spans: dict[int, list[tuple[int, int]]] = {}
        self._content: bytes | None = None
        self._path: bytes | None = None
        self._symbol_names: list[bytes] | None = None
        self._symbol_matches: dict[int, list[int]] = {}  # id of a SymbolLeaf → its symbols here
        self._defined: set[bytes] | None = None

    @property
    def content(self) -> bytes:
        if self._content is None:
            self._content = self.ev.shard.content(self.doc)
            self.ev.stats.filesLoaded += 1
            self.ev.stats.contentBytesLoaded += len(self._content)
        return self._content

    @property
    def path(self) -> bytes:
        if self._path is None:
            self._path = self.ev.shard.doc_path(self.doc).encode("utf-8", "replace")
        return self._path

    @property
    def symbol_names(self) -> list[bytes]:
        if self._symbol_names is None:
            self._symbol_names = self.ev.shard.symbol_names(self.doc)
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
            return int(s.doc_lang[doc]) in ev._lang_set(node.name)
        if isinstance(node, ast.Branch):
            return bool(int(s.doc_branches[doc]) & int(ev._branch_mask(node.pattern)[int(s.doc_repo[doc])]))
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
            if self.content:
                self.ev.stats.regexpsConsidered += 1
                for span in leaf.regex.finditer(self.content, self.ev.deadline):
                    spans.append(span)
                    if len(spans) >= self.limit:
                        break
            self._spans[id(leaf)] = spans
        return spans

    def file_match(self, branch_masks: list[np.ndarray]) -> FileMatch:
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

    def _branches(self, masks: list[np.ndarray]) -> list[str]:
        s, doc = self.ev.shard, self.doc
        repo = s.repo(doc)
        bits = int(s.doc_branches[doc])
        if self.ev.plan.default_branch_only:
            bits &= 1
        elif masks:
            r = int(s.doc_repo[doc])
            want = 0
            for m in masks:
                want |= int(m[r])
            bits &= want
        return [b for i, b in enumerate(repo.branches) if bits >> i & 1]

    def _is_definition(self, a: int, b: int) -> bool:
        """True when content[a:b] is the name of a symbol defined on that line."""
        name = self.content[a:b]
        if self._defined is None:
            self._defined = set(self.symbol_names)
        if name not in self._defined:
            return False
        line = int(self.ev.shard.line_starts(self.doc).searchsorted(np.uint32(a), side="right"))
        first = self.ev.shard.symbol_range(self.doc).start
        return any(int(self.ev.shard.sym_line[first + k]) == line for k, n in enumerate(self.symbol_names) if n == name)


def evaluate_shard(
    shard: Shard,
    plan: Plan,
    budget: int,
    deadline: float,
    cancelled: Callable[[], bool] | None = None,
    exclude: BitMap | None = None,
) -> ShardResult:
    """Search one shard; never raises for a bad document (a shard-level failure is the caller's)."""
    return ShardEvaluator(shard, plan, budget, deadline, cancelled).run(exclude)
