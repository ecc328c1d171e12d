"""Evaluate a plan on one shard: candidates from the index, verification, ranking signals.

1. Repository predicates become constants for the shard's repositories; a query that is then
   false is answered without touching the shard (`shardsSkippedFilter`).
2. Candidates: exact bitmaps for cheap predicates (language, branch, repository) from the
   document table; over-approximations for content, file-name and symbol terms from their
   trigram queries, intersecting the smallest posting lists first and stopping at the first
   empty result (a literal's stop earlier, once its quadgram filters can narrow what is left:
   `ENOUGH_FOR_FILTERS`, and a long one looks up `THIN` of its trigrams). Negations of inexact
   terms cannot prune and yield "all documents".
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

import functools
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from pyroaring import BitMap

from codesearch.index.format import pack_masks
from codesearch.index.shard import Shard
from codesearch.query import ast
from codesearch.query.planner import ContentLeaf, FileLeaf, Plan, RepoFacts, RepoLeaf, SymbolLeaf
from codesearch.query.regex import RegexTimeout
from codesearch.query.trigram_query import ALL, AND, NONE, TrigramQuery
from codesearch.search.document import DocContext, DocReader, FileMatch, truncate_match
from codesearch.search.options import MAX_COUNTED_PER_FILE, Stats
from codesearch.search.ranking import EXACT_CASE_BONUS, kind_weights

#: Candidates of a literal few enough for its quadgram filters to narrow: its AND of trigrams stops
#: intersecting once at most this many are left. Each trigram costs a posting list read and
#: decoded on every shard, an any-case one the union of up to 8 (an any-case rare literal at
#: 10 GB decoded 1,400 lists and took 48 ms when the caches were cold, 14 ms warm); the filters
#: hold every folded quadgram of the literal and test a document in a few probes. Measured at
#: 10 GB, cold / warm, with 16, 64, 128, 256 and 1,024: 128 gave the any-case rare literal
#: 16.5 / 11 ms and the any-case no-match literal 7 / 5 ms (from 48 / 14 and 20 / 7) with the
#: same content verified, to the byte; the exact no-match literal 3.6 ms cold (from 6.8), the
#: exact rare literal 6.2 (from 7.5) for 1.1 MB more verified (4.5 MB: the filters are folded).
ENOUGH_FOR_FILTERS = 128
#: The most trigrams of such a literal looked up on a shard, spread evenly over it: a long
#: identifier's 26 trigrams (208 dictionary lookups in any case) cost more to size on every shard
#: than the two or three rarest of them are worth, and the filters hold all of its quadgrams.
#: At 10 GB the any-case no-match literal of 28 characters: 4.5 → 3.6 ms warm, 6.5 → 5.5 cold
#: (8 lost on rare literals: fewer rare ones to choose from).
THIN = 12

#: A plain term that can name a symbol: its definitions are verified and ranked first.
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


@dataclass
class ShardResult:
    files: list[FileMatch] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    total_matches: int = 0
    truncated: bool = False
    timed_out: bool = False


class TrigramLookup(Protocol):
    """Where candidates' posting lists come from: a shard's `TrigramIndex`, or a batch's
    `codesearch.search.postings.PostingTable` over it (the same answers, looked up once for many
    queries)."""

    def cardinalities(self, trigrams: Iterable[int]) -> list[int]: ...

    def postings(self, trigram: int) -> BitMap: ...

    def stored_size(self, trigram: int) -> int: ...


class _ShardView:
    """Per-shard facts the evaluator needs, computed on demand."""

    def __init__(self, shard: Shard, stats: Stats):
        self.shard = shard
        self.stats = stats
        self.all_docs = shard.docs_where("all")

    def lookup(self, index: TrigramLookup, q: TrigramQuery, enough: int = 0) -> BitMap | None:
        """Candidate documents of a trigram query (None = every document). With `enough`, the
        caller narrows them further (a literal's quadgram filters): an AND looks up at most
        `THIN` of its trigrams and stops once at most `enough` documents are left."""
        if q.op == ALL:
            return None
        if q.op == NONE:
            return BitMap()
        tris = _asked(q, bool(enough))
        self.stats.ngramLookups += len(tris)
        cards = sorted(zip(index.cardinalities(tris), tris, strict=True))
        if q.op == AND:
            result: BitMap | None = None
            if cards and cards[0][0] == 0:
                return BitMap()
            for _, t in cards:
                if result is not None and len(result) <= enough:
                    break
                p = self._postings(index, t)
                if result is None:
                    result = p.copy()
                else:
                    result &= p
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

    def _postings(self, index: TrigramLookup, trigram: int) -> BitMap:
        self.stats.indexBytesLoaded += index.stored_size(trigram)
        return index.postings(trigram)

    def from_mask(self, mask: np.ndarray) -> BitMap:
        return BitMap(np.flatnonzero(mask).astype(np.uint32))


@dataclass(frozen=True)
class _Leaves:
    """The positive leaves of a tree to verify, their ids, its identifiers and branch patterns:
    what `ShardEvaluator.start` needs of the tree, the same on every shard whose repositories
    leave the plan's tree as it is."""

    positive: list[ast.Node]
    ids: frozenset[int]
    identifiers: list[ContentLeaf]
    branches: tuple[str, ...]

    @classmethod
    def of(cls, root: ast.Node) -> _Leaves:
        positive = list(ast.positive_leaves(root))
        return cls(
            positive,
            frozenset(id(n) for n in positive),
            identifier_leaves(positive),
            tuple(n.pattern for n in positive if isinstance(n, ast.Branch)),
        )


#: `_Leaves` of the plans' trees searched lately, by the tree's id (the tree is kept with them,
#: so its id cannot be reused while it is here); emptied when it grows past `_LEAVES_KEPT`.
_LEAVES: dict[int, tuple[ast.Node, _Leaves]] = {}
_LEAVES_KEPT = 256


def _leaves_of(root: ast.Node) -> _Leaves:
    """`_Leaves.of(root)`, found once per plan instead of once per shard."""
    hit = _LEAVES.get(id(root))
    if hit is not None and hit[0] is root:
        return hit[1]
    leaves = _Leaves.of(root)
    if len(_LEAVES) >= _LEAVES_KEPT:
        _LEAVES.clear()
    _LEAVES[id(root)] = (root, leaves)
    return leaves


@functools.lru_cache(maxsize=4096)
def _asked(q: TrigramQuery, thin: bool) -> tuple[int, ...]:
    """The trigrams of `q` that `_ShardView.lookup` looks up: all, or `THIN` of a long AND spread
    over it when `thin`. The same on every shard, so chosen once per search, not once per shard."""
    tris = tuple(q.trigrams)
    if thin and q.op == AND and not q.subs and len(tris) > THIN:
        tris = tuple(tris[round(i * (len(tris) - 1) / (THIN - 1))] for i in range(THIN))
    return tris


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
        self,
        shard: Shard,
        plan: Plan,
        budget: int,
        deadline: float,
        cancelled: Callable[[], bool] | None = None,
        reader: DocReader | None = None,
        file_matches: int = 0,
        content_lookup: TrigramLookup | None = None,
    ):
        self.shard = shard
        #: Where the content terms' posting lists are looked up: the shard's index, or a batch's
        #: table of them for all its queries.
        self.content_lookup: TrigramLookup = shard.content_index if content_lookup is None else content_lookup
        #: The most match ranges a file keeps (0: all; `SearchOptions.file_matches`).
        self.file_matches = file_matches
        #: Where candidates' contents and symbol names are read: the shard, or a batch's reader
        #: that reads each document once for all the queries that check it.
        self.reader: DocReader = shard if reader is None else reader
        self.plan = plan
        self.budget = max(1, budget)
        self.deadline = deadline
        self.cancelled = cancelled
        self.result = ShardResult()
        self.stats = self.result.stats
        self.view = _ShardView(shard, self.stats)
        self.lang_ids: dict[str, set[int]] = {}
        self.branch_masks: dict[str, list[int]] = {}
        self.positive: list[ast.Node] = []
        self.positive_ids: frozenset[int] = frozenset()
        self.identifiers: list[ContentLeaf] = []
        self.positive_branch_masks: list[list[int]] = []
        self.verified = BitMap()  # documents checked so far

    # -- per-shard predicate data -------------------------------------------------------------

    def lang_set(self, name: str) -> set[int]:
        if name not in self.lang_ids:
            want = name.lower()
            self.lang_ids[name] = {i for i, lang in enumerate(self.shard.languages) if lang.lower() == want}
        return self.lang_ids[name]

    def branch_mask(self, pattern: str) -> list[int]:
        """Per repository of the shard: the bit mask of branches whose name contains `pattern`
        (Python ints: a repository may have more than 64 branches)."""
        if pattern not in self.branch_masks:
            masks = []
            for r in self.shard.repos:
                m = 0
                for i, b in enumerate(r.branches):
                    if pattern == "*" or pattern in b:
                        m |= 1 << i
                masks.append(m)
            self.branch_masks[pattern] = masks
        return self.branch_masks[pattern]

    def _doc_branch_bits(self, pattern: str) -> np.ndarray:
        """Per document: whether it is on a branch `pattern` names. The masks are rows of
        `Shard.branch_words` words (format.py: ``doc.brch``); one word is the common case."""
        s = self.shard
        masks = pack_masks(self.branch_mask(pattern), s.branch_words)[s.doc_repo]
        if s.branch_words == 1:
            one: np.ndarray = (s.doc_branches[:, 0] & masks[:, 0]) != 0
            return one
        bits: np.ndarray = ((s.doc_branches & masks) != 0).any(axis=1)
        return bits

    # -- candidates ---------------------------------------------------------------------------

    def _filtered(self, trigrams: TrigramQuery, quads: tuple[int, ...], within: BitMap | None = None) -> BitMap | None:
        """The documents (of `within`, when given) whose content may hold a term: its trigram
        query's candidates, narrowed by the shards' quadgram filters when the term has `quads`
        (then the lookup stops early: `ENOUGH_FOR_FILTERS`). None: every document."""
        found = self.view.lookup(self.content_lookup, trigrams, ENOUGH_FOR_FILTERS if quads else 0)
        if found is None:
            return None
        if within is not None:
            found = within & found
        return self.shard.quad_filters.select(found, quads) if quads else found

    def candidates(self, node: ast.Node) -> tuple[BitMap | None, bool]:
        """(documents where `node` may be true or None for all, whether that set is exact)."""
        s = self.shard
        if isinstance(node, ast.Const):
            return (None if node.value else BitMap()), True
        if isinstance(node, ContentLeaf):
            return self._filtered(node.trigrams, node.quads), False
        if isinstance(node, FileLeaf):
            return self.view.lookup(s.name_index, node.trigrams), False
        if isinstance(node, SymbolLeaf):
            base = s.docs_where("has-symbols")
            c = self._filtered(node.trigrams, node.quads, base)
            return (base if c is None else c), False
        if isinstance(node, ast.Language):
            ids = self.lang_set(node.name)
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
        leaves = _leaves_of(root) if root is self.plan.root else _Leaves.of(root)
        self.positive, self.positive_ids, self.identifiers = leaves.positive, leaves.ids, leaves.identifiers
        self.positive_branch_masks = [self.branch_mask(pattern) for pattern in leaves.branches]
        return root

    def run(self, exclude: BitMap | None = None) -> ShardResult:
        """Verify the shard's candidates in document order, except those in `exclude` (verified
        already: the definitions `search_shards` checks first)."""
        t0 = time.perf_counter_ns()
        v = self.verification(exclude)
        if v is not None:
            for doc in v.candidates:
                if not v.step(doc):
                    break
            v.finish(t0)
        return self.result

    def verification(self, exclude: BitMap | None = None) -> Verification | None:
        """Fold the repository predicates, compute the candidates (less `exclude`) and count them:
        the `Verification` that checks them, or None when no document needs checking."""
        s, stats = self.shard, self.stats
        root = self.start()
        if root is None:
            return None
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
            return None
        stats.shardsScanned = 1
        return Verification(self, root, cand)

    def ranked_definitions(self, limit: int) -> list[tuple[int, int]]:
        """``(definition_bonus, doc)`` for the documents of the shard that define a searched
        identifier (on the searched branches), best first (then in document order), at most
        `limit` of them: what `search_shards` verifies first. Each definition holds a match, so
        more than the budget's worth cannot all be checked first; the others are verified with
        the rest of the shard. Call `start` first."""
        s = self.shard
        weights = kind_weights(s.symbol_kinds)
        docs_of, bonus_of = [], []
        for leaf in self.identifiers:
            found = s.definitions(leaf.node.pattern.encode("utf-8"))
            counted = found.exact | (not leaf.node.case_sensitive)
            docs_of.append(found.docs[counted])
            bonus_of.append((np.where(found.exact, EXACT_CASE_BONUS, 0) + weights[found.kinds])[counted])
        docs, bonus = (
            np.concatenate(docs_of or [np.zeros(0, np.uint32)]),
            np.concatenate(bonus_of or [np.zeros(0, int)]),
        )
        order = np.lexsort((-bonus, docs))  # by document, its best definition first
        docs, bonus = docs[order], bonus[order]
        first = np.ones(docs.size, dtype=bool)
        first[1:] = docs[1:] != docs[:-1]
        docs, bonus = docs[first], bonus[first]
        if docs.size and self.plan.default_branch_only:
            on_default = s.docs_where("default-branch")
            kept = np.fromiter((d in on_default for d in docs.tolist()), dtype=bool, count=docs.size)
            docs, bonus = docs[kept], bonus[kept]
        best = np.lexsort((docs, -bonus))[:limit]  # best first, then by document
        return list(zip(bonus[best].tolist(), docs[best].tolist(), strict=True))

    def check(self, root: ast.Node, doc: int, limit: int) -> FileMatch | None:
        """Evaluate `root` exactly on `doc`, collecting at most `limit` content ranges; a match
        is added to the result. With a per-file cap (`file_matches`), up to `MAX_COUNTED_PER_FILE`
        ranges are counted, the file keeps `file_matches` of them (scored on all it found) and
        only those spend the budget: the rest is the file's `FileMatch.more`."""
        self.stats.filesConsidered += 1
        self.verified.add(doc)
        if self.file_matches:
            limit = max(limit, MAX_COUNTED_PER_FILE)
        ctx = DocContext(self, doc, limit)
        try:
            if not ctx.match(root):
                return None
            fm = ctx.file_match(self.positive_branch_masks)
        except RegexTimeout:  # this document ran out of its budget (or the search of its deadline)
            self.result.truncated = True
            return None
        if self.file_matches and fm.match_count > self.file_matches:
            fm.more_exact = fm.match_count < limit
            truncate_match(fm, self.file_matches)
        self.result.files.append(fm)
        self.result.total_matches += fm.match_count
        return fm


class Verification:
    """One query's candidates in one shard, checked one at a time in document order until the
    budget is spent or the deadline passes. Whoever holds it feeds `step` the candidates in order
    and stops at the first False: a search its own candidates (`ShardEvaluator.run`), a batch the
    candidates of many queries merged in document order, so that each document is read once for
    all of them (`codesearch.search.batch`); `finish` then counts the candidates never examined."""

    def __init__(self, ev: ShardEvaluator, root: ast.Node, candidates: BitMap):
        self.ev = ev
        self.root = root
        self.candidates = candidates
        self.count = len(candidates)
        self.examined = 0

    def step(self, doc: int) -> bool:
        """Check `doc` (the next candidate); False once the search of this shard is over."""
        ev, result = self.ev, self.ev.result
        if time.monotonic() > ev.deadline or (self.examined % 64 == 63 and ev.cancelled and ev.cancelled()):
            result.timed_out = result.truncated = True
            return False
        self.examined += 1
        if ev.check(self.root, doc, ev.budget - result.total_matches + 1) is None:
            return True
        if result.total_matches > ev.budget or len(result.files) > ev.budget:
            result.truncated = self.examined < self.count or result.total_matches > ev.budget
            return False
        return True

    def finish(self, started_ns: int) -> None:
        self.ev.stats.filesSkipped += self.count - self.examined
        self.ev.stats.matchTreeSearch = time.perf_counter_ns() - started_ns


def is_identifier(pattern: str) -> bool:
    """Whether a content term's pattern can name a symbol (a plain identifier)."""
    return _IDENTIFIER.fullmatch(pattern) is not None


def identifier_leaves(positive: list[ast.Node]) -> list[ContentLeaf]:
    """The positive content terms that can name a symbol (plain identifiers)."""
    return [leaf for leaf in positive if isinstance(leaf, ContentLeaf) and is_identifier(leaf.node.pattern)]


def searches_identifiers(plan: Plan) -> bool:
    """True when `plan` has a positive content term that is an identifier (see `ranked_definitions`)."""
    return bool(identifier_leaves(list(ast.positive_leaves(plan.root))))
