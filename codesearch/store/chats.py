"""Chats: `ask_codebase` answers (or failures), kept under a random URL-safe id.

A chat belongs to the user who asked (None: asked without signing in) and is PRIVATE (its user
only) or PUBLIC (anyone with the link); its follow-up questions and the sharing switch are
`codesearch.store.chat_turns`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store import models as m
from codesearch.store.base import StoreBase
from codesearch.store.models import Chat
from codesearch.store.rows import from_row, get_one
from codesearch.store.tables import chats


def answer_values(
    question: str,
    answer: str,
    model: Mapping[str, Any] | None,
    steps: Iterable[Mapping[str, Any]] | None,
    status: str,
    error: str | None,
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The columns of a question and its answer, which a chat's row and its follow-ups' rows
    (`codesearch.store.chat_turns`) share; ValueError for an unknown `status`."""
    if status not in m.CHAT_STATUSES:
        raise ValueError(f"unknown chat status {status!r}")
    return {
        "question": question or "",
        "answer": answer or "",
        "model": dict(model or {}),
        "steps": [dict(s) for s in steps or ()],
        "status": status,
        "error": error,
        "usage": dict(usage) if usage else None,
    }


class ChatsMixin(StoreBase):
    """The `Store` methods for chats (mixed into `Store`)."""

    def create_chat(
        self,
        question: str,
        answer: str = "",
        *,
        user_id: int | None = None,
        visibility: str = m.CHAT_PRIVATE,
        model: Mapping[str, Any] | None = None,
        steps: Iterable[Mapping[str, Any]] | None = None,
        status: str = m.CHAT_COMPLETED,
        error: str | None = None,
        usage: Mapping[str, Any] | None = None,
    ) -> Chat:
        """Record an `ask_codebase` answer (or failure) under a new random URL-safe id.
        NotFound when `user_id` is not a user."""
        if visibility not in m.CHAT_VISIBILITIES:
            raise ValueError(f"unknown chat visibility {visibility!r}")
        values = {
            "user_id": user_id,
            "visibility": visibility,
            **answer_values(question, answer, model, steps, status, error, usage),
            "created_at": self._now(),
        }
        with self._tx(write=True) as c:
            if user_id is not None:
                self._get_user(c, user_id)
            for _ in range(5):  # 96 random bits: a collision is practically impossible, but cheap to handle
                chat_id = secrets.token_urlsafe(12)
                if c.scalar(select(chats.c.id).where(chats.c.id == chat_id)) is None:
                    break
            c.execute(insert(chats).values(id=chat_id, **values))
            return self._get_chat(c, chat_id)

    def get_chat(self, chat_id: str) -> Chat:
        with self._tx() as c:
            return self._get_chat(c, chat_id)

    def list_chats(self, user_id: int | None = None, limit: int = 50) -> list[Chat]:
        """Chats, newest first: `user_id`'s, or everyone's when None."""
        q = select(chats)
        if user_id is not None:
            q = q.where(chats.c.user_id == user_id)
        with self._tx() as c:
            return [
                from_row(Chat, r) for r in c.execute(q.order_by(chats.c.created_at.desc(), chats.c.id).limit(limit))
            ]

    def _get_chat(self, c: SAConnection, chat_id: str) -> Chat:
        return get_one(c, Chat, chats.c.id, chat_id, "chat")
