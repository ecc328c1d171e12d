"""Who sent a request: the client address and scheme, with forwarded headers believed only from
proxies the operator names.

Why. ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are written by whoever sends the request: a
client can claim any address in them. The sign-in lock-outs count failures per client address
(`codesearch.web.throttle`), so a service that believes the header lets one client guess
passwords from as many "addresses" as it cares to name. Ray Serve's proxy runs uvicorn with its
defaults, which rewrite the ASGI scope's ``client`` (and ``scheme``) from those headers whenever
the TCP peer is 127.0.0.1 or ::1 (``FORWARDED_ALLOW_IPS``), as it is for every request when a
reverse proxy on the same machine forwards to it.

What.

* **The proxy believes no forwarded header**: ``FORWARDED_ALLOW_IPS=none`` (`PROXY_ENV`, which
  `serve_settings.install_proxy_env` puts into the environment of the Ray that `codesearch serve`
  starts, and ``cluster.yaml`` into ``ray start``'s). uvicorn trusts the addresses and networks in
  that list; ``none`` is neither, so no peer is trusted and ``scope["client"]`` stays the TCP peer.
* **The proxy vouches for it**: `PeerStamp`, one of our middlewares in Serve's proxies
  (`proxy_errors.middlewares`), copies that peer into the scope under `PEER_KEY` (Serve sends the
  scope to the replica; a client cannot write a scope key) when, and only when, its own process
  trusts no forwarded header. A proxy started the old way (no ``FORWARDED_ALLOW_IPS=none``, or
  without our middlewares: a cluster whose ``ray start`` lacks them) stamps nothing.
* **One function decides** (`client_of`): the peer is the stamped one. Forwarded headers count
  only when that peer is in ``CODESEARCH_TRUSTED_PROXIES`` (`TRUSTED_PROXIES`: comma-separated
  addresses and CIDR networks; default none): the client is the rightmost ``X-Forwarded-For``
  entry that is not itself a trusted proxy (each proxy appends the peer it saw, so entries left of
  the last trusted proxy's are whatever the client wrote), and the scheme is the rightmost
  ``X-Forwarded-Proto`` value. ``Forwarded`` (RFC 7239) is not read: a proxy sets one of the two
  families, and believing the one it does not set would believe the client's.
* **Failing safe**: a request without the stamp that carries ``X-Forwarded-For`` may have had its
  ``scope["client"]`` rewritten from it by a proxy we cannot see into, so it is counted as the
  one client `UNVERIFIED` (every such request shares the lock-outs of that one address, as all
  clients behind a reverse proxy did before), and a warning names the fix once per process.
  Without the header, no proxy rewrote anything and the scope's client is the peer.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection
    from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)

#: The operator's list of reverse proxies whose forwarded headers are believed.
TRUSTED_PROXIES = "CODESEARCH_TRUSTED_PROXIES"
#: uvicorn's list of peers whose forwarded headers it believes, read in Serve's proxy processes.
UVICORN_TRUSTED = "FORWARDED_ALLOW_IPS"
#: A value of `UVICORN_TRUSTED` that is neither an address nor a network: uvicorn trusts nobody.
TRUST_NONE = "none"
#: For Serve's proxies (merged into `serve_settings.PROXY_ENV`).
PROXY_ENV = {UVICORN_TRUSTED: TRUST_NONE}
#: Where `PeerStamp` leaves the TCP peer in the scope (it travels to the replica with the request).
PEER_KEY = "codesearch.peer"
#: The address of every request whose peer nobody vouched for and that names another in X-Forwarded-For.
UNVERIFIED = "unverified-proxy"
#: Longest client address kept (a trusted proxy's header entry is an address; anything else is cut).
MAX_ADDRESS = 64

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Client:
    """The client of one request: its `address` (an IP address as text, `UNVERIFIED`, or
    "unknown") and the `scheme` it used (``http`` or ``https``)."""

    address: str
    scheme: str

    @property
    def https(self) -> bool:
        return self.scheme == "https"


def uvicorn_trusts_nobody(environ: Mapping[str, str] | None = None) -> bool:
    """Whether uvicorn, in a process with `environ`, believes no peer's forwarded headers: its
    ``FORWARDED_ALLOW_IPS`` (default ``127.0.0.1,::1``) names no address, network or ``*``."""
    environ = os.environ if environ is None else environ
    value = environ.get(UVICORN_TRUSTED, "127.0.0.1,::1")
    for item in (part.strip() for part in value.split(",")):
        if item == "*":
            return False
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            continue
        return False
    return True


def parse_networks(value: str) -> tuple[Network, ...]:
    """``CODESEARCH_TRUSTED_PROXIES``: comma-separated addresses and CIDR networks (blank: none).
    An entry that is neither is an `InvalidEnvironmentVariable`, so a typo does not silently
    trust nobody (or, worse, be read as something else)."""
    from codesearch.errors import InvalidEnvironmentVariable

    networks = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise InvalidEnvironmentVariable(
                TRUSTED_PROXIES, value, "give IP addresses or CIDR networks, comma-separated (e.g. 10.0.0.0/8,::1)"
            ) from None
    return tuple(networks)


@functools.lru_cache(maxsize=8)
def _networks(value: str) -> tuple[Network, ...]:
    return parse_networks(value)


def trusted_proxies(environ: Mapping[str, str] | None = None) -> tuple[Network, ...]:
    environ = os.environ if environ is None else environ
    return _networks(environ.get(TRUSTED_PROXIES, ""))


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address from a header entry or a peer: ``1.2.3.4``, ``1.2.3.4:5``, ``[::1]:5``, ``::1``."""
    text = text.strip()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else text
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(text: str, networks: tuple[Network, ...]) -> bool:
    address = _ip(text)
    return address is not None and any(address in net for net in networks)


def _header_values(scope: Scope, name: bytes) -> list[str]:
    """The comma-separated entries of every `name` header, in order."""
    values = [v.decode("latin-1") for k, v in scope.get("headers") or [] if k.lower() == name]
    return [item.strip() for value in values for item in value.split(",")]


_warned = False


def _warn_unverified() -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning(
            "a request names its client in X-Forwarded-For, but Serve's proxy did not say who sent it: "
            "its proxies were started without FORWARDED_ALLOW_IPS=%s or without "
            "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=codesearch.serving.proxy_errors:middlewares "
            "(docs/cluster.md). Such requests share one sign-in lock-out address (%r) until they are.",
            TRUST_NONE,
            UNVERIFIED,
        )


def _app_environ(scope: Scope) -> Mapping[str, str] | None:
    """The environment the app was built with (`api.build_app`'s `environ`), None: `os.environ`."""
    services = getattr(getattr(scope.get("app"), "state", None), "services", None)
    return getattr(services, "environ", None)


def client_of(scope: Scope, environ: Mapping[str, str] | None = None) -> Client:
    """The client of the request `scope` (see the module docstring); `environ` (default: the
    app's, else `os.environ`) holds ``CODESEARCH_TRUSTED_PROXIES``."""
    scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
    stamped = scope.get(PEER_KEY)
    if stamped is None:
        forwarded_for = any(k.lower() == b"x-forwarded-for" for k, _ in scope.get("headers") or [])
        if forwarded_for:
            _warn_unverified()
            return Client(UNVERIFIED, scheme)
        client = scope.get("client")
        peer = client[0] if client and client[0] else "unknown"
    else:
        peer = str(stamped) or "unknown"
    networks = trusted_proxies(_app_environ(scope) if environ is None else environ)
    if not networks or not _trusted(peer, networks):
        return Client(peer[:MAX_ADDRESS], scheme)
    hops = [h for h in _header_values(scope, b"x-forwarded-for") if h]
    address = peer
    for hop in reversed(hops):
        address = hop
        if not _trusted(hop, networks):
            break
    parsed = _ip(address)
    protos = [p.lower() for p in _header_values(scope, b"x-forwarded-proto") if p]
    if protos and protos[-1] in ("http", "https"):
        scheme = protos[-1]
    return Client(str(parsed) if parsed is not None else address[:MAX_ADDRESS], scheme)


def client_address(request: HTTPConnection) -> str:
    """The address of `request`'s client (`client_of`), as the per-address limits count it: the
    sign-in lock-outs (`codesearch.web.throttle`) and the OAuth client registrations."""
    return client_of(request.scope).address


class PeerStamp:
    """Pure ASGI middleware for Serve's proxies: puts the TCP peer into the scope under `PEER_KEY`
    when this process's uvicorn believes no forwarded header (so the scope's ``client`` is the
    peer), and removes any `PEER_KEY` otherwise (see the module docstring)."""

    def __init__(self, app: ASGIApp, environ: Mapping[str, str] | None = None) -> None:
        self.app = app
        self.vouch = uvicorn_trusts_nobody(environ)
        if not self.vouch:
            log.warning(
                "this Serve proxy believes X-Forwarded-For from some peers (%s is not %r): "
                "codesearch counts their requests as one client; see docs/cluster.md",
                UVICORN_TRUSTED,
                TRUST_NONE,
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client")
            if self.vouch and client and client[0]:
                scope[PEER_KEY] = client[0]
            else:
                scope.pop(PEER_KEY, None)
        await self.app(scope, receive, send)
