"""The environment variables Sourcebot documents that apply to codesearch, read in one place.

A deployment moving from Sourcebot keeps its environment: each variable here has Sourcebot's
name, meaning and default (adapted where our layout differs, as said below). Variables that
belong to one module stay there (`SOURCEBOT_ENCRYPTION_KEY` and `AUTH_SECRET` in
`codesearch.store.secret`, `FORCE_ENABLE_ANONYMOUS_ACCESS` in `codesearch.service.auth`); this
module holds the ones several layers read.

=================================================  ===========================================
``DATA_CACHE_DIR``                                 the directory everything we write lives in
                                                   (state database, secret, mirrors, index);
                                                   default ``$DATA_DIR/.codesearch``
``DATA_DIR``                                       the persistent volume; without it and
                                                   without ``DATA_CACHE_DIR`` the data
                                                   directory is ``~/.codesearch``
``AUTH_SESSION_MAX_AGE_SECONDS``                   how long a web sign-in lasts (2592000, 30 days)
``DISABLE_API_KEY_CREATION_FOR_NON_OWNER_USERS``   ``true``: only owners may create API keys
                                                   (the deprecated
                                                   ``EXPERIMENT_DISABLE_API_KEY_CREATION_FOR_NON_ADMIN_USERS``
                                                   too)
``DISABLE_API_KEY_USAGE_FOR_NON_OWNER_USERS``      ``true``: only owners may create *or use* API
                                                   keys (a member's key is refused with 403)
``SOURCEBOT_LOG_LEVEL``                            ``debug``, ``info`` (default), ``warn``, ``error``
``SOURCEBOT_STRUCTURED_LOGGING_ENABLED``           ``true``: logs as JSON lines on stdout
``SOURCEBOT_STRUCTURED_LOGGING_FILE``              with it, a file that gets the same lines too
``DATABASE_URL``                                   the state database (default: SQLite in the data
                                                   directory); or Sourcebot's ``DATABASE_HOST``,
                                                   ``DATABASE_USERNAME``, ``DATABASE_PASSWORD``,
                                                   ``DATABASE_NAME``, ``DATABASE_ARGS``
``AUDIT_RETENTION_DAYS``                           days the audit log keeps events (180; 0:
                                                   forever); or Sourcebot's
                                                   ``SOURCEBOT_EE_AUDIT_RETENTION_DAYS``
``SOURCEBOT_EE_AUDIT_LOGGING_ENABLED``             ``false``: no audit event is recorded and none
                                                   pruned (default ``true``)
``AUTH_URL``                                       the public base URL of the service (also the
                                                   OAuth issuer of the MCP server)
``CODESEARCH_OAUTH_ACCESS_TOKEN_TTL_SECONDS``      lifetime of an OAuth access token (3600, 1 h)
``CODESEARCH_OAUTH_REFRESH_TOKEN_TTL_SECONDS``     lifetime of an OAuth refresh token (7776000,
                                                   90 days; each refresh gives a new one)
``CODESEARCH_OAUTH_CODE_TTL_SECONDS``              lifetime of an OAuth authorization code
                                                   (600, 10 minutes)
``CODESEARCH_OAUTH_PENDING_CLIENT_TTL_SECONDS``    how long a registered OAuth client that never
                                                   completed an authorization is kept (86400, 1 day)
``CODESEARCH_OAUTH_MAX_PENDING_CLIENTS``           the most such clients kept at once (1000; past
                                                   it the oldest is removed)
``CODESEARCH_OAUTH_REGISTRATIONS_PER_ADDRESS``     client registrations one address may make
                                                   before it must pause an hour (20)
``ALWAYS_INDEX_FILE_PATTERNS``                     comma-separated globs indexed despite the
                                                   size and trigram limits (``!`` negates)
``CODESEARCH_MAX_INDEXED_REVISIONS``               the most revisions (branches and tags)
                                                   indexed per repository (64, Sourcebot's
                                                   cap; 1 to 4096)
=================================================  ===========================================

Why `DATA_DIR` alone no longer is the data directory: Sourcebot keeps its data in
``$DATA_DIR/.sourcebot`` and lets ``DATA_CACHE_DIR`` move it; we do the same with
``.codesearch``. A ``DATA_DIR`` that already *is* a codesearch data directory (an older release
used it directly: it holds ``codesearch.db`` or ``.secret``) keeps being used, so no stored data
goes missing on upgrade.

Switches are on only for ``true`` (any case, surrounding blanks ignored), like
``FORCE_ENABLE_ANONYMOUS_ACCESS``; the one that is on by default,
``SOURCEBOT_EE_AUDIT_LOGGING_ENABLED``, takes only ``true`` or ``false``. A value that cannot
mean anything (a session age of ``abc``, a log level of ``verbose``) is an
`InvalidEnvironmentVariable` naming the variable,
the value and what would be accepted: the service refuses to start rather than guess.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from codesearch import defaults
from codesearch.errors import InvalidEnvironmentVariable  # noqa: F401  (re-exported: defined with every public error)
from codesearch.globs import PatternList

DATA_DIR = "DATA_DIR"
DATA_CACHE_DIR = "DATA_CACHE_DIR"
DATA_SUBDIR = ".codesearch"
#: files that mark a directory as a codesearch data directory (see the module docstring)
_DATA_MARKERS = ("codesearch.db", ".secret")

SESSION_MAX_AGE = "AUTH_SESSION_MAX_AGE_SECONDS"
DEFAULT_SESSION_MAX_AGE_S = 2_592_000  # 30 days, Sourcebot's default
KEY_CREATION_OWNER_ONLY = "DISABLE_API_KEY_CREATION_FOR_NON_OWNER_USERS"
KEY_CREATION_OWNER_ONLY_DEPRECATED = "EXPERIMENT_DISABLE_API_KEY_CREATION_FOR_NON_ADMIN_USERS"
KEY_USAGE_OWNER_ONLY = "DISABLE_API_KEY_USAGE_FOR_NON_OWNER_USERS"
REQUIRE_APPROVAL = "REQUIRE_APPROVAL_NEW_MEMBERS"
LOG_LEVEL = "SOURCEBOT_LOG_LEVEL"
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def _value(environ: Mapping[str, str] | None, name: str) -> str:
    return (_env(environ).get(name) or "").strip()


def is_true(environ: Mapping[str, str] | None, name: str) -> bool:
    """Whether switch `name` is on (``true``, any case)."""
    return _value(environ, name).lower() == "true"


# ---------------------------------------------------------------------- where the data lives


def data_dir(environ: Mapping[str, str] | None = None) -> str:
    """The data directory (absolute): ``DATA_CACHE_DIR``, else ``$DATA_DIR/.codesearch`` (or
    ``$DATA_DIR`` itself when an older release kept its data there), else ``~/.codesearch``."""
    cache = _value(environ, DATA_CACHE_DIR)
    if cache:
        return os.path.abspath(os.path.expanduser(cache))
    base = _value(environ, DATA_DIR)
    if not base:
        return os.path.join(os.path.expanduser("~"), DATA_SUBDIR)
    base = os.path.abspath(os.path.expanduser(base))
    if any(os.path.exists(os.path.join(base, marker)) for marker in _DATA_MARKERS):
        return base
    return os.path.join(base, DATA_SUBDIR)


# ---------------------------------------------------------------------- indexing

ALWAYS_INDEX = "ALWAYS_INDEX_FILE_PATTERNS"


def always_index_patterns(environ: Mapping[str, str] | None = None) -> PatternList:
    """``ALWAYS_INDEX_FILE_PATTERNS`` as a `PatternList` (empty when unset): what the ``index``
    and ``sync`` commands and the index workers pass as `IndexSettings.always_index`."""
    return PatternList.from_env(_value(environ, ALWAYS_INDEX))


MAX_INDEXED_REVISIONS = "CODESEARCH_MAX_INDEXED_REVISIONS"


def max_indexed_revisions(environ: Mapping[str, str] | None = None) -> int:
    """``CODESEARCH_MAX_INDEXED_REVISIONS``: the most revisions indexed per repository (default
    64, Sourcebot's fixed cap; at most ``MAX_INDEXED_REVISIONS_LIMIT``): what the ``index`` and
    ``sync`` commands and the index workers pass as `IndexSettings.max_revisions`. More cost
    index size and query time (docs/index-format.md#branch-masks)."""
    raw = _value(environ, MAX_INDEXED_REVISIONS)
    if not raw:
        return defaults.MAX_INDEXED_REVISIONS
    top = defaults.MAX_INDEXED_REVISIONS_LIMIT
    if not raw.isdigit() or not 1 <= int(raw) <= top:
        raise InvalidEnvironmentVariable(
            MAX_INDEXED_REVISIONS,
            raw,
            f"give a whole number of revisions per repository from 1 to {top} "
            f"(default {defaults.MAX_INDEXED_REVISIONS}, Sourcebot's cap)",
        )
    return int(raw)


def seconds(environ: Mapping[str, str] | None, name: str, default: float, *, zero_allowed: bool) -> float:
    """A duration in seconds from the environment variable `name` (`default` when unset or empty):
    a finite number, above zero, or zero or more when `zero_allowed`; anything else is an
    `InvalidEnvironmentVariable` naming the variable."""
    raw = _value(environ, name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    above_floor = value >= 0 if zero_allowed else value > 0  # (False for NaN)
    if not above_floor or value == float("inf"):
        expected = "a number of seconds, 0 or more" if zero_allowed else "a positive number of seconds"
        raise InvalidEnvironmentVariable(name, raw, f"expected {expected}")
    return value


# ---------------------------------------------------------------------- accounts and keys


def session_max_age_seconds(environ: Mapping[str, str] | None = None) -> int:
    """``AUTH_SESSION_MAX_AGE_SECONDS``: seconds a web sign-in lasts (default 30 days)."""
    raw = _value(environ, SESSION_MAX_AGE)
    if not raw:
        return DEFAULT_SESSION_MAX_AGE_S
    try:
        seconds = int(raw)
    except ValueError:
        seconds = 0
    if seconds < 1:
        raise InvalidEnvironmentVariable(
            SESSION_MAX_AGE,
            raw,
            "give the session lifetime as a whole number of "
            f"seconds, at least 1 (default {DEFAULT_SESSION_MAX_AGE_S}, 30 days)",
        )
    return seconds


def api_key_usage_owner_only(environ: Mapping[str, str] | None = None) -> bool:
    """Only owners may use (and create) API keys."""
    return is_true(environ, KEY_USAGE_OWNER_ONLY)


def api_key_creation_owner_only(environ: Mapping[str, str] | None = None) -> bool:
    """Only owners may create API keys (also implied by `api_key_usage_owner_only`)."""
    return (
        is_true(environ, KEY_CREATION_OWNER_ONLY)
        or is_true(environ, KEY_CREATION_OWNER_ONLY_DEPRECATED)
        or api_key_usage_owner_only(environ)
    )


def require_approval_new_members(environ: Mapping[str, str] | None = None) -> bool:
    """New users who sign up by themselves wait for an owner's approval (Sourcebot's switch)."""
    return is_true(environ, REQUIRE_APPROVAL)


# ---------------------------------------------------------------------- logging


def log_level(environ: Mapping[str, str] | None = None) -> int:
    """``SOURCEBOT_LOG_LEVEL`` as a `logging` level (default info)."""
    raw = _value(environ, LOG_LEVEL)
    if not raw:
        return logging.INFO
    level = LOG_LEVELS.get(raw.lower())
    if level is None:
        raise InvalidEnvironmentVariable(LOG_LEVEL, raw, "use one of debug, info, warn, error")
    return level


STRUCTURED_LOGGING = "SOURCEBOT_STRUCTURED_LOGGING_ENABLED"
STRUCTURED_LOGGING_FILE = "SOURCEBOT_STRUCTURED_LOGGING_FILE"
#: Python's level names as Sourcebot (and ``SOURCEBOT_LOG_LEVEL``) spell them.
_LEVEL_NAMES = {"DEBUG": "debug", "INFO": "info", "WARNING": "warn", "ERROR": "error", "CRITICAL": "error"}


def structured_logging(environ: Mapping[str, str] | None = None) -> tuple[bool, str | None]:
    """``SOURCEBOT_STRUCTURED_LOGGING_ENABLED`` (``true``: JSON lines) and, when it is on,
    ``SOURCEBOT_STRUCTURED_LOGGING_FILE`` (a file that gets the same lines too; as Sourcebot,
    ignored when structured logging is off)."""
    on = is_true(environ, STRUCTURED_LOGGING)
    return on, (_value(environ, STRUCTURED_LOGGING_FILE) or None) if on else None


class JsonLines(logging.Formatter):
    """One JSON object per line: ``timestamp`` (ISO 8601 UTC, milliseconds), ``level`` (debug,
    info, warn, error), ``logger``, ``message``, ``exception`` (the traceback, when there is one)
    and ``requestId`` (inside a request); ``service`` and ``status`` repeat the logger and the
    level under the names Sourcebot's structured logs give them (Datadog's)."""

    def format(self, record: logging.LogRecord) -> str:
        import json
        from datetime import UTC, datetime

        when = datetime.fromtimestamp(record.created, UTC)
        level = _LEVEL_NAMES.get(record.levelname, record.levelname.lower())
        out: dict[str, object] = {
            "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z",
            "level": level,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        rid = getattr(record, "request_id", None)
        if rid and rid != "-":
            out["requestId"] = rid
        out["service"], out["status"] = record.name, level
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(environ: Mapping[str, str] | None = None) -> int:
    """Set the level of codesearch's loggers from ``SOURCEBOT_LOG_LEVEL`` and give the process a
    handler when it has none: plain lines on stderr, or with ``SOURCEBOT_STRUCTURED_LOGGING_ENABLED``
    JSON lines (`JsonLines`) on stdout and in ``SOURCEBOT_STRUCTURED_LOGGING_FILE`` (appended) when
    set. Returns the level. Other libraries stay at warnings."""
    import sys

    level = log_level(environ)
    structured, path = structured_logging(environ)
    root = logging.getLogger()
    if not structured:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    elif not any(isinstance(h.formatter, JsonLines) for h in root.handlers):
        handlers: list[logging.Handler] = [logging.StreamHandler(sys.stdout)]
        if path:
            try:
                handlers.append(logging.FileHandler(path, encoding="utf-8"))
            except OSError as e:
                raise InvalidEnvironmentVariable(
                    STRUCTURED_LOGGING_FILE, path, f"cannot be opened for appending ({e.strerror})"
                ) from None
        for h in handlers:
            h.setFormatter(JsonLines())
            root.addHandler(h)
        if root.level == logging.NOTSET or root.level > logging.WARNING:
            root.setLevel(logging.WARNING)
    logging.getLogger("codesearch").setLevel(level)
    return level


AUDIT_RETENTION_ENV = "AUDIT_RETENTION_DAYS"
SOURCEBOT_AUDIT_RETENTION_ENV = "SOURCEBOT_EE_AUDIT_RETENTION_DAYS"
#: Sourcebot's default: a team moving from it keeps the history it expects (an older codesearch
#: kept 90 days; keeping longer loses nothing).
DEFAULT_AUDIT_RETENTION_DAYS = 180


def audit_retention_days(environ: Mapping[str, str] | None = None) -> int:
    """How many days the audit log keeps events, a whole number, 0 or more (0: forever, nothing
    is pruned; default 180): ``AUDIT_RETENTION_DAYS``, else Sourcebot's
    ``SOURCEBOT_EE_AUDIT_RETENTION_DAYS`` (same meaning and default). Both are checked."""
    days = DEFAULT_AUDIT_RETENTION_DAYS
    for name in (SOURCEBOT_AUDIT_RETENTION_ENV, AUDIT_RETENTION_ENV):  # ours last: it wins
        raw = _value(environ, name)
        if not raw:
            continue
        if not raw.isdigit():
            raise InvalidEnvironmentVariable(name, raw, "expected a whole number of days, 0 or more (0: keep forever)")
        days = int(raw)
    return days


AUDIT_LOGGING_ENV = "SOURCEBOT_EE_AUDIT_LOGGING_ENABLED"


def audit_logging_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """``SOURCEBOT_EE_AUDIT_LOGGING_ENABLED``: whether audit events are recorded (default ``true``).
    ``false`` records nothing, from the service or the command line, and, as Sourcebot, prunes
    nothing either: the events already kept stay readable as they are. Unlike the other switches
    this one is on by default, so a value that is neither ``true`` nor ``false`` (any case) is
    refused rather than read as off: a typo must not silently stop the audit trail."""
    raw = _value(environ, AUDIT_LOGGING_ENV)
    if not raw:
        return True
    if raw.lower() not in ("true", "false"):
        raise InvalidEnvironmentVariable(
            AUDIT_LOGGING_ENV, raw, "use true (the default: audit events are recorded) or false (none are)"
        )
    return raw.lower() == "true"


# ---------------------------------------------------------------------- the state database

DATABASE_URL = "DATABASE_URL"
#: Sourcebot's split database variables: host (``host`` or ``host:port``), user, password, name,
#: and ``DATABASE_ARGS``, the URL's query (``sslmode=require&schema=x``).
DATABASE_PARTS = ("DATABASE_HOST", "DATABASE_USERNAME", "DATABASE_PASSWORD", "DATABASE_NAME")
DATABASE_ARGS = "DATABASE_ARGS"


def database_url(environ: Mapping[str, str] | None = None) -> str | None:
    """The state database's URL: ``DATABASE_URL``, else the one Sourcebot builds from its split
    variables, ``postgresql://USERNAME:PASSWORD@HOST/NAME[?ARGS]`` (each value as it is written,
    as Sourcebot does: percent-encode reserved characters of a password), else None (SQLite in the
    data directory). Some but not all of the four split variables is an
    `InvalidEnvironmentVariable` naming the first one missing (never a value): the service would
    otherwise start on an empty SQLite database."""
    url = _value(environ, DATABASE_URL)
    if url:
        return url
    parts = {name: _value(environ, name) for name in DATABASE_PARTS}
    if not any(parts.values()):
        return None
    missing = [name for name, v in parts.items() if not v]
    if missing:
        given = ", ".join(name for name, v in parts.items() if v)
        raise InvalidEnvironmentVariable(
            missing[0], "", f"{given} set: set {', '.join(missing)} too, or DATABASE_URL instead"
        )
    host, user, password, name = (parts[n] for n in DATABASE_PARTS)
    args = _value(environ, DATABASE_ARGS).lstrip("?")
    return f"postgresql://{user}:{password}@{host}/{name}" + (f"?{args}" if args else "")


# ---------------------------------------------------------------------- OAuth for MCP clients

AUTH_URL = "AUTH_URL"
OAUTH_ACCESS_TTL = "CODESEARCH_OAUTH_ACCESS_TOKEN_TTL_SECONDS"
OAUTH_REFRESH_TTL = "CODESEARCH_OAUTH_REFRESH_TOKEN_TTL_SECONDS"
OAUTH_CODE_TTL = "CODESEARCH_OAUTH_CODE_TTL_SECONDS"
DEFAULT_OAUTH_ACCESS_TTL_S = 3600  # 1 hour
DEFAULT_OAUTH_REFRESH_TTL_S = 7_776_000  # 90 days
DEFAULT_OAUTH_CODE_TTL_S = 600  # 10 minutes
OAUTH_PENDING_CLIENT_TTL = "CODESEARCH_OAUTH_PENDING_CLIENT_TTL_SECONDS"
OAUTH_MAX_PENDING_CLIENTS = "CODESEARCH_OAUTH_MAX_PENDING_CLIENTS"
OAUTH_REGISTRATIONS_PER_ADDRESS = "CODESEARCH_OAUTH_REGISTRATIONS_PER_ADDRESS"
DEFAULT_OAUTH_PENDING_CLIENT_TTL_S = 86_400  # 1 day
DEFAULT_OAUTH_MAX_PENDING_CLIENTS = 1000
DEFAULT_OAUTH_REGISTRATIONS_PER_ADDRESS = 20


def auth_url(environ: Mapping[str, str] | None = None) -> str | None:
    """``AUTH_URL`` without a trailing slash, or None when unset: the public base URL, which the
    OAuth server of the MCP endpoint uses as its issuer (else each request's own base URL)."""
    raw = _value(environ, AUTH_URL).rstrip("/")
    if not raw:
        return None
    if not raw.lower().startswith(("http://", "https://")) or "#" in raw or "?" in raw:
        raise InvalidEnvironmentVariable(
            AUTH_URL,
            raw,
            "give the public base URL, e.g. https://search.example.com (http or https, no query or fragment)",
        )
    return raw


def _seconds(environ: Mapping[str, str] | None, name: str, default: int, what: str, unit: str = "seconds") -> int:
    raw = _value(environ, name)
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise InvalidEnvironmentVariable(
            name, raw, f"give the {what} as a whole number of {unit}, at least 1 (default {default})"
        )
    return int(raw)


def oauth_access_token_ttl_seconds(environ: Mapping[str, str] | None = None) -> int:
    """``CODESEARCH_OAUTH_ACCESS_TOKEN_TTL_SECONDS`` (default 3600)."""
    return _seconds(environ, OAUTH_ACCESS_TTL, DEFAULT_OAUTH_ACCESS_TTL_S, "OAuth access token lifetime")


def oauth_refresh_token_ttl_seconds(environ: Mapping[str, str] | None = None) -> int:
    """``CODESEARCH_OAUTH_REFRESH_TOKEN_TTL_SECONDS`` (default 7776000, 90 days)."""
    return _seconds(environ, OAUTH_REFRESH_TTL, DEFAULT_OAUTH_REFRESH_TTL_S, "OAuth refresh token lifetime")


def oauth_code_ttl_seconds(environ: Mapping[str, str] | None = None) -> int:
    """``CODESEARCH_OAUTH_CODE_TTL_SECONDS`` (default 600)."""
    return _seconds(environ, OAUTH_CODE_TTL, DEFAULT_OAUTH_CODE_TTL_S, "OAuth authorization code lifetime")


def oauth_pending_client_ttl_seconds(environ: Mapping[str, str] | None = None) -> int:
    """``CODESEARCH_OAUTH_PENDING_CLIENT_TTL_SECONDS`` (default 86400): how long a registered client
    that never completed an authorization (no token issued yet) is kept before it is removed."""
    return _seconds(
        environ, OAUTH_PENDING_CLIENT_TTL, DEFAULT_OAUTH_PENDING_CLIENT_TTL_S, "lifetime of a pending OAuth client"
    )


def oauth_max_pending_clients(environ: Mapping[str, str] | None = None) -> int:
    """``CODESEARCH_OAUTH_MAX_PENDING_CLIENTS`` (default 1000): the most pending clients kept at once."""
    return _seconds(
        environ, OAUTH_MAX_PENDING_CLIENTS, DEFAULT_OAUTH_MAX_PENDING_CLIENTS, "most pending OAuth clients", "clients"
    )


def oauth_registrations_per_address(environ: Mapping[str, str] | None = None) -> int:
    """``CODESEARCH_OAUTH_REGISTRATIONS_PER_ADDRESS`` (default 20): client registrations one client
    address may make in a row (each less than an hour after the one before) before it must pause an hour."""
    return _seconds(
        environ,
        OAUTH_REGISTRATIONS_PER_ADDRESS,
        DEFAULT_OAUTH_REGISTRATIONS_PER_ADDRESS,
        "OAuth client registrations per address",
        "registrations",
    )


def check(environ: Mapping[str, str] | None = None) -> None:
    """Raise `InvalidEnvironmentVariable` for the first variable of this module with a bad value
    (what `codesearch serve` calls before starting anything)."""
    log_level(environ)
    structured_logging(environ)
    database_url(environ)
    session_max_age_seconds(environ)
    audit_retention_days(environ)
    audit_logging_enabled(environ)
    auth_url(environ)
    oauth_access_token_ttl_seconds(environ)
    oauth_refresh_token_ttl_seconds(environ)
    oauth_code_ttl_seconds(environ)
    oauth_pending_client_ttl_seconds(environ)
    oauth_max_pending_clients(environ)
    oauth_registrations_per_address(environ)
    max_indexed_revisions(environ)
