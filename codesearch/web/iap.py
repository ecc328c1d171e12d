"""Requests signed by Google Cloud IAP: each one is signed in as the user its assertion names.

With a ``gcp-iap`` entry in the config (`codesearch.sso.iap`), `IapMiddleware` looks at every
request (static files aside) for ``x-goog-iap-jwt-assertion``:

* no such header: nothing happens; the request goes on as any other (API keys, the session
  cookie, anonymous access). Load balancer health checks and callers inside the network that do
  not pass through IAP arrive so.
* a valid assertion: the request is signed in as its user. ``request.state`` gets ``iap_user``
  (the `User`, which `Authenticator.identify_request` takes before the session cookie),
  ``identity`` (what the pages use) and ``csrf_token``: a token bound to the user
  (`IapSignIn.csrf_token`), which forms and ``X-CSRF-Token`` must carry on unsafe methods, since
  IAP's own cookie rides along with cross-site requests just as a session cookie would.
* anything else is answered at once, never treated as anonymous: 401 when the assertion does not
  check out (invalid, expired, another audience or issuer, unsigned, an unknown key, two headers),
  403 when an owner switched the provider off on the security page (`security_settings`; the
  assertion is not even checked), when the user waits for an owner's approval or may not sign up,
  or is deactivated or a service account (never signed in interactively), 503 when the assertion
  cannot be checked (Google's keys unreachable, the audience not resolvable, no state database).
  Under ``/api`` the answer is the API's error JSON (``statusCode``, ``errorCode``, ``message``),
  elsewhere a page that says the same.

The assertion is never logged, nor echoed in an answer. A user's first request records
``login.sso`` (and ``member.request`` when they must wait) in the audit log.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import anyio
from starlette.requests import Request

from codesearch import audit
from codesearch.permissions import Identity
from codesearch.sessions import route_path
from codesearch.sso.flow import FlowError
from codesearch.sso.iap import ASSERTION_HEADER, IapRefused, IapUnavailable

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import ASGIApp, Receive, Scope, Send

    from codesearch.sso.accounts import Outcome
    from codesearch.sso.iap import IapSignIn
    from codesearch.store.models import User
    from codesearch.web.templating import WebContext

log = logging.getLogger(__name__)

_HEADER = ASSERTION_HEADER.encode("latin-1")


class _Answer(Exception):
    """The request is answered here: `status`, API `error_code`, page `heading`, `message`."""

    def __init__(self, status: int, error_code: str, heading: str, message: str):
        super().__init__(message)
        self.status, self.error_code, self.heading, self.message = status, error_code, heading, message


class _Pending(_Answer):
    """The user waits for an owner's approval: 403, and their first request asks for it."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(
            403,
            "INSUFFICIENT_PERMISSIONS",
            "Waiting for approval",
            "Your account waits for an owner of this server to approve it; try again later.",
        )
        self.outcome = outcome


class IapMiddleware:
    """Pure ASGI; runs inside the session middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, web: WebContext) -> None:
        self.app = app
        self.web = web

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        iap = getattr(self.web, "iap", None)
        if scope["type"] != "http" or iap is None:
            await self.app(scope, receive, send)
            return
        values = [v for k, v in scope.get("headers", []) if k.lower() == _HEADER]
        path = route_path(scope)
        if not values or path.startswith("/static/"):
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        try:
            if len(values) > 1:
                raise IapRefused("the request carries it more than once")
            user, csrf, outcome = await anyio.to_thread.run_sync(self._sign_in, iap, values[0].decode("latin-1"))
        except _Pending as p:
            if p.outcome.created:
                audit.record(
                    Request(scope), Identity(p.outcome.user), "member.request", p.outcome.user.email, provider=iap.id
                )
            await self._answer(scope, receive, send, p)
            return
        except _Answer as a:
            await self._answer(scope, receive, send, a)
            return
        except IapRefused as e:
            log.info("gcp-iap: %s %s refused: %s", scope.get("method"), path, e.why)
            await self._answer(scope, receive, send, _Answer(401, "NOT_AUTHENTICATED", "Not signed in", str(e)))
            return
        except IapUnavailable as e:
            log.error("gcp-iap: cannot check a request's assertion: %s", e)
            await self._answer(
                scope,
                receive,
                send,
                _Answer(
                    503,
                    "SERVICE_UNAVAILABLE",
                    "Sign-in is unavailable",
                    f"Google Cloud IAP's signed header cannot be checked right now: {e}",
                ),
            )
            return
        identity = self.web.authenticator.identity(user, via="iap")
        state.update(iap_user=user, iap_csrf_token=csrf, identity=identity, csrf_token=csrf)
        if outcome.created or outcome.linked_now:
            audit.record(
                Request(scope), Identity(user), "login.sso", user.email, provider=iap.id, created=outcome.created
            )
        await self.app(scope, receive, send)

    def _sign_in(self, iap: IapSignIn, assertion: str) -> tuple[User, str, Outcome]:
        """(user, CSRF token, `accounts.Outcome`) of a request's assertion; in a worker thread."""
        if not self.web.security.current().provider_on(iap.id):  # an owner switched it off (`security_settings`)
            raise _Answer(
                403,
                "INSUFFICIENT_PERMISSIONS",
                "Turned off",
                f"Signing in with {iap.provider.name} is turned off on this server.",
            )
        claims = iap.verify(assertion)
        store = self.web.get_store()
        if store is None:
            raise IapUnavailable("this server has no state database, so nobody can sign in")
        try:
            outcome = iap.sign_in(store, claims, require_approval=self.web.security.current().require_approval)
        except FlowError as e:
            log.info("gcp-iap: sign-in refused (%s)", e.kind)
            raise _Answer(
                e.status if e.status in (403, 409) else 403, "INSUFFICIENT_PERMISSIONS", "Sign-in refused", str(e)
            ) from None
        if outcome.pending:
            raise _Pending(outcome)
        if outcome.user.suspended_at is not None:  # (codesearch.store.offboarding)
            raise _Answer(403, "INSUFFICIENT_PERMISSIONS", "Account deactivated", "An owner deactivated this account.")
        if outcome.user.is_service:
            raise _Answer(
                403,
                "INSUFFICIENT_PERMISSIONS",
                "Not for interactive use",
                "This is a service account: it works with API keys only, and never signs in.",
            )
        return outcome.user, iap.csrf_token(store, outcome.user, claims), outcome

    async def _answer(self, scope: Scope, receive: Receive, send: Send, a: _Answer) -> None:
        state = scope.setdefault("state", {})
        state.update(identity=None, iap_user=None)
        path = route_path(scope)
        if path == "/api" or path.startswith("/api/"):
            body = json.dumps({"statusCode": a.status, "errorCode": a.error_code, "message": a.message}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": a.status,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"cache-control", b"no-store"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        from codesearch.web.templating import render

        response = render(
            Request(scope, receive),
            "message.html",
            status_code=a.status,
            title=a.heading,
            heading=a.heading,
            message=a.message,
        )
        await response(scope, receive, send)


def install(app: FastAPI, web: WebContext) -> None:
    """Add `IapMiddleware` to `app`; call before the session middleware is added, so that it runs
    inside it (its ``identity`` and ``csrf_token`` replace the session's)."""
    app.add_middleware(IapMiddleware, web=web)
