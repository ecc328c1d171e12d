"""Every page of the web UI, as a table the screen and accessibility tests walk.

    from tests.webpages import PAGES, open_page

    for spec in PAGES:
        open_page(page, web, spec)     # goes there and waits until the page's content is in

Each `Page` names its path (formatted with `web`'s values and the ids `page_data` made), who
opens it (``"owner"``, ``"member"`` or None: signed out) and what to wait for: the search
results page waits for its stream to end, the home page for its sync tables. Pages added by
other features go in `PAGES` too, so that every screen test covers them.
"""

from __future__ import annotations

import base64
import hashlib
import urllib.parse
from dataclasses import dataclass
from datetime import UTC

from tests.mcpworld import DEMO, WIDGETS


@dataclass(frozen=True)
class Page:
    name: str
    path: str  # formatted with `ids` (see `page_data`), DEMO and WIDGETS
    who: str | None = "owner"
    wait_for: str | None = None  # a selector, or a JavaScript predicate (starting with "() =>")
    status: int = 200


SEARCH_DONE = ("() => { const s = document.getElementById('summary');"
               " return s && (s.dataset.exhaustive || !document.getElementById('search-error').hidden); }")

PAGES = [
    Page("home", "/", wait_for=f"#repo-status tr[data-repo='{DEMO}']"),
    Page("search", "/search?q=handle_request", wait_for=SEARCH_DONE),
    Page("search-long-lines", "/search?q=%22xxxxxxxxxx%22", wait_for=SEARCH_DONE),
    Page("file", f"/browse/{DEMO}@main/-/blob/src/app.py", wait_for="#code"),
    Page("file-wide", f"/browse/{DEMO}@main/-/blob/data/wide.txt", wait_for="#code"),
    Page("file-deep", f"/browse/{WIDGETS}@main/-/blob/src/deep/nested/util.go", wait_for="#code"),
    Page("tree", f"/browse/{DEMO}", wait_for="#tree"),
    Page("repos", "/repos", wait_for="#repos"),
    Page("settings-keys", "/settings/keys"),
    Page("settings-password", "/settings/password"),
    Page("settings-account", "/settings/account"),
    Page("settings-members", "/settings/members"),
    Page("settings-security", "/settings/security"),
    Page("settings-users", "/settings/users"),
    Page("settings-audit", "/settings/audit"),
    Page("settings-service-accounts", "/settings/service-accounts"),
    Page("settings-remove-member", "/settings/users/{member}/remove"),
    Page("settings-leave", "/settings/leave", who="member"),
    Page("settings-usage", "/settings/usage"),
    Page("settings-keys-member", "/settings/keys", who="member"),
    Page("chat", "/chat/{chat}"),
    Page("chat-new", "/chat"),
    Page("chats", "/chats"),
    Page("blame", f"/browse/{DEMO}@main/-/blob/src/app.py?blame", wait_for="#code"),
    Page("history", f"/browse/{DEMO}@main/-/commits/src/app.py"),
    Page("commit", f"/browse/{DEMO}@main/-/commit/main"),
    Page("compare", f"/browse/{DEMO}@main/-/compare?base=main&head=main"),
    Page("settings-connections", "/settings/connections"),
    Page("settings-connections-member", "/settings/connections", who="member"),
    Page("settings-access", "/settings/access"),
    Page("settings-mcp", "/settings/mcp"),
    Page("settings-apps", "/settings/apps"),
    Page("insights", "/insights"),
    Page("insights-member", "/insights", who="member"),
    Page("insight", "/insights/{insight}", wait_for="#insight-counts"),
    Page("not-found", "/no/such/page", status=404),
    Page("not-found-file", f"/browse/{DEMO}@main/-/blob/no/such.py", status=404),
    Page("login", "/login", who=None),
    Page("oauth-consent", "/oauth/authorize?{consent}"),
    Page("invite", "/invite/{invite}", who=None),
    Page("invite-not-valid", "/invite/cs_invite_no-such-invite", who=None, status=404),
]
#: An MCP client's redirect (a loopback URL, as native clients use) and PKCE challenge.
CONSENT_REDIRECT = "http://127.0.0.1:33418/callback"
CONSENT_CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(b"a11y-verifier" * 4).digest()).rstrip(b"=").decode()


def page_data(web) -> dict:
    """What the pages need beyond the world: a research session with an answer, steps and a
    table (the chat page), an invite (the members page, the invite page) and a registered MCP
    client (the OAuth consent page)."""
    store = web["store"]
    if "page_data" in web:
        return web["page_data"]
    answer = ("`handle_request` is defined in `src/app.py` and called from `main()`:\n\n"
              "```python\nclass Server:\n    def handle_request(self, body):\n        return body.upper()\n```\n\n"
              "| file | line | what |\n|---|---|---|\n| src/app.py | 4 | definition |\n| src/app.py | 10 | call |\n")
    chat = store.create_chat("Where is handle_request defined, and who calls it?", answer,
                             user_id=web["owner"]["id"], visibility="PRIVATE",
                             model={"provider": "openai-compatible", "model": "m1", "displayName": "Model One"},
                             steps=[{"tool": "grep", "arguments": {"pattern": "handle_request"},
                                     "output": "Found 3 matches in 2 files\n\n[git.local/demo] src/app.py:\n  4: def handle_request",
                                     "is_error": False}])
    _invite, token = store.create_invite(web["owner"]["id"], email=None)
    client, _ = store.create_oauth_client("Inspector", [CONSENT_REDIRECT], {"token_endpoint_auth_method": "none"},
                                          with_secret=False)
    consent = urllib.parse.urlencode({"response_type": "code", "client_id": client.id, "redirect_uri": CONSENT_REDIRECT,
                                      "state": "a11y", "code_challenge": CONSENT_CHALLENGE,
                                      "code_challenge_method": "S256"})
    bot = store.create_service_account("Review bot")
    store.create_api_key(bot.id, "webhook")
    web["page_data"] = {"chat": chat.id, "invite": token, "consent": consent, "insight": make_insight(web),
                        "member": web["member"]["id"]}
    return web["page_data"]


def make_insight(web, owner: str = "owner") -> int:
    """A saved insight of `owner` over the world's repositories, its points counted (two queries,
    monthly from January to June 2024): what the insight page draws."""
    from datetime import datetime

    from codesearch.insights import saved
    from codesearch.insights.refresh import refresh_insight
    from codesearch.permissions import PermissionPolicy

    store = web["store"]
    now = datetime(2024, 6, 15, tzinfo=UTC)
    who = PermissionPolicy(lambda: store).identity(store.get_user(web[owner]["id"]))
    insight = saved.create(store, who, name="Requests and shouts", queries=["handle_request", "shout"], step="month",
                           since="2024-01-01", now=now)
    assert refresh_insight(store, insight, web["data"], now=now) == 6
    return insight.id


def url_of(web, spec: Page) -> str:
    return web["url"] + spec.path.format(**page_data(web))


def open_page(page, web, spec: Page):
    """Go to `spec`'s page in `page` (already signed in as `spec.who`) and wait for its content."""
    resp = page.goto(url_of(web, spec))
    assert resp is not None and resp.status == spec.status, (spec.name, resp and resp.status, page.url)
    if spec.wait_for and spec.wait_for.startswith("() =>"):
        page.wait_for_function(spec.wait_for)
    elif spec.wait_for:
        page.wait_for_selector(spec.wait_for)
    page.evaluate("() => document.fonts.ready")
    return resp
