"""What every code-host adapter returns, and how adapters are found.

An adapter lists the repositories of one connection (one entry of the config's
`connections`), applying the connection's filters (users/orgs/groups/projects/repos, topics,
exclude rules). It returns a `ListResult`: the repositories as `HostRepo`s and warnings for
partial failures (an org that does not exist is a warning, the rest of the sync continues).
A failure of the whole listing (bad token, host unreachable) raises a `HostError`.

Adapters are functions registered by connection `type`:

    @register("github")
    def list_github(name: str, conn: dict, token: str | None, http: HostHttp) -> ListResult: ...

`conn` is the connection's JSON object as validated by the config schema (defaults are not
applied: use ``conn.get(key, default)``). `token` is the resolved token, or None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from codesearch.globs import glob_match

#: codeHostType values of SPEC §1.
CODE_HOST_TYPES = ("github", "gitlab", "gitea", "gerrit", "bitbucketCloud", "bitbucketServer", "azuredevops", "genericGitHost")


@dataclass
class HostRepo:
    """One repository as a code host describes it."""

    name: str  # "<host of url>/<path>" (SPEC §1), e.g. github.com/owner/repo
    display_name: str  # the part after the host
    code_host_type: str  # one of CODE_HOST_TYPES
    clone_url: str  # http(s) URL without credentials (or file:// for local repos)
    web_url: str = ""  # the repository's page on the host
    #: a file's page on the host, with {branch} and {path} placeholders ("" when the host has none)
    file_url_template: str = ""
    default_branch: str | None = None  # short name ("main"), when the host says
    fork: bool = False
    archived: bool = False
    public: bool = True
    topics: list[str] = field(default_factory=list)
    size_bytes: int | None = None
    pushed_at: str | None = None  # ISO 8601
    stars: int | None = None
    external_id: str = ""  # the host's own id
    #: git-over-HTTPS user name for this repo's connection (SPEC §1), "" when none
    git_user: str = ""
    #: local repos (git connection with file://) are indexed in place, never fetched
    local_path: str | None = None


@dataclass
class ListResult:
    repos: list[HostRepo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


Adapter = Callable[..., ListResult]
_ADAPTERS: dict[str, Adapter] = {}


def register(kind: str):
    def deco(fn: Adapter) -> Adapter:
        _ADAPTERS[kind] = fn
        return fn

    return deco


def adapter_for(kind: str) -> Adapter:
    """The listing function for a connection type (importing the adapters on first use)."""
    if not _ADAPTERS:
        from codesearch.hosts import adapters  # noqa: F401  (registers every kind)
    try:
        return _ADAPTERS[kind]
    except KeyError:
        raise ValueError(f"unknown connection type {kind!r}") from None


def glob_any(patterns, value: str, *, case_insensitive: bool = False) -> bool:
    """True when any glob matches `value`.

    Path-style globs (`codesearch.globs`), as Sourcebot's micromatch reads them: ``*`` stays
    within one path segment, ``**`` crosses them, ``{a,b}`` alternates; so
    ``acme/platform/*`` excludes ``acme/platform/api`` but not ``acme/platform/infra/tf``.
    """
    if case_insensitive:
        value = value.lower()
    return any(glob_match(p.lower() if case_insensitive else p, value) for p in patterns or ())
