"""What the sign-in page offers, under the owners' security settings, and the mails of joining.

The sign-in page (`codesearch.web.pages_account`, `codesearch.web.pages_email_code`) shows the
password form when password sign-in is on, the e-mail code form when codes are on and mail can be
sent, a button per single sign-on provider that is on, the link to ``/signup`` when self sign-up
is on (with password sign-in), and the owners' message. The same switches are enforced where each
way of signing in is handled, not only by hiding its form.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from codesearch.mail import approved_mail, join_request_mail
from codesearch.service.middleware.security_headers import provider_targets
from codesearch.store import OWNER

if TYPE_CHECKING:
    from codesearch.sso.providers import Provider
    from codesearch.store import Store, User
    from codesearch.web.security_settings import Security
    from codesearch.web.templating import WebContext

log = logging.getLogger(__name__)

#: owners told of one join request at most
MAX_OWNERS_MAILED = 20


def sso_providers(web: WebContext, s: Security | None = None) -> list[Provider]:
    """The identity providers users sign in with now (buttons on the sign-in page), under `s`
    (default: the settings in force now)."""
    s = s or web.security.current()
    return [p for p in web.identity_providers.values() if p.signs_in and s.provider_on(p.id)]


def switchable_providers(web: WebContext) -> list[Provider]:
    """The providers an owner may switch off on the security page: those with a button, and Google
    Cloud IAP (no button: `codesearch.web.iap` signs each request in, unless it is switched off)."""
    providers = [p for p in web.identity_providers.values() if p.signs_in]
    if web.iap is not None:
        providers.append(web.iap.provider)
    return providers


def email_code_available(web: WebContext, s: Security | None = None) -> bool:
    """Whether a sign-in code can be asked for now: the switch is on (in `s`, default: the
    settings in force now) and mail can be sent."""
    return web.mailer is not None and (s or web.security.current()).email_code_login


def self_signup_available(web: WebContext, s: Security | None = None) -> bool:
    """Whether ``/signup`` (an account with a password, by oneself) is open now (under `s`)."""
    s = s or web.security.current()
    return s.self_signup and s.password_login


def login_context(web: WebContext, store: Store, **context: Any) -> dict[str, Any]:
    """The template context of ``login.html`` (`context` adds or overrides). The settings are read
    once for the whole page: read per part, a change that landed between two reads (they are
    re-read every few seconds) showed one page half old, half new (the e-mail code form of the new
    settings with the old sign-in message)."""
    s = web.security.current()
    providers = sso_providers(web, s)
    base: dict[str, Any] = {
        "title": "Sign in",
        "next": "",
        "email": "",
        "error": None,
        "no_users": not store.has_users(),
        "signed_out": False,
        "sso_providers": providers,
        "form_targets": provider_targets(providers),
        "password_login": s.password_login,
        "email_code": email_code_available(web, s),
        "self_signup": self_signup_available(web, s),
        "signin_message": s.signin_message,
    }
    base.update(context)
    return base


def _public(web: WebContext) -> str:
    return (web.public_url or "").rstrip("/")


def notify_join_request(web: WebContext, store: Store, requester: User) -> None:
    """Tell the owners by mail (when mail is configured) that `requester` waits for approval."""
    if web.mailer is None:
        return
    owners = [u for u in store.list_users() if u.role == OWNER][:MAX_OWNERS_MAILED]
    for owner in owners:
        web.mailer.send_later(join_request_mail(owner.email, requester.email, f"{_public(web)}/settings/members"))


def notify_approved(web: WebContext, user: User) -> None:
    """Tell `user` by mail (when mail is configured) that an owner approved them."""
    if web.mailer is not None:
        web.mailer.send_later(approved_mail(user.email, f"{_public(web)}/login"))
