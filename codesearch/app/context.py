"""What every tool runs against: the caller, the state database, the searcher and the git data.

A `ToolContext` is built per call by whoever exposes the tools (the MCP server, the REST chat
route, the `ask_codebase` agent) and carries the caller's `Identity`. It is the one door to
repositories for the tools: `repo(name)` refuses names the caller may not see exactly as it
refuses unknown names (so a tool never reveals that a hidden repo exists), and `search` filters
every search response through `codesearch.permissions`.

Errors raised by tools are `CodesearchError`s whose message is written for the agent: what was
wrong and what to do instead (e.g. "use list_repos to see repository names").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codesearch.errors import RepositoryNotFound
from codesearch.permissions import Identity, can_see, filter_search_response, visible_repos
from codesearch.search.options import DEFAULT_PUBLIC_URL, SearchOptions
from codesearch.store.models import Repo


@dataclass
class ToolContext:
    """The caller and the service parts a tool call may use.

    `search(query, options)` runs a search over the index and returns the ``POST /api/search``
    response (a `SearcherPool` or an in-process `Searcher`); `store` is the state database
    (`codesearch.store.Store`); `data_dir` holds the git mirrors (``<data_dir>/repos/<id>``).
    """

    store: Any
    search_fn: Callable[[str, SearchOptions], dict[str, Any]]
    #: the caller: always given (never a default that would see everything)
    identity: Identity
    data_dir: str | None = None
    public_url: str = DEFAULT_PUBLIC_URL
    contexts: dict[str, set[str]] = field(default_factory=dict)
    #: seconds a search may take
    search_timeout_s: float = 20.0
    #: when set, only these repos (full names) exist for the tools (``ask_codebase``'s `repos`)
    allowed_repos: frozenset[str] | None = None
    #: long tools report progress here (a message per step); the MCP server streams it to the
    #: client as progress notifications when the client asked for them
    progress: Callable[[str], None] | None = None

    def report(self, message: str) -> None:
        if self.progress is not None:
            with contextlib.suppress(Exception):  # a client that went away must not fail the tool
                self.progress(message)

    def may_see(self, repo: Repo) -> bool:
        return can_see(self.identity, repo) and (self.allowed_repos is None or repo.name in self.allowed_repos)

    # ------------------------------------------------------------------ repos

    def repo(self, name: str) -> Repo:
        """The repo row named `name` (its full name, host included), if the caller may see it."""
        name = (name or "").strip()
        row: Repo | None = self.store.find_repo(name) if name and self.store is not None else None
        if row is None or not self.may_see(row):
            raise RepositoryNotFound(
                f"repository {name!r} not found: give the full name including the host "
                "(e.g. github.com/org/repo); list_repos shows the names"
            )
        return row

    def visible_repos(self) -> list[Repo]:
        """Every repo the caller may see, by name."""
        rows: list[Repo] = []
        page = 1
        while True:
            got, total = self.store.list_repos(page=page, per_page=100)
            rows += [r for r in got if self.may_see(r)]
            if not got or page * 100 >= total:
                return rows
            page += 1

    def git_dir(self, repo: Repo) -> str:
        """Where the repo's git objects are: the repository itself for local repos indexed in
        place, else its bare mirror under the data directory."""
        from codesearch.git import slots
        from codesearch.git.paths import git_dir_of

        slots.claim(self.caller_key())  # the git work of this request is this caller's (`slots`)
        if repo.local_path and os.path.isdir(repo.local_path):
            return git_dir_of(repo.local_path)
        if self.data_dir:
            path = os.path.join(self.data_dir, "repos", str(repo.id))
            if os.path.isdir(path):
                return path
        raise RepositoryNotFound(f"repository {repo.name!r} has not been cloned yet: try again after its first sync")

    def caller_key(self) -> str:
        """Who the git slots (`codesearch.git.slots`) count this work against: the user, or every
        anonymous caller together."""
        user_id = self.identity.user_id
        return "anonymous" if user_id is None else f"user:{user_id}"

    @staticmethod
    def default_ref(repo: Repo) -> str:
        return repo.default_branch or "HEAD"

    # ------------------------------------------------------------------ search

    def search(
        self, query: str, *, regex: bool, case_sensitive: bool, matches: int, context_lines: int = 0
    ) -> dict[str, Any]:
        options = SearchOptions(
            matches=matches,
            context_lines=context_lines,
            is_regex=regex,
            case_sensitive=case_sensitive,
            timeout_s=self.search_timeout_s,
            public_url=self.public_url,
            contexts=self.contexts,
            visible_repos=visible_repos(self.identity),
        )
        resp = filter_search_response(self.identity, self.search_fn(query, options))
        if self.allowed_repos is not None:
            resp = {**resp, "files": [f for f in resp.get("files", []) if f.get("repository") in self.allowed_repos]}
        return resp
