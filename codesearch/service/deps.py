"""Typed FastAPI dependencies: what route handlers need from the app they are served by.

The routers of `codesearch.service.routes` and `codesearch.web.pages_*` are module-level ``APIRouter``s, the same
objects in every app a process builds (tests build many), so their handlers cannot close over an
app's store or settings. `api.build_app` gathers those in one `Services` and keeps it as
``app.state.services``; the getters below are the one place that reads it, and handlers declare
what they need by type::

    @router.get("/api/repos")
    def list_repos(identity: Caller, store: StoreDep, services: ServicesDep): ...

FastAPI resolves a dependency once per request, so the router-level ``Depends(require_identity)``
of the protected API and a handler's `Caller` authenticate the request once. A router with
settings of its own reads them through `app_services` too (`routes.search.search_settings`,
`routes.oauth.oauth_settings`). The web UI keeps its context here too (`Services.web`, read by
`codesearch.web.deps`), and its error pages (`Services.error_page`, read by `errors.respond`):
the app's state is this one container. Other readers of ``request.app``: `codesearch.audit.audit_of`
(the ``audit`` of the same `Services`, read by name: that package sits below this one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials

from codesearch.permissions import Identity
from codesearch.service.auth import API_KEY_SCHEME, BEARER_SCHEME
from codesearch.store import Store

if TYPE_CHECKING:
    from starlette.responses import Response

    from codesearch.app.context import ToolContext
    from codesearch.app.search import SearchSettings
    from codesearch.audit import AuditLog
    from codesearch.service.auth import Authenticator


@dataclass
class Services:
    """What one app's handlers share (built by `api.build_app`, kept as ``app.state.services``)."""

    get_store: Callable[[], Store | None]
    authenticator: Authenticator
    #: Identity -> the tools' `ToolContext` (repos, git, permissions of that caller)
    make_context: Callable[[Identity], ToolContext]
    public_url: str
    #: the data directory (None: an app without one, e.g. in tests)
    data_dir: str | None = None
    #: () -> what runs searches (a `SearcherPool` on Ray); called lazily
    get_searcher: Callable[[], Any] | None = None
    #: search-context names -> repo names, for names the store does not know
    contexts: dict[str, Any] | None = None
    #: the search routes' `codesearch.app.search.SearchSettings`
    search: SearchSettings | None = None
    #: the environment the app was built with (None: the process's), e.g. for webhook secrets
    environ: Mapping[str, str] | None = None
    audit: AuditLog | None = None
    #: the web UI's context when the web UI is installed (a `codesearch.web.templating.WebContext`, set by
    #: `codesearch.web.mount.install`; typed loosely since the web UI sits above this package)
    web: object | None = None
    #: a browser's error as a page (``error_page(request, status, code, message)``: the web UI's
    #: `codesearch.web.error_pages.error_page`); None: every error is JSON (`errors.respond`)
    error_page: Callable[[Request, int, str, str], Response] | None = None
    #: whether `get_store` was called once already (the first call may open the database)
    store_opened: bool = field(default=False, repr=False)


def app_services(request: Request) -> Services:
    """The app's `Services`: the one read of ``app.state`` for handlers."""
    services: Services = request.app.state.services
    return services


# The getters are coroutines although none awaits much: FastAPI runs a plain function dependency
# on the thread pool, a hop per request for what is an attribute lookup.


async def services(request: Request) -> Services:
    """The app's `Services`."""
    return app_services(request)


async def store(request: Request) -> Store | None:
    """The app's `Store` (None without a state database). The first call of an app may open the
    database: it runs on the thread pool, never on the event loop; later calls are a lookup."""
    s = app_services(request)
    if s.store_opened:
        return s.get_store()
    opened = await run_in_threadpool(s.get_store)
    s.store_opened = True
    return opened


async def require_identity(
    request: Request,
    _bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER_SCHEME)],
    _header: Annotated[str | None, Depends(API_KEY_SCHEME)],
) -> Identity:
    """The caller of an API route (401 when there is none; see `auth.Authenticator`). The two
    security schemes are declared for the OpenAPI document; the authenticator reads the headers."""
    return await app_services(request).authenticator.require(request)


ServicesDep = Annotated[Services, Depends(services)]
StoreDep = Annotated[Store | None, Depends(store)]
Caller = Annotated[Identity, Depends(require_identity)]

__all__ = [
    "Caller",
    "Services",
    "ServicesDep",
    "StoreDep",
    "app_services",
    "require_identity",
    "services",
    "store",
]
