"""Account pages: sign-in/out, first-account setup, API keys, password, users.

    GET/POST /login                     email + password (401 with one generic error when wrong;
                                        429 with Retry-After during a lock-out: `throttle`; 403 when
                                        the owners turned passwords off: `security_settings`); the
                                        page offers what `signin_options` says (codes: `pages_email_code`)
    POST     /logout                    ends the session
    GET/POST /setup                     the first account (OWNER) while the store has no users; else 404
    GET/POST /settings/keys             the caller's API keys; creating one shows it once (owners only
                                        with DISABLE_API_KEY_CREATION_FOR_NON_OWNER_USERS: 403)
    POST     /settings/keys/{id}/revoke revokes one of the caller's keys (anyone else's: 404)
    GET/POST /settings/password         change one's own password (other sessions end); the current
                                        password is checked under the sign-in lock-outs (429)
    GET/POST /settings/users            OWNER only: list users, add a MEMBER with a password
    (single sign-on, linked accounts, approvals and invites: `pages_sso`)
    POST     /settings/users/{id}/role  OWNER only: make a user OWNER or MEMBER

Every POST checks the CSRF token (`sessions.require_csrf`); pages that need an account send
visitors to ``/login?next=…``. Handlers are plain functions: FastAPI runs them on its thread pool,
where the store and argon2 may block. They get the store and the web UI's settings as typed
dependencies (`codesearch.service.deps`).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from codesearch import accounts, audit, sessions
from codesearch.forwarded import client_address
from codesearch.permissions import Identity
from codesearch.service.deps import ServicesDep, StoreDep
from codesearch.store import MEMBER, OWNER, ROLES, Conflict, NotFound, Store, User
from codesearch.web import api_keys, throttle
from codesearch.web.deps import WebDep
from codesearch.web.signin_options import login_context
from codesearch.web.templating import WebContext, render

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
MAX_NAME = 255
MAX_EMAIL = 320


def when(t: datetime | None, never: str = "never") -> str:
    """A time for the tables: ``2024-05-01 12:34 UTC``."""
    return t.strftime("%Y-%m-%d %H:%M UTC") if t else never


def _root(request: Request) -> str:
    return sessions.root_of(request.scope)


def _page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return render(request, template, status_code=status_code, when=when, **context)


def _message(request: Request, status_code: int, heading: str, message: str, title: str | None = None) -> HTMLResponse:
    return _page(
        request, "message.html", status_code=status_code, title=title or heading, heading=heading, message=message
    )


def _not_found(request: Request) -> HTMLResponse:
    return _message(request, 404, "Not found", "There is nothing here.")


def _no_store(request: Request) -> HTMLResponse:
    return _message(
        request, 503, "Accounts are unavailable", "This service runs without a state database, so nobody can sign in."
    )


def _redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def _check_email(email: str) -> str | None:
    if not email or len(email) > MAX_EMAIL or not _EMAIL.match(email):
        return "Enter a valid email address."
    return None


def _check_new_password(password: str, confirm: str | None) -> str | None:
    problem = accounts.password_problem(password)
    if problem:
        return problem
    if confirm is not None and password != confirm:
        return "The two passwords do not match."
    return None


router = APIRouter(include_in_schema=False)


# ---------------------------------------------------------------------- sign-in


@router.get("/login")
def login_page(request: Request, web: WebDep, store: StoreDep, next: str = "") -> Response:
    if sessions.current_user(request) is not None:
        return _redirect(sessions.safe_next(next, _root(request)))
    if store is None:
        return _no_store(request)
    return _page(
        request, "login.html", **login_context(web, store, next=next, signed_out="signed_out" in request.query_params)
    )


@router.post("/login")
def login(
    request: Request,
    web: WebDep,
    store: StoreDep,
    email: str = Form(""),
    password: str = Form(""),
    next: str = Form(""),
    csrf_token: str = Form(""),
) -> Response:
    sessions.require_csrf(request, csrf_token, allow_visitor=True)
    if store is None:
        return _no_store(request)
    email = email.strip()[:MAX_EMAIL]
    if not web.security.current().password_login:  # the owners turned it off (`security_settings`)
        error = "Signing in with a password is turned off on this server: use another way below."
        return _page(request, "login.html", status_code=403, **login_context(web, store, next=next, error=error))
    outcome = throttle.sign_in(store, email, password, client_address(request))
    if outcome.user is None:
        audit.record(request, None, "login.failed", email, locked=bool(outcome.retry_after))
        page = _page(
            request,
            "login.html",
            status_code=429 if outcome.retry_after else 401,
            **login_context(web, store, next=next, email=email, error=outcome.message()),
        )
        if outcome.retry_after:
            page.headers["Retry-After"] = str(outcome.retry_after)
        return page
    if store.is_pending(outcome.user.id):  # REQUIRE_APPROVAL_NEW_MEMBERS: not before an owner says yes
        return _message(
            request,
            403,
            "Waiting for approval",
            "An owner of this server has not approved your account yet; try again later.",
        )
    if outcome.user.suspended_at is not None:  # the password was right: say why, not "wrong password"
        return _message(
            request, 403, "Account deactivated", "An owner deactivated this account; ask one to reactivate it."
        )
    response = _redirect(sessions.safe_next(next, _root(request)))
    sessions.start_session(request, response, store, outcome.user, web.session_max_age_s)
    audit.record(request, Identity(outcome.user), "login", outcome.user.email)
    return response


@router.post("/logout")
def logout(request: Request, store: StoreDep, csrf_token: str = Form("")) -> Response:
    root = _root(request)
    user = sessions.current_user(request)
    if user is None:
        return _redirect(f"{root}/login")
    sessions.require_csrf(request, csrf_token)
    response = _redirect(f"{root}/login?signed_out=1")
    sessions.end_session(request, response, store)
    audit.record(request, Identity(user), "logout", user.email)
    return response


# ---------------------------------------------------------------------- first account


@router.get("/setup")
def setup_page(request: Request, store: StoreDep) -> Response:
    if store is None:
        return _no_store(request)
    if store.has_users():
        return _not_found(request)
    return _page(request, "setup.html", title="Create the first account", email="", name="", error=None)


@router.post("/setup")
def setup(
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
    if store.has_users():
        return _not_found(request)
    email, name = email.strip(), name.strip()
    error = (
        _check_email(email)
        or ("The name is too long." if len(name) > MAX_NAME else None)
        or _check_new_password(password, confirm)
    )
    if error:
        return _page(
            request,
            "setup.html",
            status_code=400,
            title="Create the first account",
            email=email,
            name=name,
            error=error,
        )
    try:
        user = store.create_first_user(email, name, password_hash=accounts.hash_password(password))
    except Conflict:  # someone else finished the setup first
        return _not_found(request)
    response = _redirect(f"{_root(request)}/")
    sessions.start_session(request, response, store, user, web.session_max_age_s)
    return response


# ---------------------------------------------------------------------- API keys


def _keys_page(
    request: Request, web: WebContext, store: Store, user: User, status_code: int = 200, **context: Any
) -> HTMLResponse:
    keys = store.list_api_keys(user.id, include_revoked=True)
    keys.sort(key=lambda k: (k.revoked_at is not None, -k.id))  # active first, newest first
    context.setdefault("error", None)
    context.setdefault("created", None)
    context.setdefault("notice", None)
    return _page(
        request,
        "keys.html",
        status_code=status_code,
        title="API keys",
        keys=keys,
        section="keys",
        public_url=(web.public_url or "").rstrip("/"),
        may_create=api_keys.may_create(web, user),
        **context,
    )


@router.get("/settings/keys")
def keys(request: Request, web: WebDep, store: StoreDep, revoked: str = "") -> Response:
    user = sessions.current_user(request)
    if user is None:
        return sessions.login_redirect(request)
    if store is None:  # (a signed-in user implies a store: sessions live in it)
        return _no_store(request)
    notice = None
    if revoked.isdigit():
        key = store.get_api_key(user.id, int(revoked))
        if key is not None and key.revoked_at is not None:
            notice = f"The key “{key.name}” was revoked: it no longer works."
    return _keys_page(request, web, store, user, notice=notice)


@router.post("/settings/keys")
def create_key(
    request: Request, web: WebDep, store: StoreDep, name: str = Form(""), csrf_token: str = Form("")
) -> Response:
    user = sessions.form_user(request, csrf_token)
    if user is None:
        return sessions.login_redirect(request)
    if store is None:
        return _no_store(request)
    outcome = api_keys.create(request, web, user, name)
    return _keys_page(
        request, web, store, user, status_code=outcome.status, created=outcome.created, error=outcome.error
    )


@router.post("/settings/keys/{key_id}/revoke")
def revoke_key(request: Request, key_id: str, store: StoreDep, csrf_token: str = Form("")) -> Response:
    user = sessions.form_user(request, csrf_token)
    if user is None:
        return sessions.login_redirect(request)
    if store is None:
        return _no_store(request)
    if not key_id.isdigit() or store.get_api_key(user.id, int(key_id)) is None:
        return _not_found(request)  # someone else's key looks like no key at all
    store.revoke_api_key(user.id, int(key_id), own_only=True)
    audit.record(request, Identity(user), "apikey.revoke", str(int(key_id)))
    return _redirect(f"{_root(request)}/settings/keys?revoked={int(key_id)}")


# ---------------------------------------------------------------------- own password


@router.get("/settings/password")
def password_page(request: Request) -> Response:
    if sessions.current_user(request) is None:
        return sessions.login_redirect(request)
    return _page(request, "password.html", title="Password", section="password", error=None, notice=None)


@router.post("/settings/password")
def change_password(
    request: Request,
    store: StoreDep,
    current: str = Form(""),
    password: str = Form(""),
    confirm: str = Form(""),
    csrf_token: str = Form(""),
) -> Response:
    user = sessions.form_user(request, csrf_token)
    if user is None:
        return sessions.login_redirect(request)
    if store is None:
        return _no_store(request)
    error: str | None = None
    status = 400
    checked = throttle.check_password(store, user, current, client_address(request))
    if checked.refused:
        error, status = checked.message(), 429
    elif checked.user is None:
        error = "The current password is not right."
        if checked.retry_after:
            error += f" Too many attempts: try again in {checked.retry_after} s."
            status = 429
    error = error or _check_new_password(password, confirm)
    if error:
        page = _page(
            request, "password.html", status_code=status, title="Password", section="password", error=error, notice=None
        )
        if status == 429:
            page.headers["Retry-After"] = str(checked.retry_after)
        return page
    store.set_user_password(user.id, accounts.hash_password(password))
    store.delete_user_web_sessions(user.id, keep=request.cookies.get(sessions.SESSION_COOKIE))
    return _page(
        request,
        "password.html",
        title="Password",
        section="password",
        error=None,
        notice="Your password was changed. Your other sessions were signed out.",
    )


# ---------------------------------------------------------------------- users (owners)


def _owner_or_response(
    request: Request, store: Store | None, what: str = "manage users"
) -> tuple[User, Store] | Response:
    """(the signed-in owner, the store), or the response for anyone else."""
    user = sessions.current_user(request)
    if user is None:
        return sessions.login_redirect(request)
    if user.role != OWNER:
        return _message(request, 403, "Owners only", f"Only owners can {what}.", title="Forbidden")
    if store is None:  # (a signed-in user implies a store: sessions live in it)
        return _no_store(request)
    return user, store


@router.get("/settings/audit")
def audit_page(
    request: Request, store: StoreDep, services: ServicesDep, action: str = "", actor: str = "", page: str = "1"
) -> Response:
    owner = _owner_or_response(request, store, "read the audit log")
    if isinstance(owner, Response):
        return owner
    _user, store = owner
    per_page = 100
    number = max(1, min(int(page), 10**6)) if page.isdigit() else 1
    action = action if action in audit.ACTIONS else ""
    actor = actor.strip()[:MAX_EMAIL]
    events, total = store.list_audit_events(action=action or None, actor=actor or None, page=number, per_page=per_page)
    retention = services.audit.retention if services.audit is not None else 0
    return _page(
        request,
        "audit.html",
        title="Audit log",
        section="audit",
        events=events,
        total=total,
        page=number,
        pages=max(1, -(-total // per_page)),
        action=action,
        actor=actor,
        actions=sorted(audit.ACTIONS.items()),
        retention=f"for {retention} days" if retention else "forever",
        logging_off=services.audit is None or not services.audit.enabled,
    )


def _users_page(request: Request, store: Store, status_code: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("error", None)
    context.setdefault("notice", None)
    context.setdefault("form", {"email": "", "name": ""})
    return _page(
        request,
        "users.html",
        status_code=status_code,
        title="Users",
        section="users",
        users=store.list_users(),
        roles=ROLES,
        **context,
    )


@router.get("/settings/users")
def users(
    request: Request,
    store: StoreDep,
    added: str = "",
    changed: str = "",
    deactivated: str = "",
    reactivated: str = "",
    removed: str = "",
) -> Response:
    owner = _owner_or_response(request, store)
    if isinstance(owner, Response):
        return owner
    _user, store = owner
    notice = None
    for param, text in (
        (added, "{email} was added as a member and can sign in now."),
        (changed, "{email} is now {role}."),
        (deactivated, "{email} is deactivated: their sessions, API keys and OAuth grants ended."),
        (reactivated, "{email} is reactivated and can sign in again."),
    ):
        if param.isdigit():
            try:
                u = store.get_user(int(param))
                notice = text.format(email=u.email, role=u.role)
            except NotFound:
                pass
    if removed:
        notice = f"{removed[:320]} was removed: every session, key and token of theirs ended."
    return _users_page(request, store, notice=notice)


@router.post("/settings/users")
def add_user(
    request: Request,
    store: StoreDep,
    email: str = Form(""),
    name: str = Form(""),
    password: str = Form(""),
    csrf_token: str = Form(""),
) -> Response:
    checked = _owner_or_response(request, store)
    if isinstance(checked, Response):
        return checked
    owner, store = checked
    sessions.require_csrf(request, csrf_token)
    email, name = email.strip(), name.strip()
    form = {"email": email, "name": name}
    error = (
        _check_email(email)
        or ("The name is too long." if len(name) > MAX_NAME else None)
        or _check_new_password(password, None)
    )
    if error:
        return _users_page(request, store, status_code=400, error=error, form=form)
    try:
        new = store.create_user(email, name, role=MEMBER, password_hash=accounts.hash_password(password))
        audit.record(request, Identity(owner), "user.create", new.email, role=MEMBER)
    except Conflict:
        return _users_page(
            request, store, status_code=409, error=f"A user with the email {email.lower()} exists already.", form=form
        )
    return _redirect(f"{_root(request)}/settings/users?added={new.id}")


@router.post("/settings/users/{user_id}/role")
def change_role(
    request: Request, user_id: str, store: StoreDep, role: str = Form(""), csrf_token: str = Form("")
) -> Response:
    owner = _owner_or_response(request, store)
    if isinstance(owner, Response):
        return owner
    user, store = owner
    sessions.require_csrf(request, csrf_token)
    if not user_id.isdigit() or role not in ROLES:
        return _not_found(request)
    try:
        changed = store.set_user_role(int(user_id), role)
        audit.record(request, Identity(user), "user.role", changed.email, role=role)
    except NotFound:
        return _not_found(request)
    except Conflict:
        return _users_page(request, store, status_code=409, error="There must be at least one owner.")
    if int(user_id) == user.id and role != OWNER:
        return _redirect(f"{_root(request)}/settings/keys")  # no longer allowed on the users page
    return _redirect(f"{_root(request)}/settings/users?changed={int(user_id)}")
