"""What every outgoing HTTP client of codesearch does the same way: reading ``Retry-After``,
backing off, and writing URLs fit for messages (the secrets themselves are masked by
`codesearch.redaction.Redactor`).

    wait = retry_after_seconds(response.headers.get("retry-after"))   # None: absent or unreadable
    time.sleep(wait if wait is not None else backoff_seconds(attempt, cap=60))
    redact = Redactor(); redact.add(token)
    raise SomeError(f"{safe_url(url)} answered 401: {redact(response.text)}")

Used by the code host adapters (`codesearch.hosts.http`) and the language model client
(`codesearch.llm.client`), which differ in how often they retry, not in how they read the
server's answer or what they let into a message.
"""

from __future__ import annotations

import email.utils
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime


def retry_after_seconds(value: str | None, now: Callable[[], datetime] | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay seconds or an HTTP date (never
    negative); None when the header is absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # HTTP dates are GMT
        when = when.replace(tzinfo=UTC)
    current = now() if now is not None else datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


def backoff_seconds(attempt: int, *, base: float = 1.0, cap: float = 60.0) -> float:
    """Exponential backoff before retry number `attempt` (0, 1, 2, ...): ``base * 2**attempt``,
    at most `cap`."""
    return min(base * (2.0 ** max(0, attempt)), cap)


def safe_url(url: str) -> str:
    """`url` fit for messages: no user info, query or fragment (tokens sometimes travel there)."""
    try:
        p = urllib.parse.urlsplit(str(url))
        port = p.port
    except ValueError:
        return "<invalid URL>"
    netloc = p.hostname or ""
    if ":" in netloc:  # an IPv6 literal
        netloc = f"[{netloc}]"
    if port:
        netloc += f":{port}"
    return urllib.parse.urlunsplit((p.scheme, netloc, p.path, "", ""))
