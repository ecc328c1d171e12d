"""Managing chats over HTTP: rename, delete, duplicate, and share with named members.

Who may do what is `codesearch.app.chat_access`: the chat's user manages it; a member it is
shared with, or anyone for a PUBLIC chat, may read and duplicate it; everyone else gets 404
``NOT_FOUND`` (a private chat's existence does not leak). Every action is audited.

``PUT /api/chat/<id>/name``
    ``{name}`` (1–200 characters after trimming): rename (its user only). Answers ``{chatId, name}``.
``DELETE /api/chat/<id>``
    Delete the chat, its follow-ups and its shares (its user only). Answers ``{chatId, deleted: true}``.
``POST /api/chat/<id>/duplicate``
    ``{name?}``: a PRIVATE copy for the caller (signed in; anyone who may read the chat), shared
    with nobody. Answers ``{chatId, chatUrl, name}``.
``GET /api/chat/<id>/members``
    The members it is shared with (its user only): ``{members: [{id, email, name}]}``.
``POST /api/chat/<id>/members``
    ``{email}``: share with that member (its user only; at most 100 members). 404 ``NOT_FOUND``
    when no member has that address; 400 for the chat's own user. Answers the members.
``DELETE /api/chat/<id>/members/<user id>``
    Stop sharing with that member, at once. Answers the members.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StrictStr
from starlette.concurrency import run_in_threadpool

from codesearch import audit
from codesearch.app import chat_access
from codesearch.errors import NotAuthenticated, NotFound, ToolInputError
from codesearch.service.deps import Caller, ServicesDep
from codesearch.tools.ask import chat_url

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext


class NameRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(max_length=1000)


class DuplicateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: StrictStr | None = Field(None, max_length=1000)


class MemberRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    email: StrictStr = Field(min_length=1, max_length=320)


def _name(value: str) -> str:
    from codesearch.store.chat_sharing import chat_name

    try:
        return chat_name(value)
    except ValueError as e:
        raise ToolInputError(f"name: {e}") from None


def _members(tc: ToolContext, chat_id: str) -> dict[str, Any]:
    return {"members": [{"id": u.id, "email": u.email, "name": u.name} for u in tc.store.chat_members(chat_id)]}


router = APIRouter()


@router.put("/api/chat/{chat_id}/name")
async def rename_chat(
    request: Request, chat_id: str, body: NameRequest, identity: Caller, services: ServicesDep
) -> dict[str, Any]:
    tc = services.make_context(identity)
    name = _name(body.name)

    def rename() -> Any:
        chat_access.owned_chat(tc, chat_id, "rename")
        return tc.store.rename_chat(chat_id, name)

    chat = await run_in_threadpool(rename)
    audit.record(request, identity, "chat.rename", chat.id, name=chat.name)
    return {"chatId": chat.id, "name": chat.name}


@router.delete("/api/chat/{chat_id}")
async def delete_chat(request: Request, chat_id: str, identity: Caller, services: ServicesDep) -> dict[str, Any]:
    tc = services.make_context(identity)

    def remove() -> None:
        chat_access.owned_chat(tc, chat_id, "delete")
        tc.store.delete_chat(chat_id)

    await run_in_threadpool(remove)
    audit.record(request, identity, "chat.delete", chat_id)
    return {"chatId": chat_id, "deleted": True}


@router.post("/api/chat/{chat_id}/duplicate")
async def duplicate_chat(
    request: Request, chat_id: str, body: DuplicateRequest, identity: Caller, services: ServicesDep
) -> dict[str, Any]:
    if identity.anonymous or identity.user_id is None:
        raise NotAuthenticated("duplicating a chat makes a private chat of yours: sign in first")
    tc = services.make_context(identity)
    name = _name(body.name) if body.name is not None else None
    user_id = identity.user_id

    def duplicate() -> Any:
        chat_access.readable_chat(tc, chat_id)
        return tc.store.duplicate_chat(chat_id, user_id, name)

    copy = await run_in_threadpool(duplicate)
    audit.record(request, identity, "chat.duplicate", chat_id, copy=copy.id)
    return {"chatId": copy.id, "chatUrl": chat_url(services.public_url, copy.id), "name": copy.name}


@router.get("/api/chat/{chat_id}/members")
async def chat_members(chat_id: str, identity: Caller, services: ServicesDep) -> dict[str, Any]:
    tc = services.make_context(identity)

    def members() -> dict[str, Any]:
        chat_access.owned_chat(tc, chat_id, "see who can read")
        return _members(tc, chat_id)

    return await run_in_threadpool(members)


@router.post("/api/chat/{chat_id}/members")
async def share_chat(
    request: Request, chat_id: str, body: MemberRequest, identity: Caller, services: ServicesDep
) -> dict[str, Any]:
    tc = services.make_context(identity)
    email = body.email.strip().lower()

    def share() -> dict[str, Any]:
        chat = chat_access.owned_chat(tc, chat_id, "share")
        user = tc.store.find_user_by_email(email)
        if user is None or user.suspended_at is not None:
            raise NotFound("member", email)
        if user.id == chat.user_id:
            raise ToolInputError("email: that is you; the chat is yours already")
        try:
            tc.store.share_chat(chat_id, user.id)
        except ValueError as e:
            raise ToolInputError(str(e)) from None
        return _members(tc, chat_id)

    result = await run_in_threadpool(share)
    audit.record(request, identity, "chat.member.add", chat_id, member=email)
    return result


@router.delete("/api/chat/{chat_id}/members/{user_id}")
async def unshare_chat(
    request: Request, chat_id: str, user_id: int, identity: Caller, services: ServicesDep
) -> dict[str, Any]:
    tc = services.make_context(identity)

    def unshare() -> dict[str, Any]:
        chat_access.owned_chat(tc, chat_id, "share")
        if not tc.store.unshare_chat(chat_id, user_id):
            raise NotFound("member of this chat", str(user_id))
        return _members(tc, chat_id)

    result = await run_in_threadpool(unshare)
    audit.record(request, identity, "chat.member.remove", chat_id, member=user_id)
    return result
