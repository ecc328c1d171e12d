"""The HTTP API (docs/http-api.md), as a FastAPI app built by `build_app`.

The app is built inside each Serve replica (a builder function, not a module-level app), so
nothing unpicklable crosses processes. Routes:

- public: ``GET /api/health``, ``GET /api/version``, ``GET /api/openapi.json``, ``GET /robots.txt``;
- behind authentication (`codesearch.service.auth`; the routes are `codesearch.service.routes`):
  ``POST /api/search``, ``POST /api/stream_search`` (`routes/search.py`), ``GET /api/repos``,
  ``GET /api/repos/status``, ``GET /api/connections[/status]``, ``GET /api/jobs`` (`routes/repos.py`),
  ``GET /api/source`` (`routes/source.py`), and the MCP server at ``/api/mcp`` (`routes/mcp.py`,
  over the tools of `codesearch.tools`), ``POST /api/explain``, ``GET /api/tree``,
  ``GET /api/commits`` (`routes/git.py`), ``GET /api/blame``, ``GET /api/commit``, ``GET /api/diff``
  (`routes/history.py`), ``POST /api/find_definitions``, ``POST /api/find_references``,
  ``POST /api/tree`` (`routes/codenav.py`), ``POST /api/chat/blocking``, ``POST /api/chat``
  (streamed), ``PATCH /api/chat/<id>``, ``GET /api/models`` (`routes/chat.py`), ``/api/insights``
  (`routes/insights.py`), ``GET /api/usage`` (`routes/usage.py`);
- OAuth 2.0 for MCP clients (`routes/oauth.py`, protocol in `codesearch.oauth`): the
  ``/.well-known/`` metadata, ``/oauth/register``, ``/oauth/token``, ``/oauth/revoke``; access
  tokens open the MCP endpoint (``/api/mcp``) only;
- the web UI (`codesearch.web.mount`): its pages, ``/oauth/authorize`` (the consent page) and
  ``GET /chat/<id>`` (a chat's page) included.

The search is delegated to a `searcher` with ``search(query, options) -> dict`` (a `SearcherPool`
on Ray, whose ``actors`` the streaming route awaits one by one); state (repos, API keys, jobs,
search contexts) comes from the `Store` of the data directory. This module holds no search or
database logic. Responses are gzipped when worth it, streams excepted (`middleware/compression.py`).
Every request is named and measured by `observability.ObserveRequests` (an ``X-Request-Id``, the
HTTP metrics of `codesearch.runtime.metrics`); its ``Host`` must be one the service answers for
(`allowed_hosts.CheckHost`: 421 otherwise); every page carries the site's security headers
(`codesearch.service.middleware.security_headers`). The routers are module-level
``APIRouter``s; what their handlers need (the store, the caller, the settings) comes through the
typed dependencies of `deps`, from the one `deps.Services` this function keeps on ``app.state``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import PlainTextResponse

from codesearch import audit, environment, forwarded, permissions
from codesearch.app.search import SearchSettings, max_match_count
from codesearch.errors import ServiceUnavailable
from codesearch.git import slots as git_slots
from codesearch.mail import MAIL_STATUS_KEY, mailer_from_env
from codesearch.oauth import server as oauth_server
from codesearch.runtime import request_ids
from codesearch.runtime.integrity import refusal_summary
from codesearch.search.options import DEFAULT_PUBLIC_URL, SearchOptions
from codesearch.service import auth, deps, errors
from codesearch.service.middleware import allowed_hosts
from codesearch.service.middleware.compression import Compress
from codesearch.service.middleware.limits import RequestLimits
from codesearch.service.middleware.observability import ObserveRequests
from codesearch.service.middleware.security_headers import SecurityHeaders
from codesearch.service.routes import audit as routes_audit
from codesearch.service.routes import chat as routes_chat
from codesearch.service.routes import chat_manage as routes_chat_manage
from codesearch.service.routes import codenav as routes_codenav
from codesearch.service.routes import ee as routes_ee
from codesearch.service.routes import git as routes_git
from codesearch.service.routes import history as routes_history
from codesearch.service.routes import insights as routes_insights
from codesearch.service.routes import mcp, webhooks
from codesearch.service.routes import oauth as routes_oauth
from codesearch.service.routes import permissions as routes_permissions
from codesearch.service.routes import repos as routes_repos
from codesearch.service.routes import search as routes_search
from codesearch.service.routes import search_assist as routes_search_assist
from codesearch.service.routes import skills as routes_skills
from codesearch.service.routes import source as routes_source
from codesearch.service.routes import suggest as routes_suggest
from codesearch.service.routes import usage as routes_usage

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext
    from codesearch.store import Store

log = logging.getLogger(__name__)


#: ``/robots.txt``, as Sourcebot's: crawlers walking every file at every revision would load the
#: server for nothing, so all are turned away except the link-preview fetchers of chat tools (a
#: shared link still unfurls); search and AI-training crawlers are not among them.
ROBOTS_TXT = """User-Agent: Slackbot
User-Agent: Twitterbot
User-Agent: LinkedInBot
User-Agent: Discordbot
User-Agent: facebookexternalhit
User-Agent: TelegramBot
User-Agent: WhatsApp
Allow: /

User-Agent: *
Disallow: /
"""


def _version() -> str:
    from codesearch import version

    return version()


def lazy_store(data_dir: str | None, database_url: str | None = None) -> Callable[[], Store | None]:
    """A function returning the data directory's `Store`, opened on first use (None without a data dir)."""
    box: dict[str, Store] = {}
    lock = threading.Lock()

    def get_store() -> Store | None:
        if data_dir is None:
            return None
        if "store" not in box:
            with lock:
                if "store" not in box:
                    from codesearch.store import Store

                    box["store"] = Store.open(data_dir, database_url=database_url)
        return box["store"]

    return get_store


def _mail_status(get_store: Callable[[], Store | None]) -> Callable[[dict[str, Any]], None]:
    """Where the mailer records the outcome of each mail (the owners' security page shows it)."""

    def record(status: dict[str, Any]) -> None:
        store = get_store()
        if store is not None:
            store.put_service_setting(MAIL_STATUS_KEY, status)

    return record


def build_app(
    get_searcher: Callable[[], Any],
    *,
    public_url: str = DEFAULT_PUBLIC_URL,
    contexts: dict[str, Any] | None = None,
    data_dir: str | None = None,
    database_url: str | None = None,
    get_store: Callable[[], Store | None] | None = None,
    anonymous_access: bool | None = None,
    enable_public_access: bool = False,
    environ: Mapping[str, str] | None = None,
    max_matches: int | None = None,
    search_timeout_s: float | None = None,
    limits: dict[str, Any] | None = None,
    identity_providers: list[Any] | None = None,
) -> FastAPI:
    """The FastAPI app.

    `get_searcher()` returns the object that runs searches (called lazily). `get_store()` returns
    the `Store` (default: opened lazily from `data_dir` / `database_url`; None without either:
    no keys can be checked and listings are empty). Anonymous access is forced on by
    `anonymous_access` when given, else by ``FORCE_ENABLE_ANONYMOUS_ACCESS`` from `environ` (default
    `os.environ`), read now, or `enable_public_access` (the deprecated
    ``settings.enablePublicAccess``); when not forced, the owners' switch on ``/settings/access``
    decides (`codesearch.service.anonymous`). `contexts` maps
    search-context names to repo names, used for names the store does not know. `max_matches`
    caps a search's ``matches`` (default ``DEFAULT_MAX_MATCH_COUNT`` from `environ`, or 10000);
    `search_timeout_s` is the time a search may take before it answers with what it found
    (default 30 s); `limits` are keyword arguments of `limits.RequestLimits` (body size and time).
    `identity_providers` are the config's typed `identityProviders` entries
    (`codesearch.config.IdentityProvider`): single sign-on and account linking (`codesearch.sso`),
    their client ids and secrets read from `environ` when a flow needs them.
    """
    environment.configure_logging(environ)  # SOURCEBOT_LOG_LEVEL, in every replica
    # every caller's git reads in this process share its slots (`codesearch.git.slots`)
    git_slots.install(git_slots.settings_from_environ(environ))
    request_ids.install_log_filter()  # this process's log records name the request they belong to
    if get_store is None:
        get_store = lazy_store(data_dir, database_url)
    if anonymous_access is None:
        anonymous_access = auth.anonymous_access_enabled(environ, enable_public_access)
    policy = permissions.PermissionPolicy(get_store, environ=environ)
    oauth_settings = oauth_server.OAuthSettings.from_environ(environ)  # AUTH_URL and the OAuth lifetimes
    # loopback, AUTH_URL's and the public URL's hosts, CODESEARCH_ALLOWED_HOSTS
    hosts = allowed_hosts.AllowedHosts.from_environ(environ, [public_url])
    forwarded.trusted_proxies(environ)  # a bad CODESEARCH_TRUSTED_PROXIES fails now, not on a sign-in
    authenticator = auth.Authenticator(get_store, anonymous_access, policy=policy, oauth=oauth_settings)

    app = FastAPI(
        title="codesearch", version=_version(), openapi_url="/api/openapi.json", docs_url=None, redoc_url=None
    )
    errors.install(app)
    auth.install(app)
    # Added before the web UI's session middleware, so it runs inside it (and reuses the session
    # that middleware looked up): credentials, body size and body time are checked before any
    # route reads a body.
    app.add_middleware(RequestLimits, authenticator=authenticator, **(limits or {}))
    audit_env = os.environ if environ is None else environ
    audit_log = audit.AuditLog(
        get_store, audit.retention_days(audit_env), enabled=audit.logging_enabled(audit_env)
    )  # SOURCEBOT_EE_AUDIT_LOGGING_ENABLED=false: nothing recorded, nothing pruned
    if audit_log.retention > 0 and (data_dir is not None or database_url is not None):
        audit_log.start()  # pruning on schedule, also when nothing is recorded

    @app.get("/robots.txt", include_in_schema=False)
    async def robots() -> PlainTextResponse:
        return PlainTextResponse(ROBOTS_TXT)

    # Answered on the event loop, never behind the thread pool that sync routes share.
    @app.get("/api/health")
    async def health() -> dict[str, Any]:
        # 200 either way: the service answers; "degraded" says part of the index is unreadable
        # and being rebuilt (counts only, no names: health answers anyone; `runtime.integrity`)
        index = refusal_summary(os.path.join(data_dir, "index")) if data_dir else None
        return {"status": "ok"} if index is None else {"status": "degraded", "index": index}

    @app.get("/api/version")
    async def api_version() -> dict[str, str]:
        return {"version": _version()}

    def make_context(identity: permissions.Identity) -> ToolContext:
        from codesearch.app.context import ToolContext

        def search(query: str, options: SearchOptions) -> dict[str, Any]:
            # the searchers are reached only when a tool searches: a git read needs none
            searcher = get_searcher()
            if searcher is None:
                raise ServiceUnavailable("this service has no searchers")
            result: dict[str, Any] = searcher.search(query, options=options)
            return result

        return ToolContext(
            store=get_store(),
            search_fn=search,
            identity=identity,
            data_dir=data_dir,
            public_url=public_url,
            contexts=dict(contexts or {}),
        )

    def has_models() -> bool:
        store = get_store()
        return bool(store is not None and store.list_language_models())

    # What the module-level routers' handlers get through `deps` (the one reader of it).
    search = SearchSettings(
        get_searcher,
        get_store,
        public_url=public_url,
        contexts=contexts,
        max_matches=max_matches or max_match_count(environ),
        search_timeout_s=search_timeout_s,
    )
    services = app.state.services = deps.Services(
        get_store=get_store,
        authenticator=authenticator,
        make_context=make_context,
        public_url=public_url,
        data_dir=data_dir,
        get_searcher=get_searcher,
        contexts=contexts,
        search=search,
        environ=environ,
        audit=audit_log,
    )

    protected = APIRouter(dependencies=[Depends(deps.require_identity)])
    for routes in (
        routes_search,
        routes_suggest,
        routes_repos,
        routes_audit,
        routes_usage,
        routes_permissions,
        routes_source,
        routes_ee,
        routes_skills,
        routes_search_assist,
    ):
        protected.include_router(routes.router)
    app.include_router(protected)
    app.include_router(webhooks.router)  # signed by the code host, not by an API key
    app.include_router(routes_oauth.router)  # OAuth 2.0 for MCP clients
    for routes in (routes_git, routes_history, routes_codenav, routes_chat, routes_chat_manage, routes_insights):
        app.include_router(routes.router)
    mcp.install(
        app, authenticator, make_context, has_models, version=_version(), audit_log=audit_log, allowed_hosts=hosts
    )

    from codesearch.sso import build_providers
    from codesearch.sso.iap import build_iap
    from codesearch.sso.required import RequiredLinks
    from codesearch.web import mount as web_mount
    from codesearch.web.security_settings import forced_from_env
    from codesearch.web.templating import WebContext

    providers = build_providers(identity_providers, environ)
    required_links = RequiredLinks(get_store, providers, public_url)
    if required_links:  # accountLinkingRequired: API callers who have not linked are refused
        authenticator.gate = required_links
    web = WebContext(
        services=services,
        identity_providers=providers,
        iap=build_iap(identity_providers, environ),
        forced_security=forced_from_env(os.environ if environ is None else environ),
        mailer=mailer_from_env(os.environ if environ is None else environ, record_status=_mail_status(get_store)),
        session_max_age_s=environment.session_max_age_seconds(environ),
        keys_owner_only=environment.api_key_creation_owner_only(environ),
    )
    web_mount.install(app, web=web)
    # gzip outside the routes and the session middleware (pages, JSON, static files), never on
    # the streams (`compression.STREAMED_PATHS`).
    app.add_middleware(Compress)
    app.add_middleware(SecurityHeaders)  # nosniff everywhere; the page headers on any HTML that lacks them
    # Before anything reads the request (the session, the credentials, the body): another host's is refused.
    app.add_middleware(allowed_hosts.CheckHost, hosts=hosts)
    # Added last, so it is the outermost of the app's middlewares: it names and times every
    # request, those the host check, the limits or the session middleware refuse included.
    app.add_middleware(ObserveRequests, routes=lambda: app.router.routes)
    return app
