"""The HTTP API routes (SPEC §5), as a FastAPI app built by `build_app`.

The app is built inside each Serve replica (a builder function, not a module-level app), so
nothing unpicklable crosses processes. Routes here: ``POST /api/search``, ``GET /api/health``,
``GET /api/version``, ``GET /api/openapi.json``. The search itself is delegated to a
`searcher` object with ``search(query, options) -> dict`` (a `SearcherPool` on Ray, or an
in-process `Searcher`-backed adapter in tests), so this module holds no search logic.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from codesearch.search.options import DEFAULT_PUBLIC_URL, SearchOptions
from codesearch.service import errors


class SearchRequest(BaseModel):
    """The body of ``POST /api/search`` (seed.md; unknown fields and wrong types are 400)."""

    model_config = ConfigDict(extra="forbid")

    query: StrictStr
    matches: StrictInt = Field(ge=1, le=1_000_000)
    contextLines: StrictInt = Field(0, ge=0, le=100)
    whole: StrictBool = False
    isRegexEnabled: StrictBool = False
    isCaseSensitivityEnabled: StrictBool = False


def _version() -> str:
    try:
        return version("codesearch")
    except PackageNotFoundError:
        return "0+unknown"


def build_app(get_searcher, *, public_url: str = DEFAULT_PUBLIC_URL, contexts=None) -> FastAPI:
    """The FastAPI app. `get_searcher()` returns the object that runs searches (called lazily)."""
    app = FastAPI(title="codesearch", version=_version(), openapi_url="/api/openapi.json", docs_url=None, redoc_url=None)
    errors.install(app)

    @app.post("/api/search")
    def search(body: SearchRequest) -> dict:
        options = SearchOptions(matches=body.matches, context_lines=body.contextLines, whole=body.whole,
                                is_regex=body.isRegexEnabled, case_sensitive=body.isCaseSensitivityEnabled,
                                public_url=public_url, contexts=dict(contexts or {}))
        return get_searcher().search(body.query, options)

    @app.get("/api/health")
    def health() -> dict:
        return {"status": "ok"}

    @app.get("/api/version")
    def api_version() -> dict:
        return {"version": _version()}

    return app
