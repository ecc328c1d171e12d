"""HTTP for host adapters: timeouts, retries, rate limits and errors, in one place.

`HostHttp` wraps an `httpx.Client` and gives adapters `get(url)` (a checked response),
`get_json(url)` and `post_json(url)` (the few token exchanges, e.g. a GitHub App's installation
tokens). It

* retries 5xx answers and transport errors a few times with exponential backoff;
* honours rate limits: 429, or 403 with ``x-ratelimit-remaining: 0``; it waits for
  ``Retry-After`` (seconds or an HTTP date), ``x-ratelimit-reset`` / ``RateLimit-Reset``
  (epoch seconds) or a backoff, but never longer than `max_wait_s` at once or
  `max_total_wait_s` in all; past that the request fails with a `HostError`;
* maps 401/403 to `HostAuthError` and 404 to `HostNotFound`;
* never puts a token in an error message: URLs in errors lose their query string and user
  info, and the credential headers sent (``Authorization``, ``PRIVATE-TOKEN``...) are masked
  out of the server's text that the message quotes.

Reading ``Retry-After``, the backoff and the masking are `codesearch.http_retry`'s, shared with
the language model client.

Tests pass `transport=` (or point `base_url` at a local server); `sleep` is injectable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Self

import httpx

from codesearch.errors import HostAuthError, HostError, HostNotFound
from codesearch.http_retry import backoff_seconds, retry_after_seconds, safe_url
from codesearch.redaction import Redactor

DEFAULT_TIMEOUT_S = 30.0


class HostHttp:
    def __init__(
        self,
        headers: dict[str, str] | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = 3,
        max_wait_s: float = 60.0,
        max_total_wait_s: float = 300.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        verify: bool = True,
    ):
        self.client = httpx.Client(
            headers=headers or {}, timeout=timeout_s, transport=transport, follow_redirects=True, verify=verify
        )
        self.retries = retries
        self.max_wait_s = max_wait_s
        self.max_total_wait_s = max_total_wait_s
        self.sleep = sleep
        self.waited_s = 0.0

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(
        self, url: str, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        """GET `url`; a 2xx response, or a `HostError` that says what went wrong."""
        return self.request("GET", url, params=params, headers=headers)

    def request(
        self, method: str, url: str, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        """`method` `url` (without a body); a 2xx response, or a `HostError` that says what went wrong.
        Only requests that may be repeated go through here: retries send them again."""
        attempt = 0
        while True:
            try:
                r = self.client.request(method, url, params=params, headers=headers)
            except httpx.TransportError as e:
                if attempt < self.retries:
                    attempt += 1
                    self._wait(backoff_seconds(attempt, cap=self.max_wait_s))
                    continue
                raise HostError(f"cannot reach {safe_url(url)}: {type(e).__name__}", url=safe_url(url)) from None
            if r.is_success:
                return r
            wait = self._rate_limit_wait(r)
            if wait is not None:
                if wait > self.max_wait_s or self.waited_s + wait > self.max_total_wait_s:
                    raise HostError(
                        f"rate limited by {safe_url(url)} for {wait:.0f}s, longer than allowed",
                        url=safe_url(url),
                        status=r.status_code,
                    )
                self._wait(wait)
                continue
            if r.status_code >= 500 and attempt < self.retries:
                attempt += 1
                self._wait(backoff_seconds(attempt, cap=self.max_wait_s))
                continue
            redact = Redactor()
            redact.add_headers(self.client.headers)
            redact.add_headers(headers)
            redact.add_url(url)
            raise _error_for(r, url, redact)

    def get_json(self, url: str, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> Any:
        return self._json(self.get(url, params=params, headers=headers), url)

    def post_json(self, url: str, headers: dict[str, str] | None = None) -> Any:
        """POST `url` with an empty body; its JSON answer (a token exchange: asking again is harmless)."""
        return self._json(self.request("POST", url, headers=headers), url)

    @staticmethod
    def _json(r: httpx.Response, url: str) -> Any:
        try:
            return r.json()
        except ValueError:
            raise HostError(
                f"{safe_url(url)} answered {r.status_code} with a body that is not JSON",
                url=safe_url(url),
                status=r.status_code,
            ) from None

    def _wait(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        self.waited_s += seconds
        self.sleep(seconds)

    def _rate_limit_wait(self, r: httpx.Response) -> float | None:
        """Seconds to wait when `r` is a rate-limit answer, else None."""
        h = r.headers
        limited = r.status_code == 429 or (
            r.status_code == 403 and (h.get("x-ratelimit-remaining") == "0" or "retry-after" in h)
        )
        if not limited:
            return None
        wait = retry_after_seconds(h.get("retry-after"))
        if wait is not None:
            return wait
        for key in ("x-ratelimit-reset", "ratelimit-reset"):
            if h.get(key, "").strip().isdigit():
                v = float(h[key])
                return max(0.0, v - time.time()) if v > 1e9 else v  # epoch seconds, or delta seconds
        return 1.0


def _error_for(r: httpx.Response, url: str, redact: Redactor | None = None) -> HostError:
    snippet = (
        r.text[:200].strip().replace("\n", " ")
        if r.headers.get("content-type", "").startswith(("text/", "application/json"))
        else ""
    )
    if redact is not None:
        snippet = redact(snippet)
    detail = f": {snippet}" if snippet else ""
    where = safe_url(url)
    if r.status_code in (401, 403):
        return HostAuthError(
            f"{where} refused the credentials ({r.status_code}){detail}", url=where, status=r.status_code
        )
    if r.status_code == 404:
        return HostNotFound(f"{where} not found (404)", url=where, status=404)
    return HostError(f"{where} answered {r.status_code}{detail}", url=where, status=r.status_code)


def next_link(r: httpx.Response) -> str | None:
    """The ``rel="next"`` URL of a Link header, or None (GitHub, GitLab, Gitea pagination)."""
    nxt = r.links.get("next")
    return nxt.get("url") if nxt else None
