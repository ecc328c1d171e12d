"""Jinja2 for the pages: autoescaped, one `render` that gives every template the same context.

Every template extends ``base.html`` and receives:
- `identity` (`codesearch.permissions.Identity`), `user` (the `User` or None), `is_owner`;
- `csrf_token` (put it in every form as ``<input type=hidden name=csrf_token>``; the page's
  JavaScript sends it as ``X-CSRF-Token`` on API calls that change something);
- `anonymous_access` (whether visitors without an account may search);
- `root`: the path the app is mounted under (Serve's route prefix, e.g. ``/cs``; usually ""): every
  link and form action is written ``{{ root }}/path``, and JavaScript reads it from
  ``document.body.dataset.root``;
- `title` and whatever the page passes.

Counts in words go through the ``plural`` filter: ``{{ n|plural("file") }}``. A page's script is
a native ES module, written with ``{% from "_module.html" import page_module with context %}``
``{{ page_module("search-page.js") }}`` (the module and a preload of each module it imports).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, Template, select_autoescape

from codesearch import environment
from codesearch.plurals import plural
from codesearch.service.middleware.security_headers import page_headers
from codesearch.sessions import csrf
from codesearch.store.reread import Reread
from codesearch.web.assets import STATIC_DIR, TEMPLATES_DIR, current_version, static_prefix
from codesearch.web.model_presence import model_presence
from codesearch.web.modules import imports_of
from codesearch.web.security_settings import SecuritySettings

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext
    from codesearch.mail import Mailer
    from codesearch.permissions import Identity
    from codesearch.service.auth import Authenticator
    from codesearch.service.deps import Services
    from codesearch.sso.iap import IapSignIn
    from codesearch.sso.providers import Provider
    from codesearch.store import Store

#: Templates are files of the installed package: read once per process. Jinja's default
#: (`auto_reload`) stats the file on every `get_template`, which the results page calls per file
#: drawn (3 ms of a 20-file page's rendering, measured with py-spy in a replica).
_env = Environment(
    loader=FileSystemLoader(TEMPLATES_DIR),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
    auto_reload=False,
)
#: ``{{ n|plural("line") }}`` → "1 line", "1,200 lines" (`codesearch.plurals`)
_env.filters["plural"] = lambda n, word, many=None: plural(int(n), word, many, grouped=True)
#: ``module_imports("search-page.js")``: the modules to preload with it (`codesearch.web.modules`)
_env.globals["module_imports"] = imports_of


@dataclass
class WebContext:
    """What the page routers share: the app's state and helpers (built by `api.build_app`).

    The account settings are read from the environment by the app's builder (`api.build_app`,
    in each Serve replica) and passed in: `session_max_age_s` from ``AUTH_SESSION_MAX_AGE_SECONDS``,
    `keys_owner_only` from ``DISABLE_API_KEY_CREATION_FOR_NON_OWNER_USERS`` /
    ``DISABLE_API_KEY_USAGE_FOR_NON_OWNER_USERS``, `require_approval` from
    ``REQUIRE_APPROVAL_NEW_MEMBERS`` (`codesearch.environment`); the defaults are those of an
    unset environment.

    What the API's handlers share too (the store, the authenticator, the tools' context, the public
    URL) is not copied here: it is read from the app's one `Services` (`codesearch.service.deps`),
    which holds this context as ``services.web``."""

    services: Services
    extra: dict[str, Any] = field(default_factory=dict)
    session_max_age_s: int = environment.DEFAULT_SESSION_MAX_AGE_S
    keys_owner_only: bool = False
    #: `codesearch.sso.Provider`s by id (the config's `identityProviders`)
    identity_providers: dict[str, Provider] = field(default_factory=dict)
    #: REQUIRE_APPROVAL_NEW_MEMBERS: sign-ups wait for an owner
    require_approval: bool = False
    #: the config's gcp-iap entry (`codesearch.sso.iap.IapSignIn`), or None: requests signed by Google Cloud
    #: IAP are signed in by `codesearch.web.iap`
    iap: IapSignIn | None = None
    #: the switches the environment forces (`security_settings.forced_from_env`: AUTH_CREDENTIALS_LOGIN_ENABLED,
    #: AUTH_EMAIL_CODE_LOGIN_ENABLED, REQUIRE_APPROVAL_NEW_MEMBERS)
    forced_security: dict[str, bool] = field(default_factory=dict)
    #: outgoing mail (`codesearch.mail`: SMTP_CONNECTION_URL, EMAIL_FROM_ADDRESS), or None: no mail is sent
    mailer: Mailer | None = None
    #: the owners' security settings as this replica knows them (`codesearch.web.security_settings`)
    security: SecuritySettings = field(init=False)
    #: whether a language model is configured: the pages then offer search assist (`codesearch.web.model_presence`)
    models: Reread[bool] = field(init=False)

    def __post_init__(self) -> None:
        forced = dict(self.forced_security)
        if self.require_approval:  # the older way of saying REQUIRE_APPROVAL_NEW_MEMBERS=true
            forced.setdefault("require_approval", True)
        self.security = SecuritySettings(lambda: self.services.get_store(), forced)
        self.models = model_presence(lambda: self.services.get_store())

    @property
    def get_store(self) -> Callable[[], Store | None]:
        return self.services.get_store

    @property
    def authenticator(self) -> Authenticator:
        return self.services.authenticator

    @property
    def make_context(self) -> Callable[[Identity], ToolContext]:
        return self.services.make_context

    @property
    def public_url(self) -> str:
        return self.services.public_url

    @property
    def anonymous_access(self) -> bool:
        """Whether anonymous access was forced on at start (the authenticator's; owners switch the rest)."""
        return self.services.authenticator.access.forced

    def identity_of(self, request: Request) -> Identity | None:
        """The caller of a page, or None when the visitor must sign in first: the identity the
        session middleware resolved, else anonymous when anonymous access is on (as this request
        saw it: owners switch it at run time), else None."""
        ident: Identity | None = getattr(request.state, "identity", None)
        if ident is not None:
            return ident
        anon = getattr(request.state, "anonymous_access", None)
        if anon is None:  # not through the session middleware: what the service was started with
            anon = self.anonymous_access
        return self.authenticator.anonymous_identity() if anon else None


def template(name: str) -> Template:
    """One of the templates (for a part of a page: `render` renders whole pages)."""
    return _env.get_template(name)


def render_text(request: Request, template: str, **context: Any) -> str:
    """`template` rendered with the common context (see the module docstring), as text."""
    identity = getattr(request.state, "identity", None)
    user = getattr(identity, "user", None)
    root = request.scope.get("root_path", "").rstrip("/")
    base = {
        "request": request,
        "identity": identity,
        "user": user,
        "is_owner": getattr(user, "role", None) == "OWNER",
        "csrf_token": csrf.token_of(request),
        "anonymous_access": getattr(request.state, "anonymous_access", False),
        "title": "codesearch",
        "root": root,
        "static": static_prefix(root, current_version(STATIC_DIR)),
    }
    base.update(context)
    return _env.get_template(template).render(**base)


def render(
    request: Request, template: str, status_code: int = 200, *, form_targets: Iterable[str] = (), **context: Any
) -> HTMLResponse:
    """`template` rendered with the common context (see the module docstring), with the site's
    security headers (`security_headers.page_headers`; `form_targets`: URLs the page's forms may
    be redirected to, e.g. an identity provider's)."""
    return HTMLResponse(
        render_text(request, template, **context), status_code=status_code, headers=page_headers(form_targets)
    )
