"""Managing chats: rename, delete, duplicate, and share with named members.

A chat's user may give it a name (`rename_chat`; without one its first question names it), delete
it with its follow-ups (`delete_chat`) and share it with members by name (`share_chat`,
`unshare_chat`, `chat_members`): a member it is shared with may read it, as Sourcebot's invited
users may (not ask in it, rename, delete or share it). Anyone who may read a chat may duplicate it
(`duplicate_chat`): the copy is a PRIVATE chat of theirs, shared with nobody. Who may do what is
decided by the callers (`codesearch.service.routes.chat_manage`); the store keeps the rows.
"""

from __future__ import annotations

import secrets

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store import models as m
from codesearch.store.base import StoreBase
from codesearch.store.rows import from_row, get_one
from codesearch.store.tables import chat_access, chat_turns, chats, users

#: Longest chat name, in characters.
MAX_CHAT_NAME = 200
#: Most members one chat is shared with (the share panel lists them all).
MAX_CHAT_MEMBERS = 100


def chat_name(name: str) -> str:
    """`name` trimmed; ValueError when it is empty or longer than `MAX_CHAT_NAME`."""
    name = " ".join((name or "").split())
    if not name:
        raise ValueError("the name is empty: write a few words that say what the chat is about")
    if len(name) > MAX_CHAT_NAME:
        raise ValueError(f"the name is {len(name)} characters long; at most {MAX_CHAT_NAME} are allowed")
    return name


def _chat(c: SAConnection, chat_id: str) -> m.Chat:
    return get_one(c, m.Chat, chats.c.id, chat_id, "chat")


class ChatSharingMixin(StoreBase):
    """The `Store` methods that manage chats (see the module docstring)."""

    def rename_chat(self, chat_id: str, name: str) -> m.Chat:
        """Name a chat; NotFound when there is none, ValueError for a bad name (`chat_name`)."""
        name = chat_name(name)
        with self._tx(write=True) as c:
            _chat(c, chat_id)
            c.execute(update(chats).where(chats.c.id == chat_id).values(name=name))
            return _chat(c, chat_id)

    def delete_chat(self, chat_id: str) -> None:
        """Delete a chat with its follow-ups and shares; NotFound when there is none."""
        with self._tx(write=True) as c:
            _chat(c, chat_id)
            c.execute(delete(chat_access).where(chat_access.c.chat_id == chat_id))
            c.execute(delete(chat_turns).where(chat_turns.c.chat_id == chat_id))
            c.execute(delete(chats).where(chats.c.id == chat_id))

    def duplicate_chat(self, chat_id: str, user_id: int, name: str | None = None) -> m.Chat:
        """A PRIVATE copy of a chat and its follow-ups for `user_id`, shared with nobody, named
        `name` (default: "Copy of <its title>"). NotFound for an unknown chat or user."""
        with self._tx(write=True) as c:
            source = _chat(c, chat_id)
            self._get_user(c, user_id)
            title = chat_name(name) if name is not None else chat_name(f"Copy of {source.title}"[:MAX_CHAT_NAME])
            new_id = secrets.token_urlsafe(12)
            while c.scalar(select(chats.c.id).where(chats.c.id == new_id)) is not None:
                new_id = secrets.token_urlsafe(12)
            row = c.execute(select(chats).where(chats.c.id == chat_id)).one()._asdict()
            row.update(id=new_id, user_id=user_id, visibility=m.CHAT_PRIVATE, name=title, created_at=self._now())
            c.execute(insert(chats).values(**row))
            for turn in c.execute(select(chat_turns).where(chat_turns.c.chat_id == chat_id)).all():
                c.execute(insert(chat_turns).values(**{**turn._asdict(), "chat_id": new_id}))
            return _chat(c, new_id)

    def share_chat(self, chat_id: str, user_id: int) -> bool:
        """Let member `user_id` read the chat; False when it already may. NotFound for an unknown
        chat or user; ValueError when the chat has `MAX_CHAT_MEMBERS` members already."""
        with self._tx(write=True) as c:
            _chat(c, chat_id)
            self._get_user(c, user_id)
            key = (chat_access.c.chat_id == chat_id) & (chat_access.c.user_id == user_id)
            if c.scalar(select(chat_access.c.user_id).where(key)) is not None:
                return False
            count = c.scalar(select(func.count()).select_from(chat_access).where(chat_access.c.chat_id == chat_id))
            if (count or 0) >= MAX_CHAT_MEMBERS:
                raise ValueError(f"a chat is shared with at most {MAX_CHAT_MEMBERS} members; remove one first")
            c.execute(insert(chat_access).values(chat_id=chat_id, user_id=user_id, created_at=self._now()))
            return True

    def unshare_chat(self, chat_id: str, user_id: int) -> bool:
        """Take back member `user_id`'s access (at once: every read checks); False when it had none."""
        with self._tx(write=True) as c:
            key = (chat_access.c.chat_id == chat_id) & (chat_access.c.user_id == user_id)
            return bool(c.execute(delete(chat_access).where(key)).rowcount)

    def chat_members(self, chat_id: str) -> list[m.User]:
        """The members the chat is shared with, in the order they were added."""
        q = (
            select(users)
            .join(chat_access, chat_access.c.user_id == users.c.id)
            .where(chat_access.c.chat_id == chat_id)
            .order_by(chat_access.c.created_at, users.c.id)
            .limit(MAX_CHAT_MEMBERS)
        )
        with self._tx() as c:
            return [from_row(m.User, r) for r in c.execute(q)]

    def is_chat_shared_with(self, chat_id: str, user_id: int) -> bool:
        key = (chat_access.c.chat_id == chat_id) & (chat_access.c.user_id == user_id)
        with self._tx() as c:
            return c.scalar(select(chat_access.c.user_id).where(key)) is not None

    def list_chats_shared_with(self, user_id: int, limit: int = 50) -> list[m.Chat]:
        """The chats shared with `user_id`, newest share first."""
        q = (
            select(chats)
            .join(chat_access, chat_access.c.chat_id == chats.c.id)
            .where(chat_access.c.user_id == user_id)
            .order_by(chat_access.c.created_at.desc(), chats.c.id)
            .limit(limit)
        )
        with self._tx() as c:
            return [from_row(m.Chat, r) for r in c.execute(q)]
