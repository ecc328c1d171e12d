"""The host names the service answers for: every request's ``Host`` is checked (HTTP 421 otherwise).

Why. A web page can make a visitor's browser send requests to any address, but the browser
only lets the page read the answers from its own origin. DNS rebinding gets around that: the
attacker's name (``rebind.attacker.example``) first resolves to the attacker's server, which
serves the page, then to this service's address (a loopback or private address the attacker
cannot reach), and the page's requests to its own origin land here, answers readable. They
carry the attacker's name in ``Host``. With anonymous access on (the local demo's default),
that reads every repository and calls every MCP tool; behind a sign-in, it can still use what
the service gives visitors. A service that answers only for its own names is out of reach.

What is allowed (`AllowedHosts.from_environ`):

* the loopback names ``localhost``, ``127.0.0.1`` and ``[::1]``, on any port, always (a service
  on 127.0.0.1 is reached under them; a rebinding name is never one of them);
* the host of ``AUTH_URL`` (the public base URL), and of the app's public URL (``public_url``:
  ``serve_config.yaml``'s argument; ``codesearch serve --host NAME`` without ``AUTH_URL`` makes it
  ``http://NAME:PORT``), on any port;
* the entries of ``CODESEARCH_ALLOWED_HOSTS``, comma-separated: ``name`` (any port) or
  ``name:port`` (that port only), IPv6 addresses in brackets; ``*`` allows any host (for a
  service whose every entrance checks the host itself, e.g. a reverse proxy with fixed names).

Where. `CheckHost`, the outermost of the app's own middlewares, refuses any other host on every
route: 421 Misdirected Request, in the API's JSON error shape (``MISDIRECTED_REQUEST``) for
``/api``, ``/oauth`` and ``/.well-known`` paths and for clients that do not ask for HTML, else a
short page. ``/api/health`` is the one exception: load balancers and orchestrators probe it by
the node's address, and its answer (``{"status": "ok"}``) says nothing. The MCP endpoint also
runs the MCP SDK's own DNS-rebinding protection with the same names (`mcp_transport_security`),
which checks ``Origin`` too: a browser's request from a page of another origin is refused (403).
"""

from __future__ import annotations

import html
import ipaddress
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from codesearch.service.middleware.limits import route_path, send_error

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Receive, Scope, Send

ALLOWED_HOSTS = "CODESEARCH_ALLOWED_HOSTS"
#: Always allowed, on any port.
LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
#: Paths answered whatever the host (see the module docstring).
UNCHECKED_PATHS = frozenset({"/api/health"})
STATUS = 421
ERROR_CODE = "MISDIRECTED_REQUEST"


def split_host(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` (lower-cased; an IPv6 address keeps its brackets) → (name, port or None);
    None when `value` is not a host at all."""
    value = value.strip().lower()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end == -1:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
        try:
            ipaddress.IPv6Address(name[1:-1])
        except ValueError:
            return None
    else:
        name, sep, port_text = value.partition(":")
        rest = sep + port_text
        if not name or any(not (c.isalnum() or c in "-._") for c in name):
            return None
    if not rest:
        return name, None
    if not rest.startswith(":") or not rest[1:].isdigit() or not 0 < int(rest[1:]) < 65536:
        return None
    return name, int(rest[1:])


@dataclass(frozen=True)
class AllowedHosts:
    """The allowed ``Host`` values: `names` on any port, `pairs` (name, port) on one port, or
    any host at all with `anything` (see the module docstring)."""

    names: frozenset[str] = frozenset(LOOPBACK)
    pairs: frozenset[tuple[str, int]] = frozenset()
    anything: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None, public_urls: Iterable[str] = ()) -> AllowedHosts:
        """Loopback, the hosts of ``AUTH_URL`` and `public_urls`, and ``CODESEARCH_ALLOWED_HOSTS``
        (an entry that is not a host is an `InvalidEnvironmentVariable`: the service refuses to start)."""
        from codesearch import environment
        from codesearch.errors import InvalidEnvironmentVariable

        environ = os.environ if environ is None else environ
        names, pairs, anything = set(LOOPBACK), set(), False
        auth_url = environment.auth_url(environ)
        if auth_url:
            host = split_host(urlsplit(auth_url).netloc.rpartition("@")[2])
            if host is None:
                raise InvalidEnvironmentVariable(
                    environment.AUTH_URL, auth_url, "give the public base URL, e.g. https://search.example.com"
                )
            names.add(host[0])
        for url in public_urls:
            host = split_host(urlsplit(url or "").netloc.rpartition("@")[2])
            if host is not None:
                names.add(host[0])
        raw = environ.get(ALLOWED_HOSTS, "")
        for item in (part.strip() for part in raw.split(",")):
            if not item:
                continue
            if item == "*":
                anything = True
                continue
            host = split_host(item)
            if host is None:
                raise InvalidEnvironmentVariable(
                    ALLOWED_HOSTS,
                    raw,
                    "give host names, comma-separated: name (any port), name:port, [IPv6]:port, or * for any host",
                )
            if host[1] is None:
                names.add(host[0])
            else:
                pairs.add((host[0], host[1]))
        return cls(frozenset(names), frozenset(pairs), anything)

    def allows(self, host_header: str | None) -> bool:
        if self.anything:
            return True
        host = split_host(host_header or "")
        if host is None:
            return False
        name, port = host
        if name.endswith(".") and not name.startswith("["):
            name = name[:-1]  # the fully qualified spelling of the same name
        return name in self.names or (port is not None and (name, port) in self.pairs)

    def sdk_patterns(self) -> tuple[list[str], list[str]]:
        """The same names as the MCP SDK's ``allowed_hosts`` and ``allowed_origins`` patterns
        (exact values, or ``…:*`` for any port)."""
        hosts: list[str] = []
        for name in sorted(self.names):
            hosts += [name, f"{name}:*"]
        hosts += [f"{name}:{port}" for name, port in sorted(self.pairs)]
        origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
        return hosts, origins


def mcp_transport_security(hosts: AllowedHosts) -> TransportSecuritySettings:
    """The MCP SDK's DNS-rebinding protection (``Host`` and ``Origin``) for `hosts`; off only
    when any host is allowed (``CODESEARCH_ALLOWED_HOSTS=*``)."""
    from mcp.server.transport_security import TransportSecuritySettings

    if hosts.anything:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed_hosts, allowed_origins = hosts.sdk_patterns()
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins
    )


def refusal(host: str | None) -> str:
    shown = "no Host header" if not host else f"the host {host[:200]!r}"
    return (
        f"this service does not answer requests for {shown}: it answers only for localhost, 127.0.0.1, [::1], "
        f"the host of AUTH_URL and those its operator allowed in {ALLOWED_HOSTS} (comma-separated names)"
    )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            text: str = value.decode("latin-1")
            return text
    return None


class CheckHost:
    """Pure ASGI middleware: refuses a request whose ``Host`` `hosts` does not allow (see the
    module docstring)."""

    def __init__(self, app: ASGIApp, hosts: AllowedHosts, unchecked: Iterable[str] = UNCHECKED_PATHS) -> None:
        self.app = app
        self.hosts = hosts
        self.unchecked = frozenset(unchecked)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.hosts.anything:
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        if self.hosts.allows(host) or route_path(scope) in self.unchecked:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await _refuse(scope, send, host)


async def _refuse(scope: Scope, send: Send, host: str | None) -> None:
    from codesearch.service.errors import is_api_path
    from codesearch.service.middleware.security_headers import page_headers

    message = refusal(host)
    accept = (_header(scope, b"accept") or "").lower()
    if is_api_path(scope) or "text/html" not in accept:
        await send_error(send, STATUS, ERROR_CODE, message, {"X-Content-Type-Options": "nosniff"})
        return
    body = (
        "<!doctype html><html lang=en><meta charset=utf-8><title>Wrong host</title>"
        f"<h1>Wrong host</h1><p>{html.escape(message[0].upper() + message[1:])}.</p></html>"
    ).encode()
    headers = {"content-type": "text/html; charset=utf-8", **{k.lower(): v for k, v in page_headers().items()}}
    headers["content-length"] = str(len(body))
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": STATUS, "headers": raw})
    await send({"type": "http.response.body", "body": body})
