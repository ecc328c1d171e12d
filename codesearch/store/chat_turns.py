"""Follow-up questions of chats, and who may share them.

A chat's row (`Store.create_chat`) holds its first question and answer, which is all an
`ask_codebase` session has. The web UI's chat page lets the person who asked go on asking in the
same chat: each follow-up is a `ChatTurn` (position 1, 2, ...) in ``chat_turns``, and the model
gets the earlier questions and answers as context. `set_chat_visibility` is the sharing switch
(PRIVATE: its user only; PUBLIC: anyone with the link).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import func, insert, select, update

from codesearch.store import models as m
from codesearch.store.base import StoreBase
from codesearch.store.chats import answer_values
from codesearch.store.errors import NotFound
from codesearch.store.tables import chat_turns, chats


class ChatTurnsMixin(StoreBase):
    """`Store` methods for follow-ups (see the module docstring)."""

    def add_chat_turn(
        self,
        chat_id: str,
        question: str,
        answer: str = "",
        *,
        model: Mapping[str, Any] | None = None,
        steps: Iterable[Mapping[str, Any]] | None = None,
        status: str = m.CHAT_COMPLETED,
        error: str | None = None,
        usage: Mapping[str, Any] | None = None,
    ) -> m.ChatTurn:
        """Append a follow-up to chat `chat_id` (NotFound when there is no such chat)."""
        answered = answer_values(question, answer, model, steps, status, error, usage)
        with self._tx(write=True) as c:
            if c.scalar(select(chats.c.id).where(chats.c.id == chat_id)) is None:
                raise NotFound("chat", chat_id)
            last = c.scalar(select(func.max(chat_turns.c.position)).where(chat_turns.c.chat_id == chat_id)) or 0
            values = {"chat_id": chat_id, "position": last + 1, **answered, "created_at": self._now()}
            c.execute(insert(chat_turns).values(**values))
            return m.ChatTurn(**values)

    def list_chat_turns(self, chat_id: str) -> list[m.ChatTurn]:
        """The follow-ups of `chat_id`, oldest first (empty for a chat without any, or no chat)."""
        with self._tx() as c:
            rows = c.execute(select(chat_turns).where(chat_turns.c.chat_id == chat_id).order_by(chat_turns.c.position))
            return [m.ChatTurn(**r._mapping) for r in rows]

    def set_chat_visibility(self, chat_id: str, visibility: str) -> m.Chat:
        """Share (PUBLIC) or unshare (PRIVATE) a chat; NotFound when there is no such chat."""
        if visibility not in m.CHAT_VISIBILITIES:
            raise ValueError(f"unknown chat visibility {visibility!r}")
        with self._tx(write=True) as c:
            if c.execute(update(chats).where(chats.c.id == chat_id).values(visibility=visibility)).rowcount == 0:
                raise NotFound("chat", chat_id)
            return self._get_chat(c, chat_id)
