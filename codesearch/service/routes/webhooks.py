"""Push webhooks: ``POST /api/webhooks/<connection>`` re-indexes the pushed repository at once.

A code host calls it on every push; the scheduler's periodic re-index (``reindexIntervalMs``,
an hour by default) then no longer bounds how stale the index is. The route is public, like the
hosts' own webhook endpoints: a request is trusted only when it carries the connection's secret,
checked in constant time, the way its host signs:

==========  ===========================================  =====================================
host        header                                       value
==========  ===========================================  =====================================
github      ``X-Hub-Signature-256``                      ``sha256=`` + HMAC-SHA256(secret, body)
gitea       ``X-Gitea-Signature``                        HMAC-SHA256(secret, body), hex
gitlab      ``X-Gitlab-Token``                           the secret itself
bitbucket   ``X-Hub-Signature``                          ``sha256=`` + HMAC-SHA256(secret, body)
==========  ===========================================  =====================================

The secret comes from the environment of the service, never from the config file (which stays
Sourcebot's format): ``CODESEARCH_WEBHOOK_SECRET_<CONNECTION>`` (the connection's name upper-cased,
every other character than A-Z and 0-9 as ``_``), else ``CODESEARCH_WEBHOOK_SECRET`` for every
connection. Without one, the connection accepts no webhook. Anything unsigned, wrongly signed, for
an unknown connection or for another host type is refused (and logged with the caller's
address); a push names the repository by its web URL, which is matched against the connection's
repositories, and queues a forced index job (the indexer fetches the mirror first). Pings and
other events are answered and ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from codesearch.forwarded import client_of
from codesearch.service.deps import ServicesDep, StoreDep
from codesearch.service.errors import error_response
from codesearch.store.errors import NotFound

if TYPE_CHECKING:
    from codesearch.store import Store

log = logging.getLogger(__name__)

SECRET_ENV = "CODESEARCH_WEBHOOK_SECRET"


class Scheme(NamedTuple):
    """How one host type sends webhooks."""

    header: str  # where the secret or the signature is
    prefix: str | None  # before the hex HMAC-SHA256 of the body; None: the secret itself is sent
    event_header: str  # names the event
    pushes: frozenset[str]  # the events that are pushes


HOSTS = {
    "github": Scheme("X-Hub-Signature-256", "sha256=", "X-GitHub-Event", frozenset({"push"})),
    "gitea": Scheme("X-Gitea-Signature", "", "X-Gitea-Event", frozenset({"push"})),
    "gitlab": Scheme("X-Gitlab-Token", None, "X-Gitlab-Event", frozenset({"Push Hook", "Tag Push Hook"})),
    "bitbucket": Scheme("X-Hub-Signature", "sha256=", "X-Event-Key", frozenset({"repo:push", "repo:refs_changed"})),
}


def secret_for(connection: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The webhook secret of `connection` (see the module docstring), or None."""
    environ = os.environ if environ is None else environ
    own = f"{SECRET_ENV}_{re.sub(r'[^A-Z0-9]', '_', connection.upper())}"
    return environ.get(own) or environ.get(SECRET_ENV) or None


def sign(secret: str, body: bytes) -> str:
    """HMAC-SHA256 of `body` under `secret`, hex (what GitHub, Gitea and Bitbucket send)."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verified(host_type: str, secret: str, headers: Mapping[str, str], body: bytes) -> bool:
    """True when the request carries `secret` as `host_type` presents it."""
    scheme = HOSTS[host_type]
    given = headers.get(scheme.header)
    if not given:
        return False
    expected = secret if scheme.prefix is None else scheme.prefix + sign(secret, body)
    return hmac.compare_digest(given.strip().encode(), expected.encode())


def pushed_urls(host_type: str, payload: dict[str, Any]) -> list[str]:
    """The web URLs a push payload gives for its repository (several forms, any may match)."""
    if host_type == "gitlab":
        repo = payload.get("project") or {}
        return [u for u in (repo.get("web_url"), repo.get("http_url"), repo.get("git_http_url")) if isinstance(u, str)]
    repo = payload.get("repository") or {}
    urls = [repo.get("html_url"), repo.get("clone_url"), repo.get("url")]
    links = repo.get("links") or {}
    html = links.get("html")
    if isinstance(html, dict):
        urls.append(html.get("href"))
    for link in links.get("self") or []:  # Bitbucket Data Center
        if isinstance(link, dict):
            urls.append(link.get("href"))
    return [u for u in urls if isinstance(u, str)]


def _key(url: str) -> str:
    """``host/path`` of a web or clone URL, lower-cased, without ``.git``, ``/browse`` or slashes
    at the end: the form repository names take (``github.com/acme/api``)."""
    u = re.sub(r"^[a-z][a-z0-9+.-]*://", "", url.strip().lower())
    u = re.sub(r"^[^@/]*@", "", u)  # credentials
    u = re.sub(r"(/browse)?/*$", "", u)
    return re.sub(r"\.git$", "", u)


router = APIRouter()


@router.post("/api/webhooks/{connection}", include_in_schema=False)
async def webhook(connection: str, request: Request, store: StoreDep, services: ServicesDep) -> JSONResponse:
    body = await request.body()
    caller = client_of(request.scope).address
    # the store is a database: its calls run on a worker thread, never on the event loop
    return await anyio.to_thread.run_sync(handle, store, connection, request.headers, body, caller, services.environ)


def handle(
    store: Store | None,
    connection: str,
    headers: Mapping[str, str],
    body: bytes,
    caller: str,
    environ: Mapping[str, str] | None,
) -> JSONResponse:
    """Check one webhook request (see the module docstring) and queue what it asks for."""
    try:
        conn = store.get_connection(connection) if store is not None else None
    except NotFound:
        conn = None
    if store is None or conn is None:
        log.warning("webhook refused: no connection %r (from %s)", connection, caller)
        return error_response(404, "CONNECTION_NOT_FOUND", f"no connection named {connection!r}")
    scheme = HOSTS.get(conn.type)
    if scheme is None:
        log.warning("webhook refused: connection %r is of type %s (from %s)", connection, conn.type, caller)
        return error_response(
            400,
            "WEBHOOK_NOT_SUPPORTED",
            f"connection {connection!r} is of type {conn.type}; webhooks come from "
            f"{', '.join(sorted(HOSTS))} connections",
        )
    secret = secret_for(connection, environ)
    if secret is None:
        log.warning("webhook refused: no secret for connection %r (from %s)", connection, caller)
        return error_response(
            403,
            "WEBHOOK_NOT_ENABLED",
            f"webhooks are not enabled for connection {connection!r}: set {SECRET_ENV} "
            f"(or {SECRET_ENV}_<CONNECTION>) in the service's environment",
        )
    if not verified(conn.type, secret, headers, body):
        log.warning(
            "webhook refused: missing or wrong %s for connection %r (from %s)", scheme.header, connection, caller
        )
        return error_response(
            401,
            "INVALID_WEBHOOK_SIGNATURE",
            f"the request is not signed with connection {connection!r}'s webhook secret ({scheme.header})",
        )
    event = headers.get(scheme.event_header, "")
    if event not in scheme.pushes:
        return JSONResponse({"event": event, "queued": []})  # ping, issues, …: nothing to do
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return error_response(400, "INVALID_REQUEST_BODY", "the webhook's body is not JSON")
    if not isinstance(payload, dict):
        return error_response(400, "INVALID_REQUEST_BODY", "the webhook's body is not a JSON object")
    wanted = {_key(u) for u in pushed_urls(conn.type, payload)} - {""}
    queued: list[dict[str, Any]] = []
    for repo in store.repos_for_connection(connection):
        if {_key(repo.name), _key(repo.web_url or ""), _key(repo.clone_url or "")} & wanted:
            job = store.enqueue_index_job(repo.id, force=True)
            queued.append({"repository": repo.name, "repositoryId": repo.id, "jobId": job.id})
    log.info(
        "webhook %s for %r: %s",
        event,
        connection,
        ", ".join(str(q["repository"]) for q in queued) or "no known repository",
    )
    return JSONResponse({"event": event, "queued": queued}, status_code=202 if queued else 200)
