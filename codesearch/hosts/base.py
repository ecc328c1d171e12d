"""What every code-host adapter returns, and how adapters register.

An adapter lists the repositories of one connection (one entry of the config's
`connections`), applying the connection's filters (users/orgs/groups/projects/repos, topics,
exclude rules). It returns a `ListResult`: the repositories as `HostRepo`s and warnings for
partial failures (an org that does not exist is a warning, the rest of the sync continues).
A failure of the whole listing (bad token, host unreachable) raises a `HostError`.

Adapters are functions registered by connection `type`:

    @register("github")
    def list_github(name: str, conn: dict, token: str | None, http: HostHttp) -> ListResult: ...

`conn` is the connection's JSON object as validated by the config schema (defaults are not
applied: use ``conn.get(key, default)``). `token` is the resolved token, or None. Callers find an
adapter with `codesearch.hosts.adapters.adapter_for`, which has imported them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from codesearch.errors import HostError, HostNotFound
from codesearch.globs import glob_match

if TYPE_CHECKING:
    import httpx

    from codesearch.hosts.http import HostHttp

#: One object of a host's JSON answer (a repository, a project, ...).
JsonObject = dict[str, Any]

#: codeHostType values (docs/configuration.md#connection-kinds).
CODE_HOST_TYPES = (
    "github",
    "gitlab",
    "gitea",
    "gerrit",
    "bitbucketCloud",
    "bitbucketServer",
    "azuredevops",
    "genericGitHost",
)


@dataclass
class HostRepo:
    """One repository as a code host describes it."""

    name: str  # "<host of url>/<path>" (docs/configuration.md#connection-kinds), e.g. github.com/owner/repo
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
    #: git-over-HTTPS user name for this repo's connection (docs/configuration.md#connection-kinds), "" when none
    git_user: str = ""
    #: local repos (git connection with file://) are indexed in place, never fetched
    local_path: str | None = None


@dataclass
class ListResult:
    repos: list[HostRepo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


Adapter = Callable[..., ListResult]
#: every registered adapter by connection type (look one up with `adapters.adapter_for`, which has imported them all)
ADAPTERS: dict[str, Adapter] = {}

#: A kind's listing version, bumped when its adapter starts to list the same config differently
#: (names, display names, ...): the store then sees its connections as changed, so each is listed
#: again, and its repositories re-indexed, once after an upgrade (`Store.upsert_connection`).
#: ``git`` 2: local repositories without an origin are shown by their folder under the base path.
LISTING_VERSIONS: dict[str, int] = {"git": 2}


def listing_version(kind: str) -> int:
    return LISTING_VERSIONS.get(kind, 1)


def register(kind: str) -> Callable[[Adapter], Adapter]:
    def deco(fn: Adapter) -> Adapter:
        ADAPTERS[kind] = fn
        return fn

    return deco


def glob_any(patterns: Iterable[str] | None, value: str, *, case_insensitive: bool = False) -> bool:
    """True when any glob matches `value`.

    Path-style globs (`codesearch.globs`), as Sourcebot's micromatch reads them: ``*`` stays
    within one path segment, ``**`` crosses them, ``{a,b}`` alternates; so
    ``acme/platform/*`` excludes ``acme/platform/api`` but not ``acme/platform/infra/tf``.
    """
    if case_insensitive:
        value = value.lower()
    return any(glob_match(p.lower() if case_insensitive else p, value) for p in patterns or ())


def excluded(exclude: JsonObject, *, fork: bool, archived: bool, name: str, globs: str = "repos") -> bool:
    """The exclusions hosts share: `exclude.forks`, `exclude.archived`, and the globs of
    `exclude[globs]` (``exclude.repos`` unless said otherwise) on `name`."""
    return (
        (bool(exclude.get("forks")) and fork)
        or (bool(exclude.get("archived")) and archived)
        or glob_any(exclude.get(globs), name)
    )


def topics_excluded(topics: Iterable[str] | None, conn: JsonObject) -> bool:
    """Sourcebot's topic filters, globs compared lower-cased: drop a repo when one of its topics
    matches ``exclude.topics``, or when ``topics`` is set and none of its topics matches it."""
    lowered = [t.lower() for t in topics or ()]
    exclude = conn.get("exclude") or {}
    if exclude.get("topics") and any(glob_any(exclude["topics"], t, case_insensitive=True) for t in lowered):
        return True
    return bool(conn.get("topics")) and not any(glob_any(conn["topics"], t, case_insensitive=True) for t in lowered)


def host_of(url: str) -> str:
    """`host[:port]` of a URL, the root of repo names (docs/configuration.md#connection-kinds)."""
    u = urlsplit(url)
    return (u.hostname or "") + (f":{u.port}" if u.port else "")


def response_json(r: httpx.Response) -> Any:
    """The JSON body of an `httpx.Response`, or a `HostError` naming the URL (without its query)."""
    try:
        return r.json()
    except ValueError:
        raise HostError(
            f"{r.request.url.copy_with(query=None)} answered with a body that is not JSON", status=r.status_code
        ) from None


def json_pages(
    http: HostHttp,
    first_url: str,
    params: dict[str, Any],
    headers: dict[str, str],
    next_url: Callable[[httpx.Response, list[Any], list[JsonObject]], str | None],
    what: str,
) -> list[JsonObject]:
    """Every item of a listing whose pages are JSON lists: GET `first_url` with `params`, then each
    URL `next_url(response, page body, items so far)` gives until it gives None. A page that is not
    a list is a `HostError` ("… not a list of `what`")."""
    items: list[JsonObject] = []
    r = http.get(first_url, params=params, headers=headers)
    while True:
        body = response_json(r)
        if not isinstance(body, list):
            raise HostError(f"{first_url} answered with a body that is not a list of {what}", url=first_url)
        items.extend(body)
        nxt = next_url(r, body, items)
        if not nxt:
            return items
        r = http.get(nxt, headers=headers)


#: A warning for an entity that is not there: the text, or a function of the HTTP status.
Missing = str | Callable[[int | None], str]


def one_object(http: HostHttp, url: str, headers: dict[str, str]) -> list[JsonObject]:
    """The JSON object at `url` as a listing of one: what `Collector.entity` gathers for one
    configured repository."""
    return [response_json(http.get(url, headers=headers))]


class Collector:
    """What one connection's listing gathers: the host's raw repo objects (`raw`), warnings naming
    the connection, and the `ListResult` they turn into.

    `host` is the host's name in the standard "not found" warning of `entity`.
    """

    def __init__(self, name: str, host: str = ""):
        self.name = name
        self.host = host
        self.result = ListResult()
        self.raw: list[JsonObject] = []
        self._seen: set[str] = set()

    def warn(self, what: str) -> None:
        self.result.warnings.append(f"connection {self.name}: {what}")

    def fetch(
        self, fetch: Callable[[], list[JsonObject]], missing: Missing, *, also: tuple[int, ...] = ()
    ) -> list[JsonObject] | None:
        """`fetch()`, or None when the host answers that the entity is not there (`HostNotFound`,
        or a status in `also`); then the warning is `missing` (a string, or a function of the
        status). Any other `HostError` propagates."""
        try:
            return fetch()
        except HostError as e:
            if not isinstance(e, HostNotFound) and e.status not in also:
                raise
            self.warn(
                missing if isinstance(missing, str) else missing(404 if isinstance(e, HostNotFound) else e.status)
            )
            return None

    def gather(
        self, fetch: Callable[[], list[JsonObject]], missing: Missing, *, also: tuple[int, ...] = ()
    ) -> list[JsonObject] | None:
        """`fetch` (as above), its items added to `raw`."""
        items = self.fetch(fetch, missing, also=also)
        if items is not None:
            self.raw.extend(items)
        return items

    def entity(
        self, kind: str, entity: str, fetch: Callable[[], list[JsonObject]], *, also: tuple[int, ...] = ()
    ) -> None:
        """`gather` the repos of one configured org/user/group/repo; when it is not there, warn
        "<host> <kind> '<entity>' not found or not visible to the token (<status>)"."""
        self.gather(
            fetch,
            lambda status: f"{self.host} {kind} {entity!r} not found or not visible to the token ({status})",
            also=also,
        )

    def first(self, key: str) -> bool:
        """True the first time `key` is seen (and remembers it)."""
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def finish(
        self,
        key: Callable[[JsonObject], str],
        excluded: Callable[[JsonObject], bool],
        convert: Callable[[JsonObject], HostRepo],
    ) -> ListResult:
        """The result: each raw repo not `excluded` and not already kept (by `key`), converted."""
        for r in self.raw:
            if not excluded(r) and self.first(key(r)):
                self.result.repos.append(convert(r))
        return self.result
