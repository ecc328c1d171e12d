"""Sourcebot's member and scoped-token API (``/api/ee/...``), with Sourcebot's shapes and codes.

``GET /api/ee/users``
    Owners only (403 ``INSUFFICIENT_PERMISSIONS`` for anyone else): every member, as
    ``[{id, name, email, role, suspendedAt, createdAt, updatedAt, lastActivityAt}]`` (``id`` a
    string; service accounts are members too). Audited ``user.list``.
``GET /api/ee/user?userId=``
    Owners only: one member, the same shape; 400 ``MISSING_REQUIRED_QUERY_PARAMETER`` without
    ``userId``, 404 ``NOT_FOUND`` for an unknown one. Audited ``user.read``.
``DELETE /api/ee/user?userId=``
    Owners only: removes the member (`Store.remove_user`): their sessions, API keys, OAuth grants
    and scoped tokens end at once, on every replica. ``{success: true, message}``; 403
    ``LAST_OWNER_CANNOT_BE_REMOVED`` for the last active owner; 404 for an unknown user.
    Audited ``member.remove``.
``POST /api/ee/scoped_access_token``
    Body ``{repoIds: [positive integer, ...]}`` (nothing else; 1 to 1000 ids). Only with an API
    key (403 ``INSUFFICIENT_PERMISSIONS`` for a session, OAuth or scoped token): 201
    ``{id, token, createdAt, expiresAt, repoIds}``, a ``sbst_`` token that expires in one hour
    and sees only those repositories, and of them only what the key's user may see. 400
    ``INVALID_REPOSITORY_SCOPE`` when an id is not a repository the user may see. Audited
    ``scoped_token.create`` (never the token).
``DELETE /api/ee/scoped_access_token/{id}``
    Only with an API key: revokes one of the key user's tokens; 204, or 404
    ``SCOPED_ACCESS_TOKEN_NOT_FOUND``. Audited ``scoped_token.revoke``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from codesearch import audit
from codesearch.errors import (
    CodesearchError,
    InsufficientPermissions,
    InvalidArgument,
    NotAnOwner,
    NotFound,
    ServiceUnavailable,
)
from codesearch.permissions import visible_repos
from codesearch.service.auth import VIA_API_KEY
from codesearch.service.deps import Caller, StoreDep
from codesearch.store.scoped_tokens import MAX_SCOPED_REPOS

if TYPE_CHECKING:
    from codesearch.permissions import Identity
    from codesearch.store import Store
    from codesearch.store.models import User


class MissingQueryParameter(InvalidArgument):
    error_code = "MISSING_REQUIRED_QUERY_PARAMETER"


class InvalidRepositoryScope(InvalidArgument):
    error_code = "INVALID_REPOSITORY_SCOPE"


class MemberNotFound(CodesearchError):
    error_code = "NOT_FOUND"
    status_code = 404


class ScopedTokenNotFound(CodesearchError):
    error_code = "SCOPED_ACCESS_TOKEN_NOT_FOUND"
    status_code = 404


class CreateScopedToken(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repoIds: list[StrictInt] = Field(min_length=1, max_length=MAX_SCOPED_REPOS)  # noqa: N815


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat().replace("+00:00", "Z")


def public_user(user: User, last_activity: datetime | None) -> dict[str, Any]:
    """A member in Sourcebot's ``PublicEeUser`` shape (we keep no separate update time)."""
    return {
        "id": str(user.id),
        "name": user.name or None,
        "email": user.email,
        "role": user.role,
        "suspendedAt": _iso(user.suspended_at),
        "createdAt": _iso(user.created_at),
        "updatedAt": _iso(user.created_at),
        "lastActivityAt": _iso(last_activity),
    }


def _owner_store(identity: Identity, store: Store | None) -> Store:
    if identity.role != "OWNER":
        raise NotAnOwner("only owners may manage members")
    if store is None:
        raise ServiceUnavailable("this service has no state database: it has no members")
    return store


def _user_id(value: str | None) -> int:
    if not value:
        raise MissingQueryParameter("Missing required query parameter: userId")
    try:
        return int(value)
    except ValueError:
        raise MemberNotFound("User not found") from None


def _get_member(store: Store, user_id: int) -> User:
    try:
        return store.get_user(user_id)
    except NotFound:
        raise MemberNotFound("User not found") from None


def _key_store(identity: Identity, store: Store | None) -> Store:
    if identity.user is None or identity.via != VIA_API_KEY:
        raise InsufficientPermissions("scoped access tokens are made and revoked with an API key only")
    if store is None:
        raise ServiceUnavailable("this service has no state database: it cannot keep tokens")
    return store


router = APIRouter()


# Comments, not docstrings: FastAPI would publish them (the module docstring says what each does).
@router.get("/api/ee/users")
def list_users(request: Request, identity: Caller, store: StoreDep) -> list[dict[str, Any]]:
    db = _owner_store(identity, store)
    seen = db.last_activity()
    audit.record(request, identity, "user.list")
    return [public_user(u, seen.get(u.id)) for u in db.list_users()]


@router.get("/api/ee/user")
def get_user(request: Request, identity: Caller, store: StoreDep, userId: str | None = None) -> dict[str, Any]:  # noqa: N803
    db = _owner_store(identity, store)
    user = _get_member(db, _user_id(userId))
    audit.record(request, identity, "user.read", user.email)
    return public_user(user, db.last_activity().get(user.id))


@router.delete("/api/ee/user")
def delete_user(request: Request, identity: Caller, store: StoreDep, userId: str | None = None) -> dict[str, Any]:  # noqa: N803
    db = _owner_store(identity, store)
    user_id = _user_id(userId)
    _get_member(db, user_id)
    gone = db.remove_user(user_id)
    audit.record(request, identity, "member.remove", gone.email, userId=gone.id, kind=gone.kind)
    return {"success": True, "message": "User deleted successfully"}


@router.post("/api/ee/scoped_access_token", status_code=201)
def create_scoped_access_token(
    body: CreateScopedToken, request: Request, identity: Caller, store: StoreDep
) -> dict[str, Any]:
    db = _key_store(identity, store)
    ids = list(dict.fromkeys(body.repoIds))
    allowed = visible_repos(identity)
    known = db.existing_repo_ids(ids)
    bad = [i for i in ids if i <= 0 or i not in known or (allowed is not None and i not in allowed)]
    if bad:
        raise InvalidRepositoryScope(
            f"repoIds: each repository ID must identify a repository you may see; these do not: {bad[:20]}"
        )
    assert identity.user_id is not None  # an API key's identity has a user
    token, value = db.create_scoped_access_token(identity.user_id, ids)
    audit.record(request, identity, "scoped_token.create", token.id, repoIds=list(token.repo_ids))
    return {
        "id": token.id,
        "token": value,
        "createdAt": _iso(token.created_at),
        "expiresAt": _iso(token.expires_at),
        "repoIds": list(token.repo_ids),
    }


@router.delete("/api/ee/scoped_access_token/{token_id}", status_code=204)
def revoke_scoped_access_token(token_id: str, request: Request, identity: Caller, store: StoreDep) -> Response:
    db = _key_store(identity, store)
    assert identity.user_id is not None
    if len(token_id) > 64 or not db.revoke_scoped_access_token(identity.user_id, token_id):
        raise ScopedTokenNotFound("Scoped access token not found.")
    audit.record(request, identity, "scoped_token.revoke", token_id)
    return Response(status_code=204)
