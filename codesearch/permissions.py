"""Who may see which repository: the one place repo visibility is decided (SPEC §7).

Every repo access goes through `visible_repos(identity)` / `can_see(identity, repo)`: the HTTP
routes, the MCP tools (`codesearch.tools`) and the web pages alike. Searches carry
`visible_repos(identity)` to the searchers (`SearchOptions.visible_repos`), which search as if
the other repositories were not indexed (`codesearch.search.visibility`: no cap fills with hidden
files, no stat counts them); `filter_search_response` checks the answer once more on its way out.
Today every caller sees every repo; the permission-syncing work changes these functions and
nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Identity:
    """The caller: a user (authenticated with an API key) or anonymous (`user` is None)."""

    user: object | None = None  # codesearch.store.User

    @property
    def anonymous(self) -> bool:
        return self.user is None

    @property
    def user_id(self) -> int | None:
        return getattr(self.user, "id", None)

    @property
    def role(self) -> str | None:
        return getattr(self.user, "role", None)


ANONYMOUS = Identity(None)


def visible_repos(identity: Identity) -> frozenset[int] | None:
    """The ids of the repos `identity` may see, or None for "every repo" (today: always None)."""
    return None


def can_see(identity: Identity, repo) -> bool:
    """Whether `identity` may see `repo` (a `Repo` row, or anything with an `id`)."""
    allowed = visible_repos(identity)
    return allowed is None or repo.id in allowed


def filter_repos(identity: Identity, repos: Iterable) -> list:
    allowed = visible_repos(identity)
    return list(repos) if allowed is None else [r for r in repos if r.id in allowed]


def filter_search_response(identity: Identity, response: dict) -> dict:
    """Drop files (and their repositoryInfo) of repos `identity` may not see, fixing the counts."""
    allowed = visible_repos(identity)
    if allowed is None:
        return response
    files = [f for f in response.get("files", []) if f.get("repositoryId") in allowed]
    if len(files) == len(response.get("files", [])):
        return response
    out = dict(response)
    out["files"] = files
    out["repositoryInfo"] = [r for r in response.get("repositoryInfo", []) if r.get("id") in allowed]
    stats = dict(response.get("stats") or {})
    if stats:
        stats["fileCount"] = len(files)
        stats["actualMatchCount"] = sum(len(f["fileName"]["matchRanges"]) + sum(len(c["matchRanges"]) for c in f["chunks"])
                                        for f in files)
        # Hidden repos' matches must not show in the counts: only "there is more" survives.
        exhaustive = bool(response.get("isSearchExhaustive", True))
        stats["totalMatchCount"] = stats["actualMatchCount"] + (0 if exhaustive else 1)
        out["stats"] = stats
    return out
