"""The errors of the state database (defined in `codesearch.errors`, with every public error).

    CodesearchError
    └── StoreError            the database cannot be used (unreachable, locked too long, bad file)
        ├── NotFound          a connection, repo, job, user or API key does not exist (404)
        ├── Conflict          a uniqueness or state rule would be broken (409)
        └── SchemaTooNew      the database was migrated by a newer codesearch than this one

Messages say what and which name or id; they never contain secrets, key hashes or SQL
parameters.
"""

from __future__ import annotations

from codesearch.errors import Conflict, NotFound, SchemaTooNew, StoreError

__all__ = ["Conflict", "NotFound", "SchemaTooNew", "StoreError"]
