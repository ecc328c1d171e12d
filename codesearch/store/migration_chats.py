"""Migration 13 (`codesearch.store.migrations` lists it): chat management.

Kept in a module of its own so that `migrations` stays small; like every migration it is a
frozen description of one step and does not use the current tables of `tables.py`.
"""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, MetaData, String, Table, text
from sqlalchemy.engine import Connection

from codesearch.store.tables import NAMING_CONVENTION, UTCDateTime


def v13_chat_names_usage_access(conn: Connection) -> None:
    """A chat's name (``chats.name``; NULL: its first question names it), the model's token use
    of each answer (``chats.usage``, ``chat_turns.usage``; NULL for answers stored before) and the
    members a chat is shared with (``chat_access``)."""
    conn.execute(text("ALTER TABLE chats ADD COLUMN name VARCHAR(200)"))
    conn.execute(text("ALTER TABLE chats ADD COLUMN usage JSON"))
    conn.execute(text("ALTER TABLE chat_turns ADD COLUMN usage JSON"))
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table("chats", md, Column("id", String(32), primary_key=True))  # only as the target of chat_id
    Table("users", md, Column("id", Integer, primary_key=True))  # only as the target of user_id
    Table(
        "chat_access",
        md,
        Column("chat_id", String(32), ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True),
        Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        Column("created_at", UTCDateTime, nullable=False),
        Index(None, "user_id"),
    )
    md.tables["chat_access"].create(conn)
