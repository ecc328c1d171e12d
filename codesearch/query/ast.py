"""The query AST: what the parser produces and the planner consumes.

Every node is a frozen dataclass and prints as an s-expression, so tests can compare trees as
strings (``(and content:"foo" file:"\\.ts$")``). Leaves fall into three groups:

* content matchers, checked against a file's bytes: `Content`, `Symbol`;
* document predicates, checked against the document table: `FileName`, `Language`, `Branch`;
* repository predicates, checked against a shard's repository table: `Repo`, `RepoSet`,
  `Context`, `Archived`, `Fork`, `Visibility`.

`Const` is what an empty query or ``()`` becomes (no results).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


class Node:
    """Base of every query node."""


@dataclass(frozen=True)
class And(Node):
    children: tuple[Node, ...]

    def __str__(self) -> str:
        return "(and " + " ".join(map(str, self.children)) + ")"


@dataclass(frozen=True)
class Or(Node):
    children: tuple[Node, ...]

    def __str__(self) -> str:
        return "(or " + " ".join(map(str, self.children)) + ")"


@dataclass(frozen=True)
class Not(Node):
    child: Node

    def __str__(self) -> str:
        return f"(not {self.child})"


@dataclass(frozen=True)
class Const(Node):
    value: bool

    def __str__(self) -> str:
        return "true" if self.value else "false"


@dataclass(frozen=True)
class Content(Node):
    """Text in a file's content. `pattern` is a regex when `is_regex`, else a literal."""

    pattern: str
    is_regex: bool
    case_sensitive: bool

    def __str__(self) -> str:
        kind = "regex" if self.is_regex else "substr"
        case = "" if self.case_sensitive else "(?i)"
        return f"{kind}:{case}{_q(self.pattern)}"


@dataclass(frozen=True)
class FileName(Node):
    """`file:`: an unanchored regex over the file's path."""

    pattern: str
    case_sensitive: bool

    def __str__(self) -> str:
        case = "" if self.case_sensitive else "(?i)"
        return f"file:{case}{_q(self.pattern)}"


@dataclass(frozen=True)
class Symbol(Node):
    """`sym:`: an unanchored regex over the names of symbol definitions."""

    pattern: str
    case_sensitive: bool

    def __str__(self) -> str:
        case = "" if self.case_sensitive else "(?i)"
        return f"sym:{case}{_q(self.pattern)}"


@dataclass(frozen=True)
class Language(Node):
    """`lang:`: the language name as written (matched case-insensitively)."""

    name: str

    def __str__(self) -> str:
        return f"lang:{_q(self.name)}"


@dataclass(frozen=True)
class Branch(Node):
    """`rev:`: a substring of an indexed ref name; ``*`` means every indexed ref."""

    pattern: str

    def __str__(self) -> str:
        return f"rev:{_q(self.pattern)}"


@dataclass(frozen=True)
class Repo(Node):
    """`repo:`: a regex over the full repository name, always case-insensitive."""

    pattern: str

    def __str__(self) -> str:
        return f"repo:{_q(self.pattern)}"


@dataclass(frozen=True)
class RepoSet(Node):
    """`reposet:a,b,c`: exactly these repository names."""

    names: tuple[str, ...]

    def __str__(self) -> str:
        return f"reposet:{_q(','.join(self.names))}"


@dataclass(frozen=True)
class Context(Node):
    """`context:name`: the repositories of a search context."""

    name: str

    def __str__(self) -> str:
        return f"context:{_q(self.name)}"


@dataclass(frozen=True)
class Archived(Node):
    """`archived:`: ``yes`` (archived too), ``no`` (not archived) or ``only``."""

    value: str

    def __str__(self) -> str:
        return f"archived:{self.value}"


@dataclass(frozen=True)
class Fork(Node):
    """`fork:`: ``yes`` (forks too), ``no`` (no forks) or ``only``."""

    value: str

    def __str__(self) -> str:
        return f"fork:{self.value}"


@dataclass(frozen=True)
class Visibility(Node):
    """`visibility:`: ``public``, ``private`` or ``any``."""

    value: str

    def __str__(self) -> str:
        return f"visibility:{self.value}"


REPO_PREDICATES = (Repo, RepoSet, Context, Archived, Fork, Visibility)
DOC_PREDICATES = (FileName, Language, Branch)
CONTENT_MATCHERS = (Content, Symbol)


def walk(node: Node) -> Iterator[Node]:
    """Yield `node` and every node below it, depth first (iteratively: a query may nest deeply)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (And, Or)):
            stack.extend(reversed(n.children))
        elif isinstance(n, Not):
            stack.append(n.child)


def positive_leaves(node: Node) -> Iterator[Node]:
    """The leaves of `node` not under a negation (an even number of `Not`s counts as none), left to
    right: the terms whose matches a search shows, ranks and counts (iteratively, like `walk`)."""
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, negated = stack.pop()
        if isinstance(n, (And, Or)):
            stack.extend((c, negated) for c in reversed(n.children))
        elif isinstance(n, Not):
            stack.append((n.child, not negated))
        elif not negated:
            yield n


def depth(node: Node) -> int:
    """How many levels the tree has (a leaf is 1), computed without recursion."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(n, (And, Or)):
            stack.extend((c, d + 1) for c in n.children)
        elif isinstance(n, Not):
            stack.append((n.child, d + 1))
    return deepest
