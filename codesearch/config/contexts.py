"""Search contexts (docs/configuration.md#search-contexts): from the config's rules to the repository names they cover.

A context is the union of `include` (globs over repository names), `includeConnections` and
`includeTopics`, minus `exclude` (globs), `excludeConnections` and `excludeTopics`; topics
compare case-insensitively with globs. Globs are path-style (`*` stays within a segment).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codesearch.globs import glob_match

if TYPE_CHECKING:
    from codesearch.config.models import SearchContext


@dataclass(frozen=True)
class RepoFacts:
    """What context rules look at: the name, its connections and topics."""

    name: str
    connections: frozenset[str] = frozenset()
    topics: tuple[str, ...] = field(default_factory=tuple)


def _any(globs: Iterable[str], value: str, fold: bool = False) -> bool:
    if fold:
        value = value.lower()
    return any(glob_match(g.lower() if fold else g, value) for g in globs)


def resolve_context(ctx: SearchContext, repos: list[RepoFacts]) -> list[str]:
    """The names of the repositories the context `ctx` (a config `SearchContext`) covers."""
    out = []
    for r in repos:
        included = (
            _any(ctx.include, r.name)
            or bool(r.connections & set(ctx.include_connections))
            or any(_any(ctx.include_topics, t, fold=True) for t in r.topics)
        )
        excluded = (
            _any(ctx.exclude, r.name)
            or bool(r.connections & set(ctx.exclude_connections))
            or any(_any(ctx.exclude_topics, t, fold=True) for t in r.topics)
        )
        if included and not excluded:
            out.append(r.name)
    return sorted(out)
