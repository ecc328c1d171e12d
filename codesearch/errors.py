"""The errors codesearch raises, one small hierarchy for every layer.

    CodesearchError                 anything codesearch raises on purpose
    ├── QueryError                  the query cannot be run as written (HTTP 400)
    │   └── QueryParseError         FAILED_TO_PARSE_QUERY; carries the position and the reason
    ├── SearchContextNotFound       `context:` names no known context (HTTP 404)
    ├── IndexFormatError            a shard file is not a shard, or is truncated or corrupt
    ├── IndexBuildError             a source could not be read into shards
    │   └── DiskFull                a file of the index could not be written: its disk is full
    ├── ConfigError                 a config file is unreadable or invalid (all problems at once)
    ├── HostError                   a code host's API failed (unreachable, bad answer)
    │   ├── HostAuthError           401/403: bad or missing credentials
    │   └── HostNotFound            404: an org, user, group or repo does not exist or is not visible
    ├── GitError                    a git operation failed (clone, fetch, missing ref, corrupt clone)
    │   └── GitFailed               a git command failed or timed out (its scrubbed stderr, exit status)
    ├── RepositoryNotFound          REPOSITORY_NOT_FOUND: no such repo, not visible, or not cloned yet (404)
    ├── FileNotFound                FILE_NOT_FOUND: a bad path, or nothing (or not a file/directory) there (404)
    ├── InvalidGitRef               INVALID_GIT_REF: a malformed ref, or one naming no commit (400)
    │   └── MalformedGitRef         a ref outside the accepted forms (also 400 on the pages, not 404)
    ├── NotAuthenticated            NOT_AUTHENTICATED: no valid API key and anonymous access off (401)
    ├── InvalidArgument             INVALID_ARGUMENT: a bad parameter value (a date, a regex, a page) (400)
    ├── InvalidRequestBody          INVALID_REQUEST_BODY: a body that is not UTF-8, not JSON, or not the
    │                               fields a route expects (400)
    ├── ServiceUnavailable          SERVICE_UNAVAILABLE: the service is starting or stopping (503, with
    │                               a ``Retry-After``)
    ├── GitBusy                     TOO_MANY_REQUESTS: too many repository reads at once from one caller
    │                               (429), or SERVICE_UNAVAILABLE from all callers (503); ``Retry-After``
    ├── InsufficientPermissions     INSUFFICIENT_PERMISSIONS: the caller may not do this (403)
    │   └── NotAnOwner              only an owner may (the audit log, members, settings)
    ├── ToolInputError              INVALID_REQUEST_BODY: a tool or chat argument that makes no sense (400)
    │   └── ChatNotFound            NOT_FOUND: no such chat, or not one the caller may see (404)
    ├── InvalidEnvironmentVariable  an environment variable holds a value that cannot be used
    ├── ModelError                  MODEL_ERROR: a language model could not be used (502; the message is shown)
    └── StoreError                  the state database cannot be used (unreachable, locked too long, bad file)
        ├── NotFound                NOT_FOUND (or REPOSITORY_NOT_FOUND): no such connection, repo, job,
        │                           user or API key (404)
        ├── Conflict                CONFLICT: a uniqueness or state rule would be broken (409)
        └── SchemaTooNew            the database was migrated by a newer codesearch than this one

Each error says what is wrong and where (a query position, a file path, a section name), so
that the HTTP layer can show the message as it is and a command-line user can act on it. No
error message ever contains a stack trace, a token or file contents beyond the offending part.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from codesearch.plurals import plural


class CodesearchError(Exception):
    """Base class of every error codesearch raises on purpose."""

    #: The `errorCode` (docs/http-api.md#errors) this error maps to in the HTTP API.
    error_code = "UNEXPECTED_ERROR"
    #: The HTTP status that goes with `error_code`.
    status_code = 500


#: What `__reduce__` returns: the class and the arguments that rebuild an error from its fields.
Reduced = tuple[type[CodesearchError], tuple[object, ...]]


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

    def __reduce__(self) -> Reduced:  # rebuilt from its fields when it crosses a process boundary (Ray)
        return (type(self), (self.reason, self.query, self.position))


class SearchContextNotFound(CodesearchError):
    """`context:<name>` names a search context that does not exist."""

    error_code = "SEARCH_CONTEXT_NOT_FOUND"
    status_code = 404

    def __init__(self, name: str, close: tuple[str, ...] | list[str] = ()):
        self.name = name
        self.close = tuple(close)
        message = f"search context {name!r} not found"
        if self.close:
            message += "; did you mean " + " or ".join(repr(c) for c in self.close) + "?"
        super().__init__(message)

    def __reduce__(self) -> Reduced:
        return (type(self), (self.name, self.close))


class IndexFormatError(CodesearchError):
    """A shard file is not a codesearch shard, or is truncated, corrupt or of another version."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")

    def __reduce__(self) -> Reduced:
        return (type(self), (self.path, self.reason))


class IndexBuildError(CodesearchError):
    """A source (directory or git repository) could not be read into shards."""


class DiskFull(IndexBuildError):
    """A file of the index (a shard, the manifest) could not be written because its disk is full
    (or its quota spent). `path` is the file, `what` the write that failed. Nothing the index held
    before is lost: shards and the manifest are written to temporary files that are renamed into
    place only once complete, and the temporary file is removed. The job workers retry such a job
    later without counting it as a failed attempt (`is_disk_full`)."""

    def __init__(self, path: str, what: str):
        self.path = path
        self.what = what
        super().__init__(f"{path}: {what} failed: no space left on the device (free space; the work resumes by itself)")

    def __reduce__(self) -> Reduced:
        return (type(self), (self.path, self.what))


#: How a full disk reads in messages that only carry text (git's stderr, SQLite's errors).
_DISK_FULL_TEXT = ("no space left on device", "database or disk is full", "disk quota exceeded")


def is_disk_full(error: BaseException | None) -> bool:
    """Whether `error` (or an error it was raised from) says a disk is full: a `DiskFull`, an
    `OSError` with ``ENOSPC`` or ``EDQUOT``, or a message that says so (git's stderr, SQLite)."""
    import errno

    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, DiskFull):
            return True
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(t in str(error).lower() for t in _DISK_FULL_TEXT):
            return True
        error = error.__cause__ or error.__context__
    return False


class ConfigError(CodesearchError):
    """A config file cannot be used. `problems` lists every problem as "json.path: what is wrong"."""

    error_code = "INVALID_CONFIG"
    status_code = 400

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{source}: {plural(len(self.problems), 'problem')}:\n{lines}")

    def __reduce__(self) -> Reduced:
        return (type(self), (self.source, self.problems))


class HostError(CodesearchError):
    """A code host's API could not be used. Messages never contain tokens."""

    def __init__(self, message: str, url: str = "", status: int | None = None):
        self.url = url
        self.status = status
        super().__init__(message)

    def __reduce__(self) -> Reduced:
        return (type(self), (self.args[0], self.url, self.status))


class HostAuthError(HostError):
    """The host refused our credentials (401/403 that is not a rate limit)."""


class HostNotFound(HostError):
    """The host says the named org/user/group/project/repo does not exist (or is not visible)."""


class GitError(CodesearchError):
    """A git operation failed; the message says which repository and why (never a token)."""


class RepositoryNotFound(CodesearchError):
    """A repository that does not exist, is not visible to the caller, or has no clone yet."""

    error_code = "REPOSITORY_NOT_FOUND"
    status_code = 404


class FileNotFound(CodesearchError):
    """A path that is malformed (absolute, ``..``, NUL, …) or names nothing usable at a ref."""

    error_code = "FILE_NOT_FOUND"
    status_code = 404


class InvalidGitRef(CodesearchError):
    """A ref that could be an option or a revision expression, or that names no commit."""

    error_code = "INVALID_GIT_REF"
    status_code = 400


class MalformedGitRef(InvalidGitRef):
    """A ref outside the forms `codesearch.git.paths.parse_ref` accepts: the caller's mistake
    whatever the repository holds, so a page answers 400 (a ref that names nothing is a 404
    page, as a missing file is); the API answers INVALID_GIT_REF for both."""


class NotAuthenticated(CodesearchError):
    """No valid credentials, and anonymous access is off."""

    error_code = "NOT_AUTHENTICATED"
    status_code = 401


class InvalidArgument(CodesearchError):
    """A parameter value that cannot be used (a date, a regular expression, a page number); the
    message says what a valid value looks like."""

    error_code = "INVALID_ARGUMENT"
    status_code = 400


class InvalidRequestBody(CodesearchError):
    """A request body that cannot be read: not UTF-8, not JSON, or a known field with a wrong
    type or value; the message names the field."""

    error_code = "INVALID_REQUEST_BODY"
    status_code = 400


class ServiceUnavailable(CodesearchError):
    """The service cannot answer yet (its searchers are still starting) or any more (it is
    stopping); the client should try again after `retry_after` seconds."""

    error_code = "SERVICE_UNAVAILABLE"
    status_code = 503
    expose = True
    retry_after = 2

    def __init__(self, message: str, retry_after: int = 2):
        super().__init__(message)
        self.retry_after = retry_after


class GitBusy(CodesearchError):
    """Too many repository reads at once (`codesearch.git.slots`): 429 ``TOO_MANY_REQUESTS``
    when the caller's own limit was reached, 503 ``SERVICE_UNAVAILABLE`` when the whole process's
    was; either way the client should try again after `retry_after` seconds."""

    error_code = "TOO_MANY_REQUESTS"
    status_code = 429
    expose = True
    retry_after = 5

    def __init__(self, message: str, retry_after: int = 5, status_code: int = 429):
        super().__init__(message)
        self.retry_after = retry_after
        self.status_code = status_code
        self.error_code = "TOO_MANY_REQUESTS" if status_code == 429 else "SERVICE_UNAVAILABLE"

    def __reduce__(self) -> Reduced:
        return (type(self), (self.args[0], self.retry_after, self.status_code))


class GitFailed(GitError):
    """A git command failed or timed out. `stderr` is what git wrote, already scrubbed;
    `command` the git subcommand (``log``, ``fetch`` …); `returncode` None after a timeout."""

    def __init__(
        self,
        message: str,
        *,
        command: str = "",
        returncode: int | None = None,
        stderr: str = "",
        timed_out: bool = False,
    ):
        self.command = command
        self.returncode = returncode
        self.stderr = stderr
        self.timed_out = timed_out
        super().__init__(message)

    def __reduce__(
        self,
    ) -> tuple[
        Callable[..., GitFailed], tuple[object, ...]
    ]:  # rebuilt from its fields when it crosses a process boundary (Ray)
        return (_rebuild, (type(self), self.args[0], self.command, self.returncode, self.stderr, self.timed_out))


def _rebuild(
    cls: type[GitFailed], message: str, command: str, returncode: int | None, stderr: str, timed_out: bool
) -> GitFailed:
    return cls(message, command=command, returncode=returncode, stderr=stderr, timed_out=timed_out)


class InvalidEnvironmentVariable(CodesearchError):
    """An environment variable holds a value that cannot be used (the message says which and why)."""

    def __init__(self, name: str, value: str, expected: str):
        self.name = name
        self.value = value
        self.expected = expected
        super().__init__(f"environment variable {name}={value!r}: {expected}")

    def __reduce__(self) -> Reduced:  # rebuilt from its fields when it crosses a process boundary (Ray)
        return (type(self), (self.name, self.value, self.expected))


class ModelError(CodesearchError):
    """A language model could not be used: the message names the model and says why (never a token)."""

    error_code = "MODEL_ERROR"
    status_code = 502
    #: the message is written for clients (the HTTP API shows it despite the 5xx status)
    expose = True

    #: set on a chat question that failed (`codesearch.tools.ask_chat.run`): the stored `Chat`
    #: and the turn the failure was stored as (absent otherwise)
    chat: Any
    turn: int

    def __init__(self, message: str, model: str = "", status: int | None = None):
        self.model = model
        self.status = status
        super().__init__(message)

    def __reduce__(
        self,
    ) -> tuple[
        type[ModelError], tuple[str, str, int | None]
    ]:  # rebuilt from its fields when it crosses a process boundary (Ray)
        return (type(self), (self.args[0], self.model, self.status))


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


class InsufficientPermissions(CodesearchError):
    """The caller is known but may not do this (an owner's page or route, another user's chat) (403)."""

    error_code = "INSUFFICIENT_PERMISSIONS"
    status_code = 403


class NotAnOwner(InsufficientPermissions):
    """Only an owner may do this (the audit log, the members, the settings)."""


class ToolInputError(CodesearchError):
    """A tool argument (MCP, the ask agent, a chat request) that is valid JSON but makes no sense: the
    message says what to change (400)."""

    error_code = "INVALID_REQUEST_BODY"
    status_code = 400


class ChatNotFound(ToolInputError):
    """A chat that does not exist, or that the caller may not see or continue (404)."""

    error_code = "NOT_FOUND"
    status_code = 404


def error_from_payload(payload: dict[str, Any]) -> CodesearchError:
    """The exception an HTTP error body (``{statusCode, errorCode, message}``, docs/http-api.md#errors) stands
    for, so that a client over HTTP raises what the engine raises in-process."""
    code = str(payload.get("errorCode") or "UNEXPECTED_ERROR")
    message = str(payload.get("message") or code)
    cls = _BY_CODE.get(code, CodesearchError)
    err = cls.__new__(cls)
    Exception.__init__(err, message)  # the message as the server wrote it (custom __init__s skipped)
    if cls is CodesearchError:
        err.error_code = code
        err.status_code = int(payload.get("statusCode") or 500)
    return err


_BY_CODE: dict[str, type[CodesearchError]] = {
    "FAILED_TO_PARSE_QUERY": QueryError,
    "SEARCH_CONTEXT_NOT_FOUND": SearchContextNotFound,
    "REPOSITORY_NOT_FOUND": RepositoryNotFound,
    "FILE_NOT_FOUND": FileNotFound,
    "INVALID_GIT_REF": InvalidGitRef,
    "INVALID_ARGUMENT": InvalidArgument,
    "INVALID_REQUEST_BODY": InvalidRequestBody,
    "NOT_AUTHENTICATED": NotAuthenticated,
    "SERVICE_UNAVAILABLE": ServiceUnavailable,
    "TOO_MANY_REQUESTS": GitBusy,
    "INSUFFICIENT_PERMISSIONS": InsufficientPermissions,
}
