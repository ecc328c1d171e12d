"""The web UI: server-rendered pages (Jinja2 templates, light JavaScript, no build step) served by
the same FastAPI app as the HTTP API, in every Serve replica.

Modules:
- `templating.py`: the Jinja2 environment (autoescaping on: repository text is always text),
  `render(request, template, **context)` with the caller, the CSRF token and the nav;
- the sessions and CSRF tokens the pages rely on are `codesearch.sessions` (below the web UI and the
  API alike): sign-in sessions, their cookies (HttpOnly, SameSite=Lax), CSRF tokens for forms and
  for the page's own API calls; passwords are `codesearch.accounts`' (argon2);
- `pages_search.py`: home (search box, sync status), search results, file view (Pygments), repos;
- `results_page.py`: the results page's results, written into its HTML as the searchers answer;
- `first_results.py`: on one replica, the rest of a results page waits (bounded) while another page
  is still before its first result;
- `pages_history.py`: blame, the history of a file or directory, a commit with its diff, the
  comparison of two refs (reached through `pages_search`'s ``/browse/`` route);
- `pages_account.py`: sign-in/out, first-account setup, settings (API keys), users;
- `pages_sso.py`: single sign-on, linked accounts, approvals of new members, invites;
- `pages_chat.py`: asking from the browser: a new chat, a chat's page (follow-ups, sharing), one's
  chats (``static/chat.js`` streams the answers); `codesearch.markup` renders the answers (Markdown,
  code references linked to the file);
- `pages_oauth_authorize.py`: ``/oauth/authorize``, the page where a user allows an MCP client;
- `pages_oauth_apps.py`: the OAuth clients (MCP clients) a user allowed, and revoking them;
- `pages_settings.py`: connections (sync status, resync, re-index), anonymous access, the MCP page;
- `api_keys.py`: creating an API key from a page (the keys and MCP pages);
- `iap.py`: requests signed by Google Cloud IAP (the ``gcp-iap`` provider) are signed in as the
  user their assertion names;
- `throttle.py`: sign-in lock-outs per account and client address (HTTP 429 with Retry-After);
- `link_required.py`: users who have not linked a required identity provider
  (``accountLinkingRequired``) are sent to their account page;
- `error_pages.py`: the HTML error pages browsers get where API clients get JSON;
- `modules.py`: which JavaScript modules a page preloads (what its module imports);
- `assets.py`: the static files under a versioned path browsers cache for good (``{{ static }}``),
  and where the static files and templates are (`STATIC_DIR`, `TEMPLATES_DIR`);
- `deps.py`: the pages' typed dependencies (the `WebContext`, the page's caller);
- `mount.py`: `install`, which puts all of the above into an app;
- `static/`: `style.css` (light and dark), the favicon (`favicon.svg`, and `favicon.ico` made
  from it for clients that only ask ``/favicon.ico``), and the scripts, native ES modules without
  a build step: one per page (`search-page.js`, `home-page.js`, `repos-page.js`, `file-page.js`,
  `chat.js`, `codenav.js`, `querybar.js`, `account.js`; `app.js` on every page) and the shared
  `dom.js`, `http.js`, `searchform.js`. No script leans on another's globals.

`mount.install(app, ...)` mounts ``/static``, answers ``/favicon.ico`` and adds the page routers: module-level
``APIRouter``s whose handlers get the store, the `WebContext` and the page's caller as typed
dependencies (`codesearch.web.deps`, over `codesearch.service.deps`). Pages apply the same repo visibility
as the API (`codesearch.permissions`, through the tools' `ToolContext`).
"""
