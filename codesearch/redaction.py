"""Keeping secrets and private paths out of what people read: one module for every mask codesearch applies.

Two shapes of the same rules:

- `Redactor`, for the outgoing HTTP clients (code hosts, language models): secrets are added as
  they are resolved (a token, a credential header's value with and without its scheme, a URL's
  password and query values); calling it masks each one as ``***``.
- `Scrubber`, for git (`codesearch.git.process`): a frozen set of secrets and of private folders
  (each written as its label, e.g. ``<mirrors>``), plus what git may print on its own:
  ``Authorization:`` header values and the user part of URLs (``https://user:token@host`` →
  ``https://host``).

Both mask longest secrets first, so a secret that contains another is masked whole. A `Redactor`
ignores values shorter than `MIN_SECRET_LENGTH` (a header or a query may hold ordinary words); a
`Scrubber`'s secrets are the credentials a command was given, masked whatever their length.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: What a masked secret reads as.
MASK = "***"
#: Shorter values are not masked: they would mask ordinary words.
MIN_SECRET_LENGTH = 4
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

_AUTH_HEADER = re.compile(r"(?i)(authorization:\s*)\S+(\s+\S+)?")
_URL_USERINFO = re.compile(r"(?i)([a-z][\w+.-]*://)[^/@\s]*@")


def mask(text: str, secrets: Iterable[str]) -> str:
    """`text` with each of `secrets` (longest first, as given) replaced by `MASK`."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def strip_credentials(text: str) -> str:
    """`text` without ``Authorization:`` header values and without the user part of URLs."""
    return _URL_USERINFO.sub(r"\1", _AUTH_HEADER.sub(r"\1" + MASK, text))


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
        return mask(text, self._secrets)

    def __contains__(self, value: str) -> bool:
        return value in self._secrets


@dataclass(frozen=True)
class Scrubber:
    """Makes git's words safe to show: `secrets` become ``***``; each folder of `places` (and
    the folder it resolves to) is written as its label; ``Authorization:`` values and the user
    part of URLs (``https://user:token@host`` → ``https://host``) are removed."""

    secrets: tuple[str, ...] = ()
    places: tuple[tuple[str, str], ...] = ()

    @classmethod
    def hiding(cls, places: dict[str, str], secrets: tuple[str, ...] = ()) -> Scrubber:
        """A scrubber for `places` ({folder: label}; each folder's real path too) and `secrets`."""
        pairs: dict[str, str] = {}
        for folder, label in places.items():
            for name in (folder, os.path.realpath(folder)):
                pairs.setdefault(name, label)
        ordered = tuple(sorted(pairs.items(), key=lambda p: len(p[0]), reverse=True))
        return cls(tuple(sorted({s for s in secrets if s}, key=len, reverse=True)), ordered)

    def __call__(self, text: str) -> str:
        text = mask(text, self.secrets)
        for folder, label in self.places:
            text = text.replace(folder, label)
        return strip_credentials(text)
