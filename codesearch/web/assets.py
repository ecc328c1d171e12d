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
"""

from __future__ import annotations

import functools
import hashlib
import os

from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope

STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
TEMPLATES_DIR = os.path.join(os.path.dirname(__file__), "templates")

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
