"""Signing in with a code sent by e-mail, and signing up by oneself.

    POST /login/code          anyone: send a 6-digit code to the address typed (when e-mail codes
                              are on and mail can be sent, `signin_options`; else 404). The answer
                              is the same whether or not the address has an account: a code goes
                              out only to a user's address, or to any address when self sign-up is
                              on, or to the address an open invite (``invite``, its token) lets
                              join. Limited per address and per client (`throttle.may_send_code`:
                              429 with Retry-After); the mail leaves on a worker thread.
    POST /login/code/verify   anyone: the address and its code (`Store.use_email_code`: it works
                              once, for 10 minutes, 5 tries), under the sign-in lock-outs (401 when
                              wrong, 429 during a lock-out). Right: signed in; an address without an
                              account becomes one when self sign-up is on (its address verified by
                              the code), waiting for an owner when approval is required (403 page);
                              with an open invite (``invite``) it joins with the invite's role and
                              never waits; an invite it may not use is a 403 that says why.
    GET/POST /signup          anyone, when self sign-up and password sign-in are on (else 404): an
                              account with a password; the address is as typed (not verified).

Every POST checks the visitor's CSRF token. Audit: ``login.code.sent`` (target: the address
typed), ``login`` (method ``email-code``), ``login.failed``, ``member.request``, ``user.signup``,
``invite.accept``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from codesearch import accounts, audit, sessions
from codesearch.forwarded import client_address
from codesearch.mail import code_mail
from codesearch.permissions import Identity
from codesearch.service.deps import StoreDep
from codesearch.store import Conflict, Store, User
from codesearch.store.email_codes import CODE_TTL
from codesearch.store.members import InviteInvalid
from codesearch.web import throttle
from codesearch.web.deps import WebDep
from codesearch.web.pages_account import MAX_EMAIL, MAX_NAME, _check_email, _check_new_password
from codesearch.web.signin_options import (
    email_code_available,
    login_context,
    notify_join_request,
    self_signup_available,
)
from codesearch.web.templating import WebContext, render

router = APIRouter(include_in_schema=False)


def _page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return render(request, template, status_code=status_code, **context)


def _message(request: Request, status_code: int, heading: str, text: str) -> HTMLResponse:
    return _page(request, "message.html", status_code=status_code, title=heading, heading=heading, message=text)


def _not_found(request: Request) -> HTMLResponse:
    return _message(request, 404, "Not found", "There is no such way to sign in here.")


def _no_store(request: Request) -> HTMLResponse:
    return _message(request, 503, "Accounts are unavailable", "This service runs without a state database.")


def _waiting(request: Request) -> HTMLResponse:
    return _message(
        request,
        403,
        "Waiting for approval",
        "Your account exists, but an owner of this server must approve it before you can sign in; "
        "you will get a mail when they do.",
    )


def _code_page(request: Request, email: str, next_url: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("error", None)
    context.setdefault("invite", "")  # an open invite's token, carried to the code's check
    return _page(
        request,
        "login_code.html",
        status_code=status_code,
        title="Enter your code",
        email=email,
        next=next_url,
        minutes=int(CODE_TTL.total_seconds() // 60),
        **context,
    )


def _sign_up(web: WebContext, store: Store, email: str, **kwargs: Any) -> tuple[User, bool]:
    user, pending = store.sign_up(email, require_approval=web.security.current().require_approval, **kwargs)
    if pending:
        notify_join_request(web, store, user)
    return user, pending


@router.post("/login/code")
def send_code(
    request: Request,
    web: WebDep,
    store: StoreDep,
    email: str = Form(""),
    next: str = Form(""),
    invite: str = Form(""),
    csrf_token: str = Form(""),
) -> Response:
    sessions.require_csrf(request, csrf_token, allow_visitor=True)
    if store is None:
        return _no_store(request)
    if not email_code_available(web) or web.mailer is None:
        return _not_found(request)
    email = email.strip()[:MAX_EMAIL]
    problem = _check_email(email)
    if problem:
        ctx = login_context(web, store, next=next, email=email, error=problem)
        return _page(request, "login.html", status_code=400, **ctx)
    opened = store.find_invite(invite)  # None for no token, or one that cannot be used any more
    invite = invite if opened is not None else ""
    wait = throttle.may_send_code(store, email, client_address(request))
    if wait:
        error = f"Too many codes asked for: try again in {wait} s."
        page = _code_page(request, email, next, 429, error=error, invite=invite)
        page.headers["Retry-After"] = str(wait)
        return page
    # a code is stored for every address (the same work either way); it is mailed only to an
    # account's address, to any when self sign-up is on, or to the one an open invite lets join
    code = store.issue_email_code(email)
    joins = opened is not None and opened.email in (None, email.lower())
    if store.find_user_by_email(email) is not None or web.security.current().self_signup or joins:
        web.mailer.send_later(
            code_mail(email.lower(), code, int(CODE_TTL.total_seconds() // 60), (web.public_url or "").rstrip("/"))
        )
    audit.record(request, None, "login.code.sent", email.lower())
    return _code_page(request, email, next, invite=invite)


@router.post("/login/code/verify")
def verify_code(
    request: Request,
    web: WebDep,
    store: StoreDep,
    email: str = Form(""),
    code: str = Form(""),
    next: str = Form(""),
    invite: str = Form(""),
    csrf_token: str = Form(""),
) -> Response:
    sessions.require_csrf(request, csrf_token, allow_visitor=True)
    if store is None:
        return _no_store(request)
    if not email_code_available(web):
        return _not_found(request)
    email, invite = email.strip()[:MAX_EMAIL], invite[:200]
    created: list[tuple[User, bool]] = []
    refused: list[str] = []  # why the invite cannot be used

    def user_for() -> User | None:
        found = store.find_user_by_email(email)
        if found is not None or not (web.security.current().self_signup or invite):
            return found  # (an account that exists signs in: the invite is not used, as with SSO)
        try:
            created.append(_sign_up(web, store, email, email_verified=True, invite_token=invite or None))
        except InviteInvalid as e:
            refused.append(str(e))
            return None
        except Conflict:  # signed up a moment ago by another request
            return store.find_user_by_email(email)
        return created[-1][0]

    outcome = throttle.sign_in_with_code(store, email, code, client_address(request), user_for)
    if refused:  # the code was right: say why the invite cannot be used, not "wrong code"
        audit.record(request, None, "login.failed", email, method="email-code", invite=True)
        return _code_page(request, email, next, 403, error=refused[0])
    if outcome.user is None:
        audit.record(request, None, "login.failed", email, method="email-code", locked=bool(outcome.retry_after))
        error = f"Too many sign-in attempts: try again in {outcome.retry_after} s."
        if not outcome.refused:
            error = "That code is wrong or has expired: ask for a new one if it keeps failing."
            if outcome.retry_after:
                error += f" Too many attempts: try again in {outcome.retry_after} s."
        page = _code_page(request, email, next, 429 if outcome.retry_after else 401, error=error)
        if outcome.retry_after:
            page.headers["Retry-After"] = str(outcome.retry_after)
        return page
    user = outcome.user
    if created:
        audit.record(request, Identity(user), "user.signup", user.email, method="email-code")
        if invite:
            audit.record(request, Identity(user), "invite.accept", user.email, role=user.role)
    if store.is_pending(user.id):
        if created:
            audit.record(request, Identity(user), "member.request", user.email, method="email-code")
        return _waiting(request)
    response = RedirectResponse(sessions.safe_next(next, sessions.root_of(request.scope)), status_code=303)
    sessions.start_session(request, response, store, user, web.session_max_age_s)
    audit.record(request, Identity(user), "login", user.email, method="email-code")
    return response


# ---------------------------------------------------------------------- self sign-up


def _signup_page(request: Request, status_code: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("error", None)
    context.setdefault("email", "")
    context.setdefault("name", "")
    return _page(request, "signup.html", status_code=status_code, title="Create an account", **context)


@router.get("/signup")
def signup_page(request: Request, web: WebDep, store: StoreDep) -> Response:
    if store is None:
        return _no_store(request)
    if not self_signup_available(web):
        return _not_found(request)
    return _signup_page(request)


@router.post("/signup")
def signup(
    request: Request,
    web: WebDep,
    store: StoreDep,
    email: str = Form(""),
    name: str = Form(""),
    password: str = Form(""),
    confirm: str = Form(""),
    csrf_token: str = Form(""),
) -> Response:
    sessions.require_csrf(request, csrf_token, allow_visitor=True)
    if store is None:
        return _no_store(request)
    if not self_signup_available(web):
        return _not_found(request)
    email, name = email.strip(), name.strip()
    error = (
        _check_email(email)
        or ("The name is too long." if len(name) > MAX_NAME else None)
        or _check_new_password(password, confirm)
    )
    if error:
        return _signup_page(request, 400, error=error, email=email, name=name)
    try:
        user, pending = _sign_up(web, store, email, name=name, password_hash=accounts.hash_password(password))
    except Conflict:
        return _signup_page(
            request, 409, error="An account with this e-mail exists already: sign in instead.", email=email, name=name
        )
    audit.record(request, Identity(user), "user.signup", user.email, method="password")
    if pending:
        audit.record(request, Identity(user), "member.request", user.email, method="password")
        return _waiting(request)
    response = RedirectResponse(f"{sessions.root_of(request.scope)}/", status_code=303)
    sessions.start_session(request, response, store, user, web.session_max_age_s)
    return response
