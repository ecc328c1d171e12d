"""AWS Signature Version 4, for the Amazon Bedrock provider (no AWS SDK needed).

    headers = sign("POST", url, {"content-type": "application/json"}, body,
                   access_key=..., secret_key=..., session_token=None, region="us-east-1", service="bedrock")
    httpx.post(url, content=body, headers={"content-type": "application/json", **headers})

`sign` returns the headers to add (``x-amz-date``, ``authorization`` and, with temporary
credentials, ``x-amz-security-token``). The headers passed in are signed too, so send them
unchanged. The canonical path is the URL's path percent-encoded once more, as AWS does for every
service but S3: a Bedrock model id such as ``anthropic.claude-v2:1`` travels as ``...v2%3A1``
in the URL and is signed as ``...v2%253A1``. The algorithm is checked against AWS's published
test-suite signatures in the tests.
"""

from __future__ import annotations

import hashlib
import hmac
import urllib.parse
from collections.abc import Mapping
from datetime import UTC, datetime

ALGORITHM = "AWS4-HMAC-SHA256"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def _canonical_query(query: str) -> str:
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    quoted = [(urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~")) for k, v in pairs]
    return "&".join(f"{k}={v}" for k, v in sorted(quoted))


def signing_key(secret_key: str, date: str, region: str, service: str) -> bytes:
    """The key of one day, region and service, derived from the secret access key."""
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    access_key: str,
    secret_key: str,
    region: str,
    service: str,
    session_token: str | None = None,
    now: datetime | None = None,
) -> dict[str, str]:
    """The headers that authenticate this request: ``x-amz-date``, ``authorization`` and, with a
    session token, ``x-amz-security-token``."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port and not (
        (parts.scheme == "https" and parts.port == 443) or (parts.scheme == "http" and parts.port == 80)
    ):
        host += f":{parts.port}"
    added = {"x-amz-date": amz_date}
    if session_token:
        added["x-amz-security-token"] = session_token
    signed = {"host": host, **{k.lower(): " ".join(str(v).split()) for k, v in headers.items()}, **added}
    names = sorted(signed)
    canonical = "\n".join(
        [
            method.upper(),
            urllib.parse.quote(parts.path or "/", safe="/~"),
            _canonical_query(parts.query),
            "".join(f"{n}:{signed[n]}\n" for n in names),
            ";".join(names),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()])
    signature = hmac.new(
        signing_key(secret_key, amz_date[:8], region, service), to_sign.encode("utf-8"), hashlib.sha256
    ).hexdigest()
    added["authorization"] = (
        f"{ALGORITHM} Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return added
