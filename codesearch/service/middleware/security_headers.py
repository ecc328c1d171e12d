"""The security headers of every page: one Content-Security-Policy for the whole site, and the rest.

Why. Pages show text others chose: repository contents, OAuth client names, invite and audit
entries, error messages that repeat a path. Jinja escapes all of it; the policy is what still
holds if a page ever forgets: scripts only from our own ``/static`` files (no inline script, no
``eval``), no plugins, forms only to this service, no ``<base>`` that moves relative links, and
no framing by other sites (clickjacking the consent or settings buttons).

What every page gets (`page_headers`, sent by `templating.render`, so the error pages the
server's last-resort handler writes have them too; `SecurityHeaders` adds them to any other
``text/html`` response that lacks them):

* ``Content-Security-Policy`` = `POLICY`: ``default-src 'self'`` (scripts, styles, fetches,
  fonts: this origin), ``style-src 'self' 'unsafe-inline'`` (``style`` attributes the pages
  set, e.g. bar widths; inline styles cannot run code), ``img-src 'self' data:`` (the icons),
  ``object-src 'none'``, ``base-uri 'none'``, ``form-action 'self'``, ``frame-ancestors 'none'``;
* ``X-Frame-Options: DENY`` (``frame-ancestors`` for browsers that predate it);
* ``X-Content-Type-Options: nosniff``; ``Referrer-Policy: same-origin`` (addresses with search
  queries and repository paths never leave in a ``Referer``); ``Cache-Control: no-store``.

The one addition a page may make: `form-action` targets for forms whose answer redirects to
another site (browsers hold the redirect to the policy too). The OAuth consent page adds the
client's redirect URI; the pages with "sign in with …" buttons add the identity providers'
addresses (`codesearch.sso.providers.Provider.form_targets`).

Every response, page or not, gets ``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from codesearch.sso.providers import Provider

#: The site's policy, directive by directive (`csp` joins them).
DIRECTIVES = {
    "default-src": "'self'",
    "style-src": "'self' 'unsafe-inline'",
    "img-src": "'self' data:",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
#: What a page's ``form-action`` addition may look like: ``scheme:`` or ``scheme://host[:port]``.
_SOURCE = re.compile(r"^[a-z][a-z0-9+.-]*:(//(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?)?$")


def source_of(url: str) -> str | None:
    """The CSP source expression that allows `url`'s origin: ``https://host:port`` for a web
    address, ``scheme:`` for another scheme (an app's ``cursor://…`` redirect), ``https:`` as
    given; None when `url` has none (nothing that could smuggle another directive in)."""
    url = url.strip().lower()
    if url.endswith(":") and "/" not in url:
        candidate = url
    else:
        parts = urlsplit(url)
        if not parts.scheme:
            return None
        if parts.scheme in ("http", "https"):
            if not parts.hostname:
                return None
            host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
            try:
                port = parts.port
            except ValueError:
                return None
            candidate = f"{parts.scheme}://{host}" + (f":{port}" if port else "")
        else:
            candidate = f"{parts.scheme}:"
    return candidate if _SOURCE.match(candidate) else None


def csp(form_targets: Iterable[str] = ()) -> str:
    """The site's policy, with `form_targets` (URLs) added to ``form-action``."""
    directives = dict(DIRECTIVES)
    extra = [s for s in dict.fromkeys(source_of(t) for t in form_targets) if s]
    if extra:
        directives["form-action"] = " ".join([directives["form-action"], *extra])
    return "; ".join(f"{name} {value}" for name, value in directives.items())


def provider_targets(providers: Iterable[Provider]) -> list[str]:
    """The ``form-action`` additions of a page with a form per identity provider (`providers`:
    `codesearch.sso.providers.Provider`s), whose answers redirect to the provider."""
    return [target for p in providers for target in p.form_targets()]


#: The policy of a page without additions.
POLICY = csp()


def page_headers(form_targets: Iterable[str] = ()) -> dict[str, str]:
    """The headers of a page (see the module docstring)."""
    return {
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "X-Frame-Options": "DENY",
        "Content-Security-Policy": csp(form_targets) if form_targets else POLICY,
    }


#: For `SecurityHeaders`: what an HTML response gets when it lacks it (lower-case names, bytes).
_HTML_DEFAULTS = [(k.lower().encode(), v.encode()) for k, v in page_headers().items() if k not in ("Cache-Control",)]
_NOSNIFF = (b"x-content-type-options", b"nosniff")


class SecurityHeaders:
    """Pure ASGI middleware: ``nosniff`` on every response, and the page headers on any
    ``text/html`` response that does not set them itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {k.lower() for k, _ in headers}
                is_html = any(k.lower() == b"content-type" and v.lower().startswith(b"text/html") for k, v in headers)
                wanted = _HTML_DEFAULTS if is_html else [_NOSNIFF]
                added = [(k, v) for k, v in wanted if k not in present]
                if added:
                    message = {**message, "headers": headers + added}
            await send(message)

        await self.app(scope, receive, send_with_headers)
