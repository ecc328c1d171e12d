"""Rows as models: the two steps every aggregate module takes to read its own rows.

Tables (`codesearch.store.tables`) and their dataclasses (`codesearch.store.models`) share column
and field names, so a row becomes its model by name; a row looked up by key that is not there
is `NotFound`, named as the API names it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.engine import Connection as SAConnection
from sqlalchemy.engine import CursorResult, Row

from codesearch.store.errors import NotFound, StoreError

T = TypeVar("T")

#: a row of any query, whatever its columns
AnyRow = Row[*tuple[Any, ...]]


def from_row(cls: type[T], row: Any) -> T:
    """A row of `codesearch.store.tables` as its dataclass `cls`."""
    return cls(**row._mapping)


def get_one(c: SAConnection, cls: type[T], column: Any, key: Any, what: str) -> T:
    """The row of `column`'s table whose `column` is `key`, as `cls`; NotFound(`what`, `key`) when none."""
    row = c.execute(select(column.table).where(column == key)).first()
    if row is None:
        raise NotFound(what, key)
    return from_row(cls, row)


def inserted_id(result: CursorResult[Any]) -> int:
    """The primary key of the one row the INSERT of `result` added (a table with an integer `id`)."""
    key = result.inserted_primary_key
    if key is None:
        raise StoreError("the database did not return the key of an inserted row")
    return int(key[0])
