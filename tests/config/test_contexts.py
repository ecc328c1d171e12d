"""Search contexts from config rules: a table of rules → repository names."""

from __future__ import annotations

import pytest

from codesearch.config import load_config
from codesearch.config.contexts import RepoFacts, resolve_context

REPOS = [
    RepoFacts("github.com/acme/api", frozenset({"gh"}), ("Backend", "go")),
    RepoFacts("github.com/acme/web", frozenset({"gh"}), ("frontend",)),
    RepoFacts("github.com/acme/tools/cli", frozenset({"gh"}), ()),
    RepoFacts("gitlab.com/team/infra", frozenset({"gl"}), ("ops",)),
    RepoFacts("gitlab.com/team/legacy", frozenset({"gl", "gh"}), ("backend", "legacy")),
]


@pytest.mark.parametrize("rules,want", [
    ({"include": ["github.com/acme/*"]}, ["github.com/acme/api", "github.com/acme/web"]),
    ({"include": ["github.com/acme/**"]}, ["github.com/acme/api", "github.com/acme/tools/cli", "github.com/acme/web"]),
    ({"includeConnections": ["gl"]}, ["gitlab.com/team/infra", "gitlab.com/team/legacy"]),
    ({"includeTopics": ["BACK*"]}, ["github.com/acme/api", "gitlab.com/team/legacy"]),
    ({"includeConnections": ["gh"], "excludeTopics": ["legacy"]},
     ["github.com/acme/api", "github.com/acme/tools/cli", "github.com/acme/web"]),
    ({"includeConnections": ["gh", "gl"], "excludeConnections": ["gl"]},
     ["github.com/acme/api", "github.com/acme/tools/cli", "github.com/acme/web"]),
    ({"include": ["**"], "exclude": ["gitlab.com/**", "*/acme/web"]}, ["github.com/acme/api", "github.com/acme/tools/cli"]),
    ({}, []),
])
def test_context_rules(rules, want):
    cfg = load_config('{"contexts": {"c": %s}}' % __import__("json").dumps(rules))
    assert resolve_context(cfg.contexts["c"], REPOS) == want
