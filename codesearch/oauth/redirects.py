"""Redirect URIs and other text a client chooses: what registration accepts, and how pages show it.

Redirect URIs (RFC 8252 for native apps): https; http only on a loopback host (127.0.0.1,
localhost, [::1], any port: §7.3); a private-use scheme named after a domain (§7.1); never a
fragment or user information; an ASCII host (a domain name in its IDNA form, ``xn--…``, so that a
look-alike such as a Cyrillic ``і`` cannot pass for a Latin ``i`` on the consent page). No
character that hides or reorders text (`hidden_character`: control, bidi and other format
characters, private-use, unassigned) in them or in a client's name and text fields, since the
consent page shows them to the user; a page draws client-chosen text with `shown_plainly`, which
keeps clients registered before that rule harmless too.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit

MAX_URI_LENGTH = 2000
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_HOST = re.compile(r"^[a-z0-9._-]+$")  # an ASCII domain name (IDNA form) or IPv4 address; IPv6 apart
#: Unicode categories of the characters that can hide or reorder the text around them: control
#: (Cc), format (Cf: bidi overrides and isolates, zero-width characters), surrogate (Cs), private
#: use (Co), unassigned (Cn), line and paragraph separators (Zl, Zp).
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_CATEGORY_WORDS = {
    "Cc": "a control",
    "Cf": "a format",
    "Cs": "a surrogate",
    "Co": "a private-use",
    "Cn": "an unassigned",
}


def describe_character(ch: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``: a character named so that a person can tell which it is."""
    name = unicodedata.name(ch, "") or f"({_CATEGORY_WORDS.get(unicodedata.category(ch), 'unnamed')} character)"
    return f"U+{ord(ch):04X} {name}"


def hidden_character(text: str) -> tuple[int, str] | None:
    """The first character of `text` that can hide or reorder the text around it
    (`HIDDEN_CATEGORIES`), as (its position from 1, `describe_character`), or None."""
    for i, ch in enumerate(text, 1):
        if unicodedata.category(ch) in HIDDEN_CATEGORIES:
            return i, describe_character(ch)
    return None


def hidden_problem(text: str) -> str | None:
    found = hidden_character(text)
    if found is None:
        return None
    at, what = found
    return (
        f"contains {what} (character {at}): control characters, bidirectional and other invisible formatting "
        "characters, private-use and unassigned characters are not allowed"
    )


def _host_problem(host: str) -> str | None:
    """Why `host` (lower-case, brackets of IPv6 removed) cannot be the host of a redirect URI."""
    if not host.isascii():
        try:
            ascii_form = host.encode("idna").decode("ascii")
        except UnicodeError:
            ascii_form = ""
        example = f" ({ascii_form})" if ascii_form else ""
        return (
            f"the host {host!r} is not ASCII: register the IDNA (punycode, xn--...) form of the domain "
            f"name{example} instead, so that the consent page can show the host as it is"
        )
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "the host is not a valid IPv6 address"
        return None
    if not _HOST.match(host):
        return "the host may contain only letters, digits, dots, hyphens and underscores (or be an IP address)"
    return None


def redirect_uri_problem(uri: Any) -> str | None:
    """Why `uri` cannot be a redirect URI, or None when it can (see the module docstring)."""
    if not isinstance(uri, str) or not uri:
        return "a redirect URI must be a non-empty string"
    if len(uri) > MAX_URI_LENGTH:
        return f"a redirect URI has at most {MAX_URI_LENGTH} characters"
    hidden = hidden_problem(uri)
    if hidden:
        return "the redirect URI " + hidden
    if any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in uri) or "\\" in uri:
        return "a redirect URI may not contain spaces, control characters or backslashes"
    try:
        parts = urlsplit(uri)
    except ValueError:
        return "not a valid URI"
    scheme = parts.scheme
    if not scheme or not _SCHEME.match(scheme) or scheme != uri.split(":", 1)[0].lower():
        return "a redirect URI must be absolute (with a scheme)"
    if "#" in uri:
        return "a redirect URI may not contain a fragment"
    if scheme in ("http", "https"):
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            return "a redirect URI may not contain user information"
        try:
            host = (parts.hostname or "").lower()
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            return "a redirect URI has an invalid port"
        if not host:
            return "an http(s) redirect URI needs a host"
        bad_host = _host_problem(host)
        if bad_host:
            return bad_host
        if scheme == "http" and host not in _LOOPBACK:
            return "http redirect URIs are allowed only on a loopback host (127.0.0.1, localhost, [::1]); use https"
        if scheme == "https" and host in _LOOPBACK:
            return None
        return None
    # a private-use scheme (RFC 8252 §7.1): a reverse domain name such as com.example.app
    if "." not in scheme:
        return (
            "a redirect URI must use https, http on a loopback host, or a private-use scheme named after a "
            "domain (e.g. com.example.app:/callback)"
        )
    return None


def shown_plainly(text: str) -> str:
    """`text` chosen by a client (its name, a redirect URI) as a page draws it: each character
    that could hide or reorder the text around it (`HIDDEN_CATEGORIES`) replaced by its code
    point in brackets (``[U+202E]``). Registration refuses them; this keeps clients registered
    before that harmless too."""
    return "".join(f"[U+{ord(ch):04X}]" if unicodedata.category(ch) in HIDDEN_CATEGORIES else ch for ch in text)


def _ascii_host(host: str) -> str:
    """`host` as ASCII: its IDNA form (``xn--…``) when it has other characters (a client registered
    before they were refused), else each such character as ``[U+XXXX]``."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return "".join(ch if ch.isascii() else f"[U+{ord(ch):04X}]" for ch in host)


def redirect_host(uri: str) -> str:
    """Where a redirect URI sends the browser, as the consent page shows it on its own: the ASCII
    host (and port) of an http(s) URI, or the private-use scheme of a native app
    (``com.example.app:``); `shown_plainly` in any case."""
    try:
        parts = urlsplit(uri)
        host, port = parts.hostname, parts.port
    except ValueError:
        return shown_plainly(uri[:200])
    if not parts.netloc or host is None:
        return shown_plainly(f"{parts.scheme}:")
    host = _ascii_host(host)
    if ":" in host:
        host = f"[{host}]"
    return shown_plainly(host if port is None else f"{host}:{port}")


def redirect_display(uri: str) -> str:
    """A redirect URI as the consent page shows it: scheme, host and path (its query left out),
    `shown_plainly`, the host in ASCII."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return shown_plainly(uri[:MAX_URI_LENGTH])
    if not parts.netloc:
        return shown_plainly(f"{parts.scheme}:{parts.path}")
    return f"{parts.scheme}://{redirect_host(uri)}{shown_plainly(parts.path)}"


def redirect_origin(uri: str) -> str:
    """Where a redirect URI sends the browser, in short: ``scheme://host[:port]`` (the host as
    `redirect_host` shows it), or the private-use scheme of a native app (``com.example.app:``)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return shown_plainly(uri[:200])
    return f"{parts.scheme}://{redirect_host(uri)}" if parts.netloc else shown_plainly(f"{parts.scheme}:")
