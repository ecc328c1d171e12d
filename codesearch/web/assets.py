"""The static files (``web/static/``) under a versioned path that browsers cache for good.

Pages link to ``{{ static }}/search.js``, which is ``<root>/static/v-<version>/search.js``:
`ASSET_VERSION` is a digest of every static file's name and bytes, so any change to any file
gives every file a new URL. What is asked under the current version is answered with
``Cache-Control: public, max-age=31536000, immutable``: a returning browser runs the page's
scripts from its cache without asking the server again (a revalidation costs a round trip
through the Serve proxy per file, and Chromium sometimes waited a second for five of them
before it ran the search page's script). ES modules import each other by relative URL
(``./shared.js``), so the version in the path carries over to every module a page imports.

Everything else stays answerable and is revalidated on each use (``Cache-Control: no-cache``,
with the ETag Starlette sends): the unversioned ``/static/search.js`` that scripts and old
bookmarks may ask for, and an older version's path (a page rendered before a redeploy asks for
it: it gets today's file, which is not cached for good under a name that means another one).

`inline_script` gives a static script's text and its CSP hash, for the one script a page runs
before anything loads (the search page's ``search_start.js``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os

from fastapi.staticfiles import StaticFiles
from markupsafe import Markup
from starlette.responses import Response
from starlette.types import Scope

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
_PREFIX = "v-"


def digest(directory: str) -> str:
    """12 hex digits of SHA-256 over the relative names and bytes of every file in `directory`."""
    h = hashlib.sha256()
    for base, dirs, files in sorted(os.walk(directory)):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(base, name)
            h.update(os.path.relpath(path, directory).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
            h.update(b"\0")
    return h.hexdigest()[:12]


class VersionedStaticFiles(StaticFiles):
    """`StaticFiles` that answers ``v-<version>/<file>`` as ``<file>`` with the cache policy of
    the module docstring. `version` is computed once, when the app is built."""

    def __init__(self, *, directory: str, version: str):
        super().__init__(directory=directory)
        self.version = version

    async def get_response(self, path: str, scope: Scope) -> Response:
        first, sep, rest = path.partition(os.sep)
        cache = REVALIDATE
        if sep and first.startswith(_PREFIX):
            cache = IMMUTABLE if first[len(_PREFIX) :] == self.version else REVALIDATE
            path = rest
        response = await super().get_response(path, scope)
        if response.status_code in (200, 304):
            response.headers["Cache-Control"] = cache
        return response


@functools.cache
def current_version(directory: str) -> str:
    """`digest` of `directory`, computed once per process (the files do not change while it runs)."""
    return digest(directory)


def static_prefix(root: str, version: str) -> str:
    """The URL prefix pages write static links with: ``<root>/static/v-<version>``."""
    return f"{root}/static/{_PREFIX}{version}"


@functools.cache
def inline_script(directory: str, name: str) -> tuple[Markup, str]:
    """The text of the static script `name`, to be inlined in a page, and the CSP source that
    allows it (``'sha256-…'`` of its bytes): a page whose first request must leave before any
    file loads carries that script in its HTML. Static text only; nothing of a request goes in it."""
    with open(os.path.join(directory, name), encoding="utf-8") as f:
        text = f.read()
    if "</" in text:
        raise ValueError(f"{name}: a script to inline must not contain '</'")
    digest_b64 = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
    return Markup(text), f"'sha256-{digest_b64}'"
