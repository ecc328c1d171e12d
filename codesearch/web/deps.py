"""Typed FastAPI dependencies of the pages: the app's `WebContext` and the caller of a page.

The API's dependencies (`codesearch.service.deps`) sit below the web UI and do not know it: the
`WebContext` is kept in the app's one `Services` as ``services.web`` (`codesearch.web.mount.install`),
and reads what it shares with the API (the store, the authenticator, the tools' context) from there.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from codesearch.permissions import Identity
from codesearch.service.deps import app_services
from codesearch.web.templating import WebContext


async def web_context(request: Request) -> WebContext:
    """The web UI's `WebContext` of the app (``services.web``, set by `codesearch.web.mount.install`)."""
    web = app_services(request).web
    if not isinstance(web, WebContext):
        raise RuntimeError("the web UI is not installed in this app")
    return web


async def page_caller(request: Request, web: Annotated[WebContext, Depends(web_context)]) -> Identity | None:
    """The caller of a page, or None when the visitor must sign in first (`WebContext.identity_of`)."""
    return web.identity_of(request)


WebDep = Annotated[WebContext, Depends(web_context)]
PageCaller = Annotated[Identity | None, Depends(page_caller)]

__all__ = ["PageCaller", "WebDep", "page_caller", "web_context"]
