"""Put the web UI into an app: the static files, ``/favicon.ico``, the session, IAP and account-linking
middleware, and every page router. The one module that imports all the pages (the package itself
imports nothing, so a page importing a sibling never loads the others)."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from fastapi.responses import FileResponse

from codesearch.sessions.csrf import CsrfFailed
from codesearch.sessions.middleware import SessionMiddleware
from codesearch.web import (
    error_pages,
    iap,
    link_required,
    more_matches,
    pages_account,
    pages_chat,
    pages_email_code,
    pages_insights,
    pages_oauth_apps,
    pages_oauth_authorize,
    pages_offboarding,
    pages_search,
    pages_security,
    pages_settings,
    pages_skills,
    pages_sso,
    pages_usage,
    snippets,
)
from codesearch.web.assets import STATIC_DIR, VersionedStaticFiles, current_version

if TYPE_CHECKING:
    from fastapi import FastAPI

    from codesearch.web.templating import WebContext


def install(app: FastAPI, *, web: WebContext) -> None:
    """Mount the static files and every page router; `web` is the app's `WebContext` (kept as
    ``services.web`` in the app's one `Services`, where the pages' dependencies read it:
    `codesearch.web.deps`)."""
    web.services.web = web
    # Starlette runs the middleware added last first: sessions, then IAP, then the linking gate
    link_required.install(app, web)  # reads the user the session or IAP resolved
    iap.install(app, web)
    app.add_middleware(SessionMiddleware, web=web)  # every request's session and CSRF token
    app.add_exception_handler(CsrfFailed, error_pages.csrf_failed)  # a form without its token: a 403 page
    web.services.error_page = error_pages.error_page  # codesearch.service.errors.respond: pages for browsers
    # the results page's highlighter, loaded before the first search needs it (once per process)
    threading.Thread(target=snippets.warm_up, name="pygments-warm-up", daemon=True).start()
    app.mount("/static", VersionedStaticFiles(directory=STATIC_DIR, version=current_version(STATIC_DIR)), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        return FileResponse(
            os.path.join(STATIC_DIR, "favicon.ico"),
            media_type="image/vnd.microsoft.icon",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    app.include_router(pages_account.router)
    app.include_router(pages_sso.router)
    app.include_router(pages_oauth_apps.router)
    app.include_router(pages_oauth_authorize.router)  # /oauth/authorize: the JSON OAuth routes are service's
    app.include_router(pages_settings.router)
    app.include_router(pages_offboarding.router)
    app.include_router(pages_security.router)
    app.include_router(pages_email_code.router)
    app.include_router(pages_search.router)
    app.include_router(more_matches.router)  # /search/file: a result's further matches
    app.include_router(pages_chat.router)
    app.include_router(pages_chat.page_router)  # /chat/<id>, the one page in the OpenAPI document
    app.include_router(pages_insights.router)
    app.include_router(pages_usage.router)
    app.include_router(pages_skills.router)
