"""Planning: from a parsed query to a plan that any shard can evaluate.

`plan(ast, contexts)` does the work that does not depend on a shard, once per search:

* every regex is compiled (RE2, or the bounded fallback) and every content, file-name and
  symbol pattern gets its trigram query (Russ Cox's algorithm for regexes);
* `context:` names are resolved to sets of repository names (an unknown name raises
  `SearchContextNotFound` before any shard is touched);
* the default branch rule is decided: without any `rev:` only the default branch is searched.

The evaluator (`codesearch.search.evaluate`) then, per shard: turns repository predicates into
constants, computes candidate documents from the cheapest predicates and the trigram posting
lists (smallest first), and verifies candidates in document order.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field
from typing import Protocol

from codesearch.errors import QueryError, SearchContextNotFound
from codesearch.index.quadgrams import literal_quads
from codesearch.query import ast
from codesearch.query.literal_set import LiteralSetMatcher, compile_literal_set
from codesearch.query.prefix_regex import PrefixRegexMatcher, compile_prefixed
from codesearch.query.regex import CompiledRegex, LiteralMatcher, compile_literal, compile_regex
from codesearch.query.regex_trigrams import regex_query
from codesearch.query.trigram_query import TrigramQuery, literal_query

#: A pattern's trigram query, kept as its compiled regex is (`compile_regex`): the analysis of a
#: regex takes up to half a millisecond, a literal's 50 µs, and every searcher plans each query;
#: the same patterns come back (a search run again, a page of results, the re-searches of hints).
#: Trigram queries are immutable.
_regex_query = functools.lru_cache(maxsize=512)(regex_query)
_literal_query = functools.lru_cache(maxsize=512)(literal_query)
#: A ``sym:`` pattern that matches only itself as a substring of a name (no regex syntax).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+")


class RepoFacts(Protocol):
    """What a repository predicate looks at (`RepoInfo` of the index has it)."""

    @property
    def name(self) -> str: ...
    @property
    def archived(self) -> bool: ...
    @property
    def fork(self) -> bool: ...
    @property
    def public(self) -> bool: ...


@dataclass(frozen=True)
class ContentLeaf(ast.Node):
    """A content term: where it can match (trigrams) and how to verify it (regex)."""

    node: ast.Content
    regex: CompiledRegex | LiteralMatcher | LiteralSetMatcher | PrefixRegexMatcher
    trigrams: TrigramQuery
    #: A literal's folded quadgrams, which the shards' quadgram filters narrow its candidates by
    #: (`codesearch.index.quadgrams`); none for a regex.
    quads: tuple[int, ...] = ()


@dataclass(frozen=True)
class FileLeaf(ast.Node):
    node: ast.FileName
    regex: CompiledRegex
    trigrams: TrigramQuery


@dataclass(frozen=True)
class SymbolLeaf(ast.Node):
    node: ast.Symbol
    regex: CompiledRegex
    trigrams: TrigramQuery
    #: For a pattern that is a plain name (letters, digits, ``_``), its folded quadgrams: a
    #: symbol's name is in its file's content, so the content's quadgram filters narrow the
    #: candidates as they do a literal's.
    quads: tuple[int, ...] = ()


@dataclass(frozen=True)
class RepoLeaf(ast.Node):
    """A repository predicate, decided per repository by `test`."""

    node: ast.Node
    regex: CompiledRegex | None = None
    names: frozenset[str] = frozenset()

    def test(self, repo: RepoFacts) -> bool:
        n = self.node
        if isinstance(n, ast.Repo):
            assert self.regex is not None  # planned with the repo: pattern (`plan`)
            return self.regex.search(repo.name.encode())
        if isinstance(n, (ast.RepoSet, ast.Context)):
            return repo.name in self.names
        if isinstance(n, ast.Archived):
            return {"yes": True, "no": not repo.archived, "only": repo.archived}[n.value]
        if isinstance(n, ast.Fork):
            return {"yes": True, "no": not repo.fork, "only": repo.fork}[n.value]
        if isinstance(n, ast.Visibility):
            return {"any": True, "public": repo.public, "private": not repo.public}[n.value]
        raise TypeError(n)


#: A compiled leaf of a plan's tree.
Leaf = ContentLeaf | FileLeaf | SymbolLeaf | RepoLeaf


@dataclass(frozen=True)
class Plan:
    """A planned query: the tree (with leaves replaced by compiled leaves) and global facts."""

    root: ast.Node  # ast.And/Or/Not/Const with ContentLeaf/FileLeaf/SymbolLeaf/RepoLeaf/Language/Branch leaves
    query: ast.Node
    default_branch_only: bool
    leaves: tuple[Leaf, ...] = field(default=())

    def __str__(self) -> str:
        return render(self.root)


#: The deepest query tree a plan is made for. Planning, evaluation and presentation walk the
#: tree recursively; no real query nests this deep, and a hostile one is refused with a 400
#: instead of exhausting the interpreter's stack.
MAX_QUERY_DEPTH = 100


def check(query: ast.Node, contexts: dict[str, set[str]] | None = None) -> None:
    """Raise what `plan` would raise for `query` (too deep, an unknown context), without planning:
    what the process that sends a query to the searchers needs before it sends it (each searcher
    plans it), so that it need not derive trigram queries it never uses."""
    _check_depth(query)
    for n in ast.walk(query):
        if isinstance(n, ast.Context) and n.name not in (contexts or {}):
            raise _unknown_context(n.name, contexts or {})


def _check_depth(query: ast.Node) -> None:
    levels = ast.depth(query)
    if levels > MAX_QUERY_DEPTH:
        raise QueryError(
            f"the query nests {levels} levels deep (groups and negations); at most {MAX_QUERY_DEPTH} are allowed"
        )


def _unknown_context(name: str, contexts: dict[str, set[str]]) -> SearchContextNotFound:
    # close names (a typo): the contexts are the configuration's, named to everyone
    return SearchContextNotFound(name, difflib.get_close_matches(name, sorted(contexts), n=3, cutoff=0.6))


def plan(query: ast.Node, contexts: dict[str, set[str]] | None = None) -> Plan:
    """Compile `query` into a `Plan`. `contexts` maps context names to repository names."""
    _check_depth(query)
    contexts = contexts or {}
    leaves: list[Leaf] = []

    def build(n: ast.Node) -> ast.Node:
        if isinstance(n, ast.And):
            return ast.And(tuple(build(c) for c in n.children))
        if isinstance(n, ast.Or):
            return ast.Or(tuple(build(c) for c in n.children))
        if isinstance(n, ast.Not):
            return ast.Not(build(n.child))
        leaf: Leaf
        if isinstance(n, ast.Content):
            if n.is_regex:
                regex = compile_regex(n.pattern, n.case_sensitive)  # first: it reports a bad pattern
                leaf = ContentLeaf(
                    n,
                    compile_literal_set(n.pattern, n.case_sensitive)
                    or compile_prefixed(n.pattern, n.case_sensitive)
                    or regex,
                    _regex_query(n.pattern, n.case_sensitive),
                )
            else:
                leaf = ContentLeaf(
                    n,
                    compile_literal(n.pattern, n.case_sensitive),
                    _literal_query(n.pattern, n.case_sensitive),
                    literal_quads(n.pattern),
                )
        elif isinstance(n, ast.FileName):
            leaf = FileLeaf(n, compile_regex(n.pattern, n.case_sensitive), _regex_query(n.pattern, n.case_sensitive))
        elif isinstance(n, ast.Symbol):
            leaf = SymbolLeaf(
                n,
                compile_regex(n.pattern, n.case_sensitive),
                _regex_query(n.pattern, n.case_sensitive),
                literal_quads(n.pattern) if _PLAIN_NAME.fullmatch(n.pattern) else (),
            )
        elif isinstance(n, ast.Repo):
            leaf = RepoLeaf(n, regex=compile_regex(n.pattern, False))
        elif isinstance(n, ast.RepoSet):
            leaf = RepoLeaf(n, names=frozenset(n.names))
        elif isinstance(n, ast.Context):
            if n.name not in contexts:
                raise _unknown_context(n.name, contexts)
            leaf = RepoLeaf(n, names=frozenset(contexts[n.name]))
        elif isinstance(n, (ast.Archived, ast.Fork, ast.Visibility)):
            leaf = RepoLeaf(n)
        else:  # Language, Branch, Const stay as they are
            return n
        leaves.append(leaf)
        return leaf

    root = build(query)
    has_rev = any(isinstance(n, ast.Branch) for n in ast.walk(query))
    return Plan(root, query, default_branch_only=not has_rev, leaves=tuple(leaves))


def render(node: ast.Node) -> str:
    """The plan as text, with each leaf's trigram query: for `explain` and tests."""
    if isinstance(node, ast.And):
        return "(and " + " ".join(render(c) for c in node.children) + ")"
    if isinstance(node, ast.Or):
        return "(or " + " ".join(render(c) for c in node.children) + ")"
    if isinstance(node, ast.Not):
        return f"(not {render(node.child)})"
    if isinstance(node, (ContentLeaf, FileLeaf, SymbolLeaf)):
        return f"{node.node}[{node.trigrams}]"
    if isinstance(node, RepoLeaf):
        return str(node.node)
    return str(node)
