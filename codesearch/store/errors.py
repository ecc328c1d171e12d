"""The errors of the state database.

    CodesearchError
    └── StoreError            the database cannot be used (unreachable, locked too long, bad file)
        ├── NotFound          a connection, repo, job, user or API key does not exist (404)
        ├── Conflict          a uniqueness or state rule would be broken (409)
        └── SchemaTooNew      the database was migrated by a newer codesearch than this one

Messages say what and which name or id; they never contain secrets, key hashes or SQL
parameters.
"""

from __future__ import annotations

from codesearch.errors import CodesearchError


class StoreError(CodesearchError):
    """The state database could not do what was asked."""


class NotFound(StoreError):
    """`kind` (connection, repository, job, user, API key, ...) `key` does not exist."""

    status_code = 404
    error_code = "NOT_FOUND"

    def __init__(self, kind: str, key: object) -> None:
        self.kind = kind
        self.key = key
        if kind == "repository":
            self.error_code = "REPOSITORY_NOT_FOUND"
        super().__init__(f"{kind} {key!r} not found")


class Conflict(StoreError):
    """The change would break a uniqueness or state rule (an email already taken, the last owner)."""

    status_code = 409
    error_code = "CONFLICT"


class SchemaTooNew(StoreError):
    """The database has a schema version this codesearch does not know (it was opened by a newer one)."""

    def __init__(self, database: str, found: int, supported: int):
        self.database = database
        self.found = found
        self.supported = supported
        super().__init__(
            f"database {database} has schema version {found}, but this codesearch supports versions up to "
            f"{supported}: upgrade codesearch, or point DATABASE_URL / the data directory elsewhere"
        )
