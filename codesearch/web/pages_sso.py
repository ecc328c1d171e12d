"""Pages of single sign-on, account linking, approvals and invites (`codesearch.sso`).

    POST /login/sso/{id}                       start signing in with provider `id` (CSRF; `next`, `invite`)
    GET  /api/auth/callback/{id}               the provider's redirect back (Sourcebot's path)
    GET  /settings/account                     the caller's linked accounts; link / unlink buttons
    POST /settings/account/link/{id}           start linking provider `id` (CSRF)
    POST /settings/account/unlink/{account}    unlink (refused for the last way to sign in)
    GET  /settings/members                     OWNER: sign-ups waiting for approval, open invites
    POST /settings/members/{user}/approve      OWNER: let a waiting user in
    POST /settings/members/{user}/decline      OWNER: refuse (the user is deleted)
    POST /settings/members/invites             OWNER: create an invite (optional e-mail, role); its link shown once
    POST /settings/members/invites/{id}/revoke OWNER: delete an unused invite
    GET  /invite/{token}                       join with an invite: SSO buttons, an e-mail code, a password
    POST /invite/{token}                       join with e-mail and password (403 with passwords off)

Every failure of a flow (provider down, access denied, bad or reused state, an ID token that
does not check out, an identity linked to someone else) is a page that says so, never a
traceback; after signing in the browser goes to `next` only when it is a path of this site
(`sessions.safe_next`). Codes, tokens, states and secrets are never logged.

Invite links carry their token in the path: the invite pages are sent with
``Referrer-Policy: no-referrer`` and ``Cache-Control: no-store``, no message repeats the token,
and logs write the path as ``/invite/<redacted>`` (`codesearch.service.middleware.observability.loggable_path`).

With a required provider (``accountLinkingRequired``, `codesearch.sso.required`), the account
page shows a banner naming the providers still to link; every other page sends such a user
there (`codesearch.web.link_required`).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio
from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from codesearch import audit, sessions
from codesearch.accounts import hash_password, password_problem
from codesearch.errors import ConfigError
from codesearch.mail import MailError, invite_mail
from codesearch.permissions import Identity
from codesearch.service.deps import StoreDep
from codesearch.service.middleware.security_headers import provider_targets
from codesearch.sso import accounts, required
from codesearch.sso.flow import FLOW_COOKIE, FLOW_TTL_S, FlowError, FlowSealer, begin, check_callback, finish
from codesearch.store import OWNER, ROLES, Conflict, NotFound
from codesearch.store.members import InviteInvalid
from codesearch.web.deps import WebDep
from codesearch.web.signin_options import email_code_available, notify_approved, notify_join_request, sso_providers
from codesearch.web.templating import WebContext, render

if TYPE_CHECKING:
    from codesearch.sso.accounts import Outcome
    from codesearch.sso.providers import Provider
    from codesearch.store import Store, User

log = logging.getLogger(__name__)

MAX_EMAIL = 320
MAX_NAME = 255


def _root(request: Request) -> str:
    return sessions.root_of(request.scope)


def _when(t: datetime | None, never: str = "never") -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC") if t else never


def _page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return render(request, template, status_code=status_code, when=_when, **context)


def _message(request: Request, status_code: int, heading: str, message: str) -> HTMLResponse:
    return _page(request, "message.html", status_code=status_code, title=heading, heading=heading, message=message)


def _no_store(request: Request) -> HTMLResponse:
    return _message(request, 503, "Accounts are unavailable", "This service runs without a state database.")


def _flow_cookie(request: Request, response: Response, value: str, max_age: int) -> None:
    response.headers.append("set-cookie", sessions.cookie_header(request.scope, FLOW_COOKIE, value, max_age))


router = APIRouter(include_in_schema=False)


def _sealer(web: WebContext, store: Store) -> FlowSealer:
    """The sealer of the sign-in flow's cookie, its key read from the store once per app."""
    sealer: FlowSealer | None = web.extra.get("sso_flow_sealer")
    if sealer is None:
        sealer = web.extra["sso_flow_sealer"] = FlowSealer(store.auth_key("sso flow"))
    return sealer


def _redirect_uri(web: WebContext, pid: str) -> str:
    return f"{(web.public_url or '').rstrip('/')}/api/auth/callback/{quote(pid, safe='')}"


async def _start(
    request: Request,
    web: WebContext,
    store: Store,
    provider: Provider,
    *,
    purpose: str,
    next_url: str,
    user_id: int | None = None,
    invite: str | None = None,
) -> Response:
    try:
        url, record = await begin(
            provider,
            redirect_uri=_redirect_uri(web, provider.id),
            purpose=purpose,
            next_url=next_url,
            user_id=user_id,
            invite=invite or None,
        )
    except FlowError as e:
        log.warning("sso %s: cannot start: %s", provider.id, e)
        return _message(request, e.status, f"{provider.name} is unavailable", str(e))
    except ConfigError as e:
        log.error("sso %s: %s", provider.id, e)
        return _message(
            request,
            500,
            f"{provider.name} is not configured correctly",
            "This server's configuration of the provider is incomplete. Tell an owner.",
        )
    response = RedirectResponse(url, status_code=303)
    value = _sealer(web, store).seal(record)
    _flow_cookie(request, response, value, FLOW_TTL_S)
    return response


# ------------------------------------------------------------------ starting


@router.post("/login/sso/{pid}")
async def sign_in_start(
    request: Request,
    pid: str,
    web: WebDep,
    store: StoreDep,
    next: str = Form(""),
    invite: str = Form(""),
    csrf_token: str = Form(""),
) -> Response:
    sessions.require_csrf(request, csrf_token, allow_visitor=True)
    provider = web.identity_providers.get(pid)
    if provider is None or not provider.signs_in or store is None:
        return _message(request, 404, "Not found", "There is no such way to sign in.")
    if not web.security.current().provider_on(pid):  # an owner turned it off (`security_settings`)
        return _message(request, 403, "Turned off", f"Signing in with {provider.name} is turned off on this server.")
    return await _start(
        request,
        web,
        store,
        provider,
        purpose="signin",
        next_url=sessions.safe_next(next, _root(request)),
        invite=invite[:200] or None,
    )


@router.post("/settings/account/link/{pid}")
async def link_start(request: Request, pid: str, web: WebDep, store: StoreDep, csrf_token: str = Form("")) -> Response:
    user = sessions.form_user(request, csrf_token)
    if user is None:
        return sessions.login_redirect(request)
    if store is None:  # (a signed-in user implies a store: sessions live in it)
        return _no_store(request)
    provider = web.identity_providers.get(pid)
    if provider is None:
        return _message(request, 404, "Not found", "There is no such provider.")
    return await _start(
        request, web, store, provider, purpose="link", next_url=f"{_root(request)}/settings/account", user_id=user.id
    )


# ------------------------------------------------------------------ the callback


@router.get("/api/auth/callback/{pid}")
async def callback(request: Request, pid: str, web: WebDep, store: StoreDep) -> Response:
    provider = web.identity_providers.get(pid)
    if provider is None or store is None:
        return _message(request, 404, "Not found", "There is no such way to sign in.")
    params = dict(request.query_params)
    try:
        sealer = _sealer(web, store)
        record = check_callback(sealer, provider, sealer.open(request.cookies.get(FLOW_COOKIE)), params)
        current = sessions.current_user(request)
        linker: User | None = None  # who links an account (a "link" flow), else None
        if record["for"] == "link":
            if current is None or current.id != record.get("u"):
                raise FlowError("state", "This link was started by another session. Sign in and start again.")
            linker = current
        if record["for"] == "signin" and not provider.signs_in:
            raise FlowError("state", f"{provider.name} is for linking accounts only.")
        if record["for"] == "signin" and not web.security.current().provider_on(pid):
            raise FlowError("denied", f"Signing in with {provider.name} is turned off on this server.", 403)
        who = await finish(provider, record, params["code"], redirect_uri=_redirect_uri(web, pid))
        outcome: Outcome
        if linker is not None:
            linker_id = linker.id
            outcome = await anyio.to_thread.run_sync(lambda: accounts.link(store, provider, who, linker_id))
        else:
            outcome = await anyio.to_thread.run_sync(
                lambda: accounts.sign_in(
                    store,
                    provider,
                    who,
                    require_approval=web.security.current().require_approval,
                    invite=record.get("inv"),
                )
            )
    except FlowError as e:
        log.info("sso %s: flow refused (%s)", pid, e.kind)
        response: Response = _message(request, e.status, _heading(e.kind), str(e))
        _flow_cookie(request, response, "", 0)
        return response
    except Exception:  # noqa: BLE001 - a page, never a traceback
        log.exception("sso %s: the callback failed", pid)
        response = _message(request, 500, "Sign-in failed", "Something went wrong on this server. Try again.")
        _flow_cookie(request, response, "", 0)
        return response

    identity = Identity(outcome.user)
    if outcome.linked_now:
        audit.record(request, identity, "account.link", f"{provider.id}:{who.login or who.subject}")
    if record["for"] == "link":
        response = RedirectResponse(f"{_root(request)}/settings/account?linked={quote(provider.id)}", 303)
    elif outcome.user.suspended_at is not None:  # (codesearch.store.offboarding)
        response = _message(request, 403, "Account deactivated", "An owner deactivated this account.")
    elif outcome.pending:
        audit.record(request, identity, "member.request", outcome.user.email, provider=provider.id)
        if outcome.created:
            notify_join_request(web, store, outcome.user)
        response = _message(
            request,
            403,
            "Waiting for approval",
            "Your account was created. An owner of this server must approve it before you can "
            "sign in; try again later.",
        )
    else:
        if outcome.created and record.get("inv"):
            audit.record(request, identity, "invite.accept", outcome.user.email, role=outcome.user.role)
        response = RedirectResponse(sessions.safe_next(record.get("next"), _root(request)), 303)
        await anyio.to_thread.run_sync(
            lambda: sessions.start_session(request, response, store, outcome.user, web.session_max_age_s)
        )
        audit.record(request, identity, "login.sso", outcome.user.email, provider=provider.id, created=outcome.created)
    _flow_cookie(request, response, "", 0)
    return response


# ------------------------------------------------------------------ linked accounts


def _account_page(
    request: Request,
    web: WebContext,
    store: Store,
    user: User,
    status_code: int = 200,
    error: str | None = None,
    notice: str | None = None,
) -> HTMLResponse:
    providers = web.identity_providers
    lacking = required.missing(store, user.id, providers.values())
    linked = store.list_linked_accounts(user_id=user.id)
    methods = accounts.sign_in_methods(store, user, providers)
    rows: list[dict[str, Any]] = []
    for a in linked:
        p = providers.get(a.provider)
        counts = p is not None and p.signs_in
        rows.append({"account": a, "name": p.name if p else a.provider, "may_unlink": not counts or methods > 1})
    return _page(
        request,
        "account.html",
        status_code=status_code,
        title="Linked accounts",
        section="account",
        rows=rows,
        providers=list(providers.values()),
        form_targets=provider_targets(providers.values()),  # the link buttons redirect to them
        error=error,
        notice=notice,
        lacking=lacking,
        lacking_names=required.names(lacking) if lacking else "",
        required_ids={p.id for p in required.required(providers.values())},
    )


@router.get("/settings/account")
def account(request: Request, web: WebDep, store: StoreDep, linked: str = "", unlinked: str = "") -> Response:
    user = sessions.current_user(request)
    if user is None:
        return sessions.login_redirect(request)
    if store is None:
        return _no_store(request)
    notice = None
    if linked in web.identity_providers:
        notice = f"Your {web.identity_providers[linked].name} account is linked."
    elif unlinked:
        notice = "The account was unlinked."
    return _account_page(request, web, store, user, notice=notice)


@router.post("/settings/account/unlink/{account_id}")
def unlink(request: Request, account_id: str, web: WebDep, store: StoreDep, csrf_token: str = Form("")) -> Response:
    user = sessions.form_user(request, csrf_token)
    if user is None:
        return sessions.login_redirect(request)
    if store is None:
        return _no_store(request)
    providers = web.identity_providers
    try:
        acct = store.get_linked_account(int(account_id)) if account_id.isdigit() else None
    except NotFound:
        acct = None
    if acct is None or acct.user_id != user.id:
        return _message(request, 404, "Not found", "There is nothing here.")
    p = providers.get(acct.provider)
    if p is not None and p.signs_in and accounts.sign_in_methods(store, user, providers) <= 1:
        return _account_page(
            request,
            web,
            store,
            user,
            409,
            error="This is your only way to sign in: link another account or set a password first.",
        )
    store.unlink_account(user.id, acct.id)
    audit.record(request, Identity(user), "account.unlink", f"{acct.provider}:{acct.login or acct.subject}")
    return RedirectResponse(f"{_root(request)}/settings/account?unlinked=1", 303)


# ------------------------------------------------------------------ members (owners)


def _owner(request: Request, store: Store | None) -> tuple[User, Store] | Response:
    """(the signed-in owner, the store), or the response for anyone else."""
    user = sessions.current_user(request)
    if user is None:
        return sessions.login_redirect(request)
    if user.role != OWNER:
        return _message(request, 403, "Owners only", "Only owners can manage members.")
    if store is None:  # (a signed-in user implies a store: sessions live in it)
        return _no_store(request)
    return user, store


def _members_page(
    request: Request, web: WebContext, store: Store, status_code: int = 200, **context: Any
) -> HTMLResponse:
    context.setdefault("error", None)
    context.setdefault("notice", None)
    context.setdefault("created", None)
    return _page(
        request,
        "members.html",
        status_code=status_code,
        title="Members",
        section="members",
        requests=store.list_account_requests(),
        invites=store.list_invites(),
        roles=ROLES,
        require_approval=web.security.current().require_approval,
        **context,
    )


@router.get("/settings/members")
def members(request: Request, web: WebDep, store: StoreDep) -> Response:
    owner = _owner(request, store)
    if isinstance(owner, Response):
        return owner
    _user, store = owner
    return _members_page(request, web, store)


@router.post("/settings/members/{user_id}/{decision}")
def decide(
    request: Request, user_id: str, decision: str, web: WebDep, store: StoreDep, csrf_token: str = Form("")
) -> Response:
    owner = _owner(request, store)
    if isinstance(owner, Response):
        return owner
    me, store = owner
    sessions.require_csrf(request, csrf_token)
    if not user_id.isdigit() or decision not in ("approve", "decline"):
        return _message(request, 404, "Not found", "There is nothing here.")
    try:
        if decision == "approve":
            u = store.approve_account_request(int(user_id))
            notice = f"{u.email} can sign in now."
            notify_approved(web, u)
        else:
            u = store.decline_account_request(int(user_id))
            notice = f"{u.email} was declined."
    except NotFound:
        return _members_page(request, web, store, 404, error="That request does not exist (any more).")
    audit.record(request, Identity(me), f"member.{decision}", u.email)
    return _members_page(request, web, store, notice=notice)


@router.post("/settings/members/invites")
def create_invite(
    request: Request,
    web: WebDep,
    store: StoreDep,
    email: str = Form(""),
    role: str = Form("MEMBER"),
    csrf_token: str = Form(""),
) -> Response:
    owner = _owner(request, store)
    if isinstance(owner, Response):
        return owner
    me, store = owner
    sessions.require_csrf(request, csrf_token)
    email = email.strip()[:MAX_EMAIL]
    if role not in ROLES or (email and "@" not in email):
        return _members_page(request, web, store, 400, error="Give a valid e-mail address (or none) and a role.")
    invite, token = store.create_invite(me.id, email=email or None, role=role)
    audit.record(request, Identity(me), "invite.create", invite.email or "(any e-mail)", role=role)
    link = f"{(web.public_url or '').rstrip('/')}/invite/{token}"
    created: dict[str, Any] = {"link": link, "email": invite.email, "role": role, "mailed": False, "mail_error": None}
    if invite.email and web.mailer is not None:  # the owner waits: sent now, the outcome shown
        expires = _when(invite.expires_at)
        try:
            web.mailer.send(invite_mail(invite.email, me.name or me.email, role, link, expires))
            created["mailed"] = True
        except MailError as e:
            created["mail_error"] = str(e)
    return _members_page(request, web, store, 201, created=created)


@router.post("/settings/members/invites/{invite_id}/revoke")
def revoke_invite(
    request: Request, invite_id: str, web: WebDep, store: StoreDep, csrf_token: str = Form("")
) -> Response:
    owner = _owner(request, store)
    if isinstance(owner, Response):
        return owner
    me, store = owner
    sessions.require_csrf(request, csrf_token)
    if not store.revoke_invite(invite_id[:64]):
        return _members_page(request, web, store, 404, error="That invite does not exist or was used.")
    audit.record(request, Identity(me), "invite.revoke", invite_id[:12])
    return _members_page(request, web, store, notice="The invite was revoked: its link no longer works.")


# ------------------------------------------------------------------ joining with an invite


def _invite_page(
    request: Request,
    web: WebContext,
    store: Store | None,
    token: str,
    status_code: int = 200,
    error: str | None = None,
    email: str = "",
    name: str = "",
) -> HTMLResponse:
    invite = store.find_invite(token) if store is not None else None
    if invite is None:
        response = _message(
            request,
            404,
            "Invite not valid",
            "This invite link is not valid, was used, or has expired. Ask an owner for a new one.",
        )
    else:
        response = _page(
            request,
            "invite.html",
            status_code=status_code,
            title="Join",
            invite=invite,
            token=token,
            sso_providers=sso_providers(web),  # those the owners have not turned off
            form_targets=provider_targets(sso_providers(web)),
            password_login=web.security.current().password_login,
            email_code=email_code_available(web),
            error=error,
            email=email or invite.email or "",
            name=name,
        )
    # The token is in this page's URL: no Referer carries it elsewhere, no cache keeps the page.
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/invite/{token}")
def invite(request: Request, token: str, web: WebDep, store: StoreDep) -> Response:
    return _invite_page(request, web, store, token)


@router.post("/invite/{token}")
def join(
    request: Request,
    token: str,
    web: WebDep,
    store: StoreDep,
    email: str = Form(""),
    name: str = Form(""),
    password: str = Form(""),
    confirm: str = Form(""),
    csrf_token: str = Form(""),
) -> Response:
    sessions.require_csrf(request, csrf_token, allow_visitor=True)
    if store is None or store.find_invite(token) is None:
        return _invite_page(request, web, store, token)
    email, name = email.strip()[:MAX_EMAIL], name.strip()[:MAX_NAME]
    if not web.security.current().password_login:  # as on /login: the owners turned passwords off
        off = "Joining with a password is turned off on this server: use another way on this page."
        return _invite_page(request, web, store, token, 403, error=off, email=email, name=name)
    error = None if "@" in email else "Enter a valid email address."
    error = error or password_problem(password) or ("The two passwords do not match." if password != confirm else None)
    if error:
        return _invite_page(request, web, store, token, 400, error=error, email=email, name=name)
    try:
        user, _pending = store.sign_up(email, name, password_hash=hash_password(password), invite_token=token)
    except InviteInvalid as e:
        return _invite_page(request, web, store, token, 403, error=str(e), email=email, name=name)
    except Conflict:
        return _invite_page(
            request,
            web,
            store,
            token,
            409,
            error="An account with this e-mail exists: sign in instead.",
            email=email,
            name=name,
        )
    audit.record(request, Identity(user), "invite.accept", user.email, role=user.role)
    response = RedirectResponse(f"{_root(request)}/", 303)
    sessions.start_session(request, response, store, user, web.session_max_age_s)
    return response


def _heading(kind: str) -> str:
    return {
        "state": "This sign-in cannot be completed",
        "denied": "Sign-in refused",
        "unreachable": "The sign-in provider is unavailable",
        "config": "Sign-in is misconfigured",
        "identity": "This account cannot be used",
    }.get(kind, "Sign-in failed")
