"""The URLs of this service's code pages, written in one place (the search page, the history pages,
the settings and the code references of an answer all link to them)."""

from __future__ import annotations

import urllib.parse

from codesearch.search.present import short_ref


def browse_url(root: str, repo: str, rev: str | None = None, kind: str | None = None, path: str = "") -> str:
    """This service's page of a repo (``kind`` None), a directory (``tree``) or a file (``blob``),
    encoded as `codesearch.search.present.web_url` does."""
    q = urllib.parse.quote
    url = f"{root}/browse/{q(repo)}"
    if rev:
        url += f"@{q(short_ref(rev), safe='')}"
    if kind:
        url += f"/-/{kind}/{q(path)}"
    return url
