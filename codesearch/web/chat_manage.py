"""What the chat pages show for managing chats (`codesearch.service.routes.chat_manage` does it).

- `chat_manage_context`: the chat page's toolbar (``_chat_manage.html``): its user gets rename,
  delete and the share panel (public link, named members); a signed-in reader (a member it is
  shared with, or anyone for a PUBLIC chat) may duplicate it; nothing for anonymous visitors;
- `shared_chat_items`: the "Shared with you" list of ``/chats``;
- `usage_text`: the model's token use under each answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codesearch.app import chat_access

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext
    from codesearch.store.models import Chat


def usage_text(usage: dict[str, Any] | None) -> str:
    """``1,234 input tokens · 56 output tokens · 3 requests`` ('' when the provider said nothing)."""
    if not usage:
        return ""
    inp, out = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    requests = int(usage.get("requests") or 0)
    if not (inp or out):
        return ""
    text = f"{inp:,} input tokens · {out:,} output tokens"
    if requests:
        text += f" · {requests} model request{'s' if requests != 1 else ''}"
    return text


def chat_manage_context(tc: ToolContext, chat: Chat, role: str) -> dict[str, Any]:
    """What the viewer (`role`, `codesearch.app.chat_access`) may do with `chat`, for the page."""
    owner = role == chat_access.OWNER
    members = [{"id": u.id, "email": u.email, "name": u.name} for u in tc.store.chat_members(chat.id)] if owner else []
    return {
        "role": role,
        "owner": owner,
        "duplicate": not tc.identity.anonymous,
        "name": chat.title,
        "members": members,
    }


def shared_chat_items(store: Any, user_id: int | None, limit: int) -> list[dict[str, Any]]:
    """The chats shared with `user_id` by name, newest share first, as ``/chats`` lists them."""
    if user_id is None:
        return []
    return [
        {
            "id": c.id,
            "question": c.title,
            "created": c.created_at.isoformat(timespec="seconds") if c.created_at else "",
            "when": c.created_at.strftime("%Y-%m-%d %H:%M UTC") if c.created_at else "",
        }
        for c in store.list_chats_shared_with(user_id, limit=limit)
    ]
