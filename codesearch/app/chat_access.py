"""Who may do what with a chat: one rule for the chat pages, the REST routes and follow-ups.

- its user (the one who asked, signed in) may read it, ask follow-ups in it, rename, delete and
  share it (`owned_chat`);
- a member it is shared with (``Store.share_chat``) may read it and duplicate it, nothing more,
  as in Sourcebot; a removed share ends that at once (every read asks the store);
- anyone may read a PUBLIC chat (anonymous visitors too, when anonymous access is on);
- nobody else: their answer is "not found" (`ChatNotFound`), so a private chat's existence does
  not leak.

Whatever the role, a chat whose research names a repository the viewer may not read is not shown
to them at all (`shows_only_visible_repos`): the permission rule holds for what others found, too.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from codesearch.errors import ChatNotFound

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext
    from codesearch.store.models import Chat

OWNER, MEMBER, READER = "owner", "member", "reader"


def role_of(tc: ToolContext, chat: Chat) -> str | None:
    """`OWNER`, `MEMBER` (shared with by name), `READER` (a PUBLIC chat) or None (no access)."""
    user_id = None if tc.identity.anonymous else tc.identity.user_id
    if user_id is not None and chat.user_id == user_id:
        return OWNER
    if user_id is not None and tc.store.is_chat_shared_with(chat.id, user_id):
        return MEMBER
    if chat.visibility == "PUBLIC":
        return READER
    return None


def _get(tc: ToolContext, chat_id: str) -> Chat | None:
    try:
        chat: Chat = tc.store.get_chat(chat_id)
    except Exception:  # NotFound, or an id that is not one
        return None
    return chat


def readable_chat(tc: ToolContext, chat_id: str) -> tuple[Chat, str]:
    """The chat and the caller's role in it; `ChatNotFound` when the caller may not read it."""
    chat = _get(tc, chat_id)
    role = role_of(tc, chat) if chat is not None else None
    if chat is None or role is None or not shows_only_visible_repos(tc, chat):
        raise ChatNotFound(f"chat {chat_id!r} not found, or you cannot see it")
    return chat, role


def owned_chat(tc: ToolContext, chat_id: str, action: str) -> Chat:
    """The caller's own chat; `ChatNotFound` for any other (`action` says what only its user may do)."""
    chat = _get(tc, chat_id)
    if chat is None or role_of(tc, chat) != OWNER:
        raise ChatNotFound(f"chat {chat_id!r} not found (only the user who asked may {action} a chat)")
    return chat


def shows_only_visible_repos(tc: ToolContext, chat: Chat) -> bool:
    """Whether a chat names only repositories the viewer may read (its questions, the tools'
    arguments and outputs, the answers, follow-ups included)."""
    from codesearch.permissions import visible_repos

    allowed = visible_repos(tc.identity)
    if allowed is None:
        return True
    hidden = [r.name for r in tc.store.list_repos(page=1, per_page=1_000_000)[0] if r.id not in allowed]
    if not hidden:
        return True
    parts = [chat.question or "", chat.answer or "", json.dumps(chat.steps or [], ensure_ascii=False)]
    for turn in tc.store.list_chat_turns(chat.id):  # the follow-ups too
        parts += [turn.question, turn.answer, json.dumps(turn.steps or [], ensure_ascii=False)]
    text = "\n".join(parts)
    return not any(name in text for name in hidden)
