"""The errors codesearch raises, one small hierarchy for every layer.

    CodesearchError                 anything codesearch raises on purpose
    ├── QueryError                  the query cannot be run as written (HTTP 400)
    │   └── QueryParseError         FAILED_TO_PARSE_QUERY; carries the position and the reason
    ├── SearchContextNotFound       `context:` names no known context (HTTP 404)
    ├── IndexFormatError            a shard file is not a shard, or is truncated or corrupt
    └── IndexBuildError             a source could not be read into shards

Each error says what is wrong and where (a query position, a file path, a section name), so
that the HTTP layer can show the message as it is and a command-line user can act on it. No
error message ever contains a stack trace, a token or file contents beyond the offending part.
"""

from __future__ import annotations


class CodesearchError(Exception):
    """Base class of every error codesearch raises on purpose."""

    #: The `errorCode` of SPEC §5 this error maps to in the HTTP API.
    error_code = "UNEXPECTED_ERROR"
    #: The HTTP status that goes with `error_code`.
    status_code = 500


class QueryError(CodesearchError):
    """The query cannot be run as written."""

    error_code = "FAILED_TO_PARSE_QUERY"
    status_code = 400


class QueryParseError(QueryError):
    """A query that does not parse: `position` is the 0-based character offset of the problem."""

    def __init__(self, reason: str, query: str, position: int):
        self.reason = reason
        self.query = query
        self.position = position
        super().__init__(f"{reason} (at character {position + 1} of {query!r})")


class SearchContextNotFound(CodesearchError):
    """`context:<name>` names a search context that does not exist."""

    error_code = "SEARCH_CONTEXT_NOT_FOUND"
    status_code = 404

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"search context {name!r} not found")


class IndexFormatError(CodesearchError):
    """A shard file is not a codesearch shard, or is truncated, corrupt or of another version."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class IndexBuildError(CodesearchError):
    """A source (directory or git repository) could not be read into shards."""
