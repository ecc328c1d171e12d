"""What every outgoing HTTP client of codesearch does the same way: reading ``Retry-After``,
backing off, and keeping secrets and credentials out of error messages.

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
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime

#: Header names whose values are credentials (masked in error messages).
CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "private-token",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "x-amz-security-token",
        "cookie",
    }
)
#: Shorter values are not masked: they would mask ordinary words.
MIN_SECRET_LENGTH = 4


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


class Redactor:
    """Masks known secrets in text meant for people (error messages, logs).

    Secrets are added as they are resolved; a credential header value is added whole and
    without its scheme (``Bearer abc`` masks ``abc`` too), a URL's password and query values
    too. Calling the redactor returns the text with each secret replaced by ``***``."""

    def __init__(self, secrets: Iterable[str] = ()):
        self._secrets: list[str] = []
        self.add(*secrets)

    def add(self, *values: str | None) -> None:
        for value in values:
            if value and len(value) >= MIN_SECRET_LENGTH and value not in self._secrets:
                self._secrets.append(value)
                # longest first, so that a secret containing another is masked whole
                self._secrets.sort(key=len, reverse=True)

    def add_headers(self, headers: Mapping[str, str] | None) -> None:
        """The values of credential headers among `headers` (see `CREDENTIAL_HEADERS`)."""
        for name, value in (headers or {}).items():
            if str(name).lower() in CREDENTIAL_HEADERS and value:
                value = str(value)
                self.add(value, value.split(" ", 1)[-1].strip())

    def add_url(self, url: str | None) -> None:
        """The password and query values written into `url`."""
        if not url:
            return
        try:
            parts = urllib.parse.urlsplit(url)
            self.add(parts.password, *(v for _, v in urllib.parse.parse_qsl(parts.query)))
        except ValueError:
            pass

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def __contains__(self, value: str) -> bool:
        return value in self._secrets
