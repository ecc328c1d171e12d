"""Migration 12 (`codesearch.store.migrations` lists it): Ask skills.

Kept in a module of its own so that `migrations` stays small; like every migration it is a
frozen description of one step and does not use the current tables of `tables.py`.
"""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, MetaData, String, Table, Text, UniqueConstraint
from sqlalchemy.engine import Connection

from codesearch.store.tables import NAMING_CONVENTION, UTCDateTime


def v12_skills(conn: Connection) -> None:
    """Ask skills: a user's personal ones, and the shared ones every member may use."""
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table("users", md, Column("id", Integer, primary_key=True))  # only as the target of user_id
    Table(
        "skills",
        md,
        Column("id", Integer, primary_key=True),
        Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        Column("scope", String(16), nullable=False),
        Column("owner_key", String(32), nullable=False),
        Column("slug", String(64), nullable=False),
        Column("name", String(80), nullable=False),
        Column("description", Text, nullable=False),
        Column("instructions", Text, nullable=False),
        Column("created_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        UniqueConstraint("owner_key", "slug"),
        Index(None, "user_id"),
    )
    md.tables["skills"].create(conn)
