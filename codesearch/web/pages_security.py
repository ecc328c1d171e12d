"""The owners' security page: how people sign in and join (`codesearch.web.security_settings`).

    GET/POST /settings/security            OWNER: password sign-in, e-mail code sign-in, each single
                                           sign-on provider, approval of new members, self sign-up,
                                           the sign-in page's message; the mail settings' state
    POST     /settings/security/test-mail  OWNER: send a test mail to oneself, now (the outcome shown)

A switch an environment variable forces is shown locked, with the variable's name; a POST that
tries to change it is a 409 naming the variable. A POST that would leave the owner who sends it
no way to sign in (no password with passwords off, no code without mail, no provider they have
linked), or that switches off Google Cloud IAP while the owner's own request came through it, is a
409 that says so: nothing is stored. Members get a 403 page; every POST checks the
CSRF token and leaves an audit event (``settings.security``, ``mail.test``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from codesearch import audit, sessions
from codesearch.mail import MAIL_STATUS_KEY, MailError, test_mail
from codesearch.permissions import Identity
from codesearch.service.deps import StoreDep
from codesearch.store import Store, User
from codesearch.web.deps import WebDep
from codesearch.web.pages_settings import _owner as settings_owner
from codesearch.web.security_settings import FORCEABLE, MAX_MESSAGE, Security, apply_forced, usable_methods
from codesearch.web.signin_options import switchable_providers
from codesearch.web.templating import WebContext, render

router = APIRouter(include_in_schema=False)

#: the form's switches (checkbox names) and what they are called on the page
SWITCHES = {
    "password_login": "Email and password",
    "email_code_login": "Email code",
    "require_approval": "Require approval for new members",
    "self_signup": "Self sign-up",
}
#: provider ids read from one form at most
MAX_PROVIDERS = 100


def _message(request: Request, status_code: int, heading: str, text: str) -> HTMLResponse:
    return render(request, "message.html", status_code=status_code, title=heading, heading=heading, message=text)


def _owner(request: Request, store: Store | None) -> tuple[User, Store] | Response:
    """(the signed-in owner, the store), or the response for anyone else: the settings pages' rule."""
    return settings_owner(request, store, "change the security settings")


def _page(request: Request, web: WebContext, store: Store, status_code: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("error", None)
    context.setdefault("notice", None)
    status = store.service_setting(MAIL_STATUS_KEY)
    return render(
        request,
        "security.html",
        status_code=status_code,
        title="Security",
        section="security",
        settings=web.security.current(),
        stored=web.security.stored(),
        forced={name: FORCEABLE[name] for name in web.security.forced},
        switches=SWITCHES,
        providers=switchable_providers(web),
        mailer=web.mailer.server.describe() if web.mailer is not None else None,
        sender=web.mailer.sender if web.mailer is not None else None,
        mail_status=status if isinstance(status, dict) else None,
        max_message=MAX_MESSAGE,
        ttl=web.security.ttl_s,
        **context,
    )


@router.get("/settings/security")
def security(request: Request, web: WebDep, store: StoreDep, saved: str = "") -> Response:
    owner = _owner(request, store)
    if isinstance(owner, Response):
        return owner
    _user, store = owner
    notice = "Saved: every replica applies the settings within seconds." if saved else None
    return _page(request, web, store, notice=notice)


def _parse(
    switches: dict[str, str], providers: list[str], message: str, web: WebContext, stored: Security
) -> tuple[Security | None, str | None]:
    """The settings the form asks for (switches not sent are off), or the error to show."""
    values: dict[str, Any] = {}
    for name in SWITCHES:
        raw = switches[name]
        if raw not in ("on", "off"):
            return None, f"The field {name} must be “on” or “off”, not {raw[:40]!r}."
        values[name] = raw == "on"
    for name, env in FORCEABLE.items():
        forced = web.security.forced.get(name)
        if forced is not None and values[name] != forced:
            word = "true" if forced else "false"
            return None, (
                f"“{SWITCHES[name]}” is locked by {env}={word} in the service's environment: "
                f"remove the variable and restart the service to switch it here."
            )
        if forced is not None:
            values[name] = getattr(stored, name)  # what the owners chose stays stored underneath
    known = {p.id for p in switchable_providers(web)}
    unknown = sorted(set(providers) - known)
    if unknown:
        return None, f"There is no single sign-on provider {unknown[0][:80]!r} in the config."
    values["disabled_providers"] = frozenset(known - set(providers))
    message = message.replace("\r\n", "\n").strip()
    if len(message) > MAX_MESSAGE:
        return None, f"The sign-in page message is {len(message)} characters long: at most {MAX_MESSAGE} fit."
    values["signin_message"] = message
    return replace(stored, **values), None


@router.post("/settings/security")
def save(
    request: Request,
    web: WebDep,
    store: StoreDep,
    csrf_token: str = Form(""),
    password_login: str = Form("off"),
    email_code_login: str = Form("off"),
    require_approval: str = Form("off"),
    self_signup: str = Form("off"),
    provider: Annotated[list[str] | None, Form()] = None,
    signin_message: str = Form(""),
) -> Response:
    owner = _owner(request, store)
    if isinstance(owner, Response):
        return owner
    user, store = owner
    sessions.require_csrf(request, csrf_token)
    switches = {
        "password_login": password_login,
        "email_code_login": email_code_login,
        "require_approval": require_approval,
        "self_signup": self_signup,
    }
    stored = web.security.stored()
    wanted, error = _parse(switches, (provider or [])[:MAX_PROVIDERS], signin_message, web, stored)
    if wanted is None:
        status = 409 if error and "locked by" in error else 400
        return _page(request, web, store, status, error=error)
    in_force = apply_forced(wanted, web.security.forced)
    linked = [a.provider for a in store.list_linked_accounts(user_id=user.id)]
    left = usable_methods(
        in_force,
        mail=web.mailer is not None,
        providers=[p.id for p in switchable_providers(web)],
        has_password=bool(user.password_hash),
        linked=linked,
    )
    if not left:
        return _page(
            request,
            web,
            store,
            409,
            error="These settings would leave you no way to sign in: keep a way on that works for your account "
            "(a password you have, e-mail codes with mail configured, or a provider you have linked).",
        )
    iap = web.iap
    if iap is not None and getattr(request.state, "iap_user", None) is not None and not in_force.provider_on(iap.id):
        return _page(
            request,
            web,
            store,
            409,
            error=f"You reached this page through {iap.provider.name}: switching it off would refuse your next "
            "request (and everyone's that passes through it). Switch it off from a way in that does not use it.",
        )
    web.security.save(wanted)
    audit.record(request, Identity(user), "settings.security", "security", **wanted.to_json())
    return RedirectResponse(f"{sessions.root_of(request.scope)}/settings/security?saved=1", status_code=303)


@router.post("/settings/security/test-mail")
def send_test_mail(request: Request, web: WebDep, store: StoreDep, csrf_token: str = Form("")) -> Response:
    owner = _owner(request, store)
    if isinstance(owner, Response):
        return owner
    user, store = owner
    sessions.require_csrf(request, csrf_token)
    if web.mailer is None:
        error = "No mail server is configured: set SMTP_CONNECTION_URL and EMAIL_FROM_ADDRESS in the environment."
        return _page(request, web, store, 409, error=error)
    try:
        web.mailer.send(test_mail(user.email))  # a worker thread of FastAPI's: bounded by the mailer's timeout
    except MailError as e:
        audit.record(request, Identity(user), "mail.test", user.email, sent=False)
        return _page(request, web, store, 502, error=f"The test mail was not sent: {e}")
    audit.record(request, Identity(user), "mail.test", user.email, sent=True)
    return _page(request, web, store, notice=f"A test mail went to {user.email}.")
