"""The web UI: server-rendered pages (Jinja2 templates, light JavaScript, no build step) served by
the same FastAPI app as the HTTP API, in every Serve replica.

Modules:
- `templating.py`: the Jinja2 environment (autoescaping on: repository text is always text),
  `render(request, template, **context)` with the caller, the CSRF token and the nav;
- `sessions.py`: sign-in with local accounts (argon2 password hashes), session cookies (HttpOnly,
  SameSite=Lax), CSRF tokens for forms and for the page's own API calls;
- `pages_search.py`: home (search box, sync status), search results (streamed), file view
  (Pygments), repos;
- `pages_account.py`: sign-in/out, first-account setup, settings (API keys), users;
- `pages_sso.py`: single sign-on, linked accounts, approvals of new members, invites;
- `pages_chat.py`: asking from the browser: a new chat, a chat's page (follow-ups, sharing), one's
  chats (``static/chat.js`` streams the answers); `code_refs.py` links the answers' code references;
- `pages_oauth_apps.py`: the OAuth clients (MCP clients) a user allowed, and revoking them;
- `iap.py`: requests signed by Google Cloud IAP (the ``gcp-iap`` provider) are signed in as the
  user their assertion names;
- `throttle.py`: sign-in lock-outs per account and client address (HTTP 429 with Retry-After);
- `static/`: `style.css` (light and dark), `app.js`.

`install(app, ...)` mounts ``/static`` and the page routers. Pages apply the same repo visibility
as the API (`codesearch.permissions`, through the tools' `ToolContext`).
"""

from __future__ import annotations

import os

from fastapi.staticfiles import StaticFiles

STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
TEMPLATES_DIR = os.path.join(os.path.dirname(__file__), "templates")


def install(app, *, web) -> None:
    """Mount the static files and every page router; `web` is the app's `WebContext`."""
    from codesearch.web import iap, pages_account, pages_chat, pages_oauth_apps, pages_search, pages_sso, sessions

    iap.install(app, web)  # before the session middleware: it runs inside it
    sessions.install(app, web)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(pages_account.router(web))
    app.include_router(pages_sso.router(web))
    app.include_router(pages_oauth_apps.router(web))
    app.include_router(pages_search.router(web))
    app.include_router(pages_chat.router(web))
