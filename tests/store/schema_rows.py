"""Databases at any schema version, filled with one representative row per table, and ways to
compare two databases (their rows, their schema) whatever their backend.

`build_at(engine, k)` runs the migrations 1..k (as the release that shipped version k would
have); `fill(conn)` reads the tables as they are at that version and writes one row in each,
parents first, a value of the column's type in each column (`OVERRIDES` gives the columns
whose value the code reads a meaning from a realistic one). New migrations join by themselves:
nothing here names a version.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import MetaData, insert, inspect, select
from sqlalchemy import types as sqltypes
from sqlalchemy.engine import Connection, Engine

from codesearch.store.backup import decode_value, encode_value, reflect
from codesearch.store.migrations import MIGRATIONS, migrate

STAMP = "2025-01-02T03:04:05.123456+00:00"

#: realistic values where the code gives a column's content a meaning (roles, kinds, states...)
OVERRIDES: dict[tuple[str, str], Any] = {
    ("users", "email"): "owner@example.com",
    ("users", "role"): "OWNER",
    ("users", "kind"): "human",
    ("connections", "type"): "github",
    ("connections", "config"): {"type": "github", "repos": ["acme/app"]},
    ("connections", "sync_status"): "SYNCED",
    ("connections", "sync_warnings"): [],
    ("repos", "name"): "github.com/acme/app",
    ("repos", "code_host_type"): "github",
    ("repos", "index_status"): "INDEXED",
    ("repos", "topics"): ["search"],
    ("repos", "indexed_revisions"): {"main": "0" * 40},
    ("jobs", "kind"): "index",
    ("jobs", "state"): "PENDING",
    ("chats", "visibility"): "PRIVATE",
    ("chats", "status"): "COMPLETED",
    ("chat_turns", "status"): "COMPLETED",
    ("invites", "role"): "MEMBER",
    ("linked_accounts", "provider_type"): "github",
    ("oauth_tokens", "kind"): "access",
    ("repo_grants", "source"): "user",
    ("insights", "step"): "day",
}


def build_at(engine: Engine, version: int) -> None:
    """The database as the release of schema `version` left it: migrations 1..version."""
    assert migrate(engine, migrations=MIGRATIONS[:version]) == version


def sample(table: str, column: Any, dialect: str) -> Any:
    """A value of `column`'s type (its length respected)."""
    if (table, column.name) in OVERRIDES:
        return OVERRIDES[(table, column.name)]
    t = column.type
    if isinstance(t, sqltypes.Boolean):
        return True
    if isinstance(t, sqltypes.BigInteger):
        return 2**40 + 7
    if isinstance(t, sqltypes.Integer):
        return 7
    if isinstance(t, sqltypes.DateTime):
        return decode_value(t, STAMP, dialect)
    if isinstance(t, sqltypes.Date):
        return decode_value(t, STAMP[:10], dialect)
    if isinstance(t, sqltypes.Float):
        return 1.5
    if isinstance(t, sqltypes.Numeric):
        return decode_value(t, "12.25", dialect)
    if isinstance(t, sqltypes.JSON):
        return {"table": table, "list": [1, "two", None]}
    if isinstance(t, sqltypes._Binary):
        return b"\x00\xffbytes"
    if isinstance(t, sqltypes.String):
        text = f"{table}.{column.name} é"
        return text[: t.length] if t.length else text
    raise AssertionError(f"no sample value for {table}.{column.name} of type {t!r}: add one to schema_rows.sample")


def fill(conn: Connection) -> dict[str, dict[str, Any]]:
    """One row in every table (but schema_version) as the tables are now; the rows, by table."""
    rows: dict[str, dict[str, Any]] = {}
    dialect = conn.dialect.name
    for table in reflect(conn):
        if table.name == "schema_version":
            continue
        row: dict[str, Any] = {}
        for column in table.columns:
            fks = list(column.foreign_keys)
            if fks:
                parent = fks[0].column
                row[column.name] = rows[parent.table.name][parent.name]
            else:
                row[column.name] = sample(table.name, column, dialect)
        conn.execute(insert(table).values(row))
        rows[table.name] = row
    return rows


def contents(conn: Connection) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table, values as a backup writes them (comparable across backends)."""
    found = {}
    for table in reflect(conn):
        key = table.primary_key.columns or list(table.columns)
        found[table.name] = [
            {c.name: encode_value(c.type, v) for c, v in zip(table.columns, row, strict=True)}
            for row in conn.execute(select(table).order_by(*key))
        ]
    return found


def encoded(conn: Connection, rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`rows` (as `fill` wrote them) encoded like `contents`."""
    md = MetaData()
    md.reflect(bind=conn)
    return {
        name: {k: encode_value(md.tables[name].c[k].type, v) if k in md.tables[name].c else v for k, v in row.items()}
        for name, row in rows.items()
    }


def schema_of(conn: Connection) -> dict[str, Any]:
    """The schema as the database reports it: per table its columns (name, type, nullable), primary
    key, indexes, unique constraints and foreign keys (read for all tables at once: on PostgreSQL
    one query per kind, not per table)."""
    insp = inspect(conn)
    columns, pks = insp.get_multi_columns(), insp.get_multi_pk_constraint()
    indexes, uniques, fks = insp.get_multi_indexes(), insp.get_multi_unique_constraints(), insp.get_multi_foreign_keys()
    schema = {}
    for key in sorted(columns, key=lambda k: k[1]):
        schema[key[1]] = {
            "columns": [(c["name"], str(c["type"]), c["nullable"]) for c in columns[key]],
            "pk": pks[key]["constrained_columns"],
            "indexes": sorted((ix["name"], tuple(ix["column_names"]), ix["unique"]) for ix in indexes[key]),
            "uniques": sorted(tuple(u["column_names"]) for u in uniques[key]),
            "fks": sorted(
                (tuple(f["constrained_columns"]), f["referred_table"], (f.get("options") or {}).get("ondelete"))
                for f in fks[key]
            ),
        }
    return schema
