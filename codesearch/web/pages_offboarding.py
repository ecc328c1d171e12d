"""Offboarding and service accounts in the web UI.

    GET  /settings/users/{id}/remove             OWNER: what removing the member ends, and a button
    POST /settings/users/{id}/remove             OWNER: remove the member (`Store.remove_user`)
    POST /settings/users/{id}/deactivate         OWNER: deactivate (every credential ends at once)
    POST /settings/users/{id}/reactivate         OWNER: let a deactivated member sign in again
    GET/POST /settings/leave                     signed-in users: leave the server (the account goes)
    GET/POST /settings/service-accounts          OWNER: service accounts and their API keys; POST
                                                 makes one (name, role)
    POST /settings/service-accounts/{id}/keys    OWNER: a new API key for it, shown once
    POST /settings/service-accounts/{id}/keys/{key}/revoke
                                                 OWNER: revoke one of its keys

Every POST checks the CSRF token. The last active owner can be neither removed, deactivated nor
leave (`LastOwner`: the page says what to do instead). Every change is audited (``member.remove``,
``member.leave``, ``member.deactivate``, ``member.reactivate``, ``service_account.create``,
``apikey.create``, ``apikey.revoke``). Service accounts are removed like any member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from codesearch import audit, sessions
from codesearch.permissions import Identity
from codesearch.service.deps import StoreDep
from codesearch.store import NotFound
from codesearch.store import models as m
from codesearch.store.offboarding import LastOwner
from codesearch.web.pages_settings import _message, _owner, _owner_form, _page, _root, _signed_in

if TYPE_CHECKING:
    from codesearch.store import Store, User

router = APIRouter(include_in_schema=False)
MAX_KEY_NAME = 100


def _target(store: Store, user_id: str) -> User | None:
    if not user_id.isdigit():
        return None
    try:
        return store.get_user(int(user_id))
    except NotFound:
        return None


def _no_user(request: Request) -> HTMLResponse:
    return _message(request, 404, "No such user", "This account does not exist (any more).")


def _last_owner(request: Request, e: LastOwner) -> HTMLResponse:
    return _message(request, 403, "The last owner stays", f"{e}.")


def _confirm_page(request: Request, store: Store, target: User, *, leaving: bool) -> HTMLResponse:
    keys = len(store.list_api_keys(target.id))
    return _page(
        request,
        "offboard.html",
        title="Leave" if leaving else f"Remove {target.email}",
        section="leave" if leaving else "users",
        target=target,
        leaving=leaving,
        keys=keys,
        error=None,
    )


@router.get("/settings/users/{user_id}/remove")
def confirm_remove(request: Request, user_id: str, store: StoreDep) -> Response:
    owner = _owner(request, store, "remove members")
    if isinstance(owner, Response):
        return owner
    _user, store = owner
    target = _target(store, user_id)
    return _no_user(request) if target is None else _confirm_page(request, store, target, leaving=False)


@router.post("/settings/users/{user_id}/remove")
def remove(request: Request, user_id: str, store: StoreDep, csrf_token: str = Form("")) -> Response:
    owner = _owner_form(request, store, "remove members", csrf_token)
    if isinstance(owner, Response):
        return owner
    user, store = owner
    target = _target(store, user_id)
    if target is None:
        return _no_user(request)
    try:
        gone = store.remove_user(target.id)
    except LastOwner as e:
        return _last_owner(request, e)
    except NotFound:
        return _no_user(request)
    audit.record(request, Identity(user), "member.remove", gone.email, userId=gone.id, kind=gone.kind)
    if gone.id == user.id:  # an owner who removed themselves is signed out with the account
        return RedirectResponse(f"{_root(request)}/login", status_code=303)
    back = "service-accounts" if gone.kind == m.SERVICE else "users"
    return RedirectResponse(f"{_root(request)}/settings/{back}?removed={gone.email}", status_code=303)


def _set_active(request: Request, user_id: str, store: Store | None, csrf_token: str, *, suspend: bool) -> Response:
    owner = _owner_form(request, store, "deactivate members", csrf_token)
    if isinstance(owner, Response):
        return owner
    user, store = owner
    target = _target(store, user_id)
    if target is None:
        return _no_user(request)
    try:
        changed, did = store.set_user_suspended(target.id, suspend)
    except LastOwner as e:
        return _last_owner(request, e)
    if did:
        audit.record(request, Identity(user), "member.deactivate" if suspend else "member.reactivate", changed.email)
    if changed.id == user.id:
        return RedirectResponse(f"{_root(request)}/login", status_code=303)
    what = "deactivated" if suspend else "reactivated"
    return RedirectResponse(f"{_root(request)}/settings/users?{what}={changed.id}", status_code=303)


@router.post("/settings/users/{user_id}/deactivate")
def deactivate(request: Request, user_id: str, store: StoreDep, csrf_token: str = Form("")) -> Response:
    return _set_active(request, user_id, store, csrf_token, suspend=True)


@router.post("/settings/users/{user_id}/reactivate")
def reactivate(request: Request, user_id: str, store: StoreDep, csrf_token: str = Form("")) -> Response:
    return _set_active(request, user_id, store, csrf_token, suspend=False)


# ------------------------------------------------------------------ leaving


@router.get("/settings/leave")
def confirm_leave(request: Request, store: StoreDep) -> Response:
    signed = _signed_in(request, store)
    if isinstance(signed, Response):
        return signed
    user, store = signed
    return _confirm_page(request, store, user, leaving=True)


@router.post("/settings/leave")
def leave(request: Request, store: StoreDep, csrf_token: str = Form("")) -> Response:
    signed = _signed_in(request, store)
    if isinstance(signed, Response):
        return signed
    user, store = signed
    sessions.require_csrf(request, csrf_token)
    try:
        gone = store.remove_user(user.id)
    except LastOwner:
        return _message(
            request,
            403,
            "The last owner stays",
            "You are the last owner of this server: make another member owner before you leave.",
        )
    audit.record(request, Identity(user), "member.leave", gone.email)
    response = RedirectResponse(f"{_root(request)}/login", status_code=303)
    sessions.end_session(request, response, None)  # the session went with the account: drop the cookie
    return response


# ------------------------------------------------------------------ service accounts


def _accounts_page(request: Request, store: Store, status_code: int = 200, **context: Any) -> HTMLResponse:
    accounts = store.list_service_accounts()
    context.setdefault("error", None)
    context.setdefault("notice", None)
    context.setdefault("created", None)
    return _page(
        request,
        "service_accounts.html",
        status_code=status_code,
        title="Service accounts",
        section="service-accounts",
        accounts=[(a, store.list_api_keys(a.id)) for a in accounts],
        roles=m.ROLES,
        **context,
    )


@router.get("/settings/service-accounts")
def service_accounts(request: Request, store: StoreDep, removed: str = "") -> Response:
    owner = _owner(request, store, "manage service accounts")
    if isinstance(owner, Response):
        return owner
    _user, store = owner
    notice = f"{removed[:320]} was removed; its API keys no longer work." if removed else None
    return _accounts_page(request, store, notice=notice)


@router.post("/settings/service-accounts")
def create_service_account(
    request: Request, store: StoreDep, name: str = Form(""), role: str = Form(m.MEMBER), csrf_token: str = Form("")
) -> Response:
    owner = _owner_form(request, store, "manage service accounts", csrf_token)
    if isinstance(owner, Response):
        return owner
    user, store = owner
    if role not in m.ROLES:
        return _accounts_page(request, store, 400, error=f"The role must be OWNER or MEMBER, not {role[:20]!r}.")
    try:
        account = store.create_service_account(name, role=role)
    except ValueError as e:
        return _accounts_page(request, store, 400, error=f"Name: {e}.")
    audit.record(request, Identity(user), "service_account.create", account.name, userId=account.id, role=role)
    return _accounts_page(request, store, 201, notice=f"The service account {account.name} was created.")


def _service_account(store: Store, account_id: str) -> User | None:
    target = _target(store, account_id)
    return target if target is not None and target.kind == m.SERVICE else None


@router.post("/settings/service-accounts/{account_id}/keys")
def create_key(
    request: Request, account_id: str, store: StoreDep, name: str = Form(""), csrf_token: str = Form("")
) -> Response:
    owner = _owner_form(request, store, "manage service accounts", csrf_token)
    if isinstance(owner, Response):
        return owner
    user, store = owner
    account = _service_account(store, account_id)
    if account is None:
        return _message(request, 404, "No such service account", "This service account does not exist (any more).")
    name = name.strip()
    if not name or len(name) > MAX_KEY_NAME:
        return _accounts_page(request, store, 400, error=f"Key name: 1 to {MAX_KEY_NAME} characters.")
    key_id, secret = store.create_api_key(account.id, name)
    audit.record(request, Identity(user), "apikey.create", str(key_id), owner=account.email)
    created = {"account": account.name, "name": name, "secret": secret}
    return _accounts_page(request, store, 201, created=created)


@router.post("/settings/service-accounts/{account_id}/keys/{key_id}/revoke")
def revoke_key(request: Request, account_id: str, key_id: str, store: StoreDep, csrf_token: str = Form("")) -> Response:
    owner = _owner_form(request, store, "manage service accounts", csrf_token)
    if isinstance(owner, Response):
        return owner
    user, store = owner
    account = _service_account(store, account_id)
    key = store.get_api_key(account.id, int(key_id)) if account is not None and key_id.isdigit() else None
    if account is None or key is None or not store.revoke_api_key(user.id, key.id):
        return _message(request, 404, "No such key", "This key does not exist or was revoked already.")
    audit.record(request, Identity(user), "apikey.revoke", str(key.id), owner=account.email)
    return _accounts_page(request, store, notice=f"The key {key.name} of {account.name} was revoked.")
