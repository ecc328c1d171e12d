"""Settings pages for running the service (codesearch.web.pages_settings): connections with their
sync status, resync and re-index; anonymous access; the MCP page.

Browser tests drive a real headless Chromium against the Serve app on 127.0.0.1 (`tests.webworld`:
mounted under ``/web``, anonymous access not forced, an owner and a member) with the permission
rule on, so that the member sees fewer repositories than exist. Syncs run on the real sync worker
(`ConnectionSyncer`) in this process, against a fake Gitea on 127.0.0.1, as the service's workers
would. The precedence of anonymous access and its agreement across replicas run in process on
two `build_app` apps over real HTTP (`tests.asgiserver`). Screenshots (390 and 1400 px, light and
dark) go to ``$TMPDIR/codesearch-settings-shots``.
"""

from __future__ import annotations

import html
import json
import os
import re
import tempfile
import time
import tomllib

import httpx
import pytest

from codesearch import permissions
from codesearch.runtime.workers import ConnectionSyncer, RuntimeOptions
from codesearch.service.anonymous import SETTING_KEY, AnonymousAccess
from codesearch.serving.api import build_app
from codesearch.store import NotFound, Store
from codesearch.store import models as m
from codesearch import sessions
from codesearch.web.pages_settings import mcp_snippets
from tests.asgiserver import serving
from tests.fakehosts.gitea import FakeGitea
from tests.githttp import GitHttpServer
from tests.mcpworld import DEMO
from tests.webworld import browser, page_for, web  # noqa: F401  (pytest fixtures)

SHOTS = os.path.join(tempfile.gettempdir(), "codesearch-settings-shots")
SEARCH = {"query": "handle_request", "matches": 5}
TOKEN_ENV = "SETTINGS_TEST_FORGE_TOKEN"
OPEN = "github.com/acme/open-source"  # public: everyone sees it
SECRET = "github.com/acme/secret-plans"  # private, enforced: the owner has a grant, the member none
EVIL_CONN = '<img src=x onerror="window.__pwned=1">conn'
EVIL_REPO = 'github.com/acme/"><svg onload="window.__pwned=4">'
EVIL_ERROR = '<script>window.__pwned=2</script> could not read {data}/repos/7/HEAD'
EVIL_WARNING = '<b>bold</b> org <img src=y onerror="window.__pwned=3"> not found'


def _csrf(page) -> str:
    return page.locator("meta[name=csrf-token]").get_attribute("content")


def _pwned(page):
    return page.evaluate("window.__pwned")


def _no_overflow(page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
        .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))""")
    assert width <= page.viewport_size["width"], \
        f"the page is {width} px wide at {page.viewport_size['width']} px: {wide}"


def shots(page, name: str) -> None:
    """`name` at 390 and 1400 px, light and dark; at each, nothing wider than the window."""
    os.makedirs(SHOTS, exist_ok=True)
    for width in (390, 1400):
        page.set_viewport_size({"width": width, "height": 900})
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            _no_overflow(page)
            page.screenshot(path=os.path.join(SHOTS, f"{name}-{width}-{scheme}.png"), full_page=True)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 900})


def _wait(predicate, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def world(web, tmp_path_factory):
    """The web world, plus: the permission rule on (connection ``acme`` enforces; the owner may
    read `SECRET`, the member may not), a connection with hostile text everywhere, and a Gitea
    connection ``forge`` whose token is not set yet (its first sync fails)."""
    store = web["store"]
    owner_id = web["owner"]["id"]
    ids = store.upsert_repos("acme", [
        dict(name=OPEN, display_name="acme/open-source", code_host_type="github", clone_url="https://x.invalid/o.git",
             public=True),
        dict(name=SECRET, display_name="acme/secret-plans", code_host_type="github",
             clone_url="https://x.invalid/s.git", public=False, external_id="77")], prune=False).ids
    acc = store.link_account(owner_id, provider="github", provider_type="github", host="github.com",
                             subject="owner-gh", login="owner")
    assert acc is not None
    store.replace_repo_grants(ids[SECRET], "github.com", ["owner-gh"])
    open_rule = permissions.ConnectionRule(enforce=False, enforce_public=False, host=None)
    permissions.write_settings(store, permissions.PermissionSettings(enabled=True, connections={
        "acme": permissions.ConnectionRule(enforce=True, enforce_public=False, host="github.com"),
        "local": open_rule, "forge": open_rule, EVIL_CONN: open_rule}))

    store.upsert_connection(EVIL_CONN, "github", {"type": "github", "orgs": ["evil"]})
    evil_ids = store.upsert_repos(EVIL_CONN, [dict(name=EVIL_REPO, display_name="evil", code_host_type="github",
                                                    clone_url="https://x.invalid/e.git", public=True)]).ids
    store.update_connection_status(EVIL_CONN, m.SYNC_FAILED, error=EVIL_ERROR.format(data=web["data"]),
                                   warnings=[EVIL_WARNING])
    store.enqueue_index_job(evil_ids[EVIL_REPO])
    job = store.claim_job(m.INDEX_JOB, "settings-test")
    store.fail_job(job.id, f"<i>index</i> failed in {web['data']}/repos/{evil_ids[EVIL_REPO]}", retry=False)
    from sqlalchemy import update

    from codesearch.store.tables import repos
    with store.engine.begin() as c:  # what the indexer records when a build fails
        c.execute(update(repos).where(repos.c.id == evil_ids[EVIL_REPO]).values(
            index_status=m.INDEX_FAILED, last_error=f"<i>index</i> failed in {web['data']}/repos/{evil_ids[EVIL_REPO]}"))

    root = str(tmp_path_factory.mktemp("forge-git"))
    with GitHttpServer(root) as git, FakeGitea(git=git) as forge:
        forge.add_org("acme")
        forge.add_repo("acme", "app")
        store.upsert_connection("forge", "gitea", {"type": "gitea", "url": forge.base_url, "orgs": ["acme"],
                                                   "token": {"env": TOKEN_ENV}})
        syncer = ConnectionSyncer(web["data"], "settings-syncer", RuntimeOptions(heartbeat_s=0.05))
        try:
            yield {**web, "ids": {**web["ids"], **ids, **evil_ids}, "forge": forge, "syncer": syncer}
        finally:
            syncer.close()


def _connection(page, name: str):
    return page.locator("article.conn", has=page.locator("h2.conn-name", has_text=re.compile(f"^{re.escape(name)}$")))


# ----------------------------------------------------------------------------- connections

def test_the_owner_resyncs_a_failing_connection_and_sees_it_synced(world, page_for, monkeypatch):
    store, syncer = world["store"], world["syncer"]
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    store.enqueue_sync_job("forge")
    assert syncer.run_once()  # the token's variable is not set: FAILED, a retry waits
    assert store.get_connection("forge").sync_status == m.SYNC_FAILED

    page = page_for(world["owner"])
    page.goto(world["url"] + "/settings/connections")
    forge = _connection(page, "forge")
    assert forge.locator(".conn-type").inner_text() == "gitea"
    assert forge.locator(".conn-status").inner_text() == "failed"
    assert TOKEN_ENV in forge.locator(".conn-error").inner_text()
    assert forge.locator(".conn-synced").inner_text() == "never"
    assert "retry of the sync queued" in forge.locator(".conn-job").inner_text()
    shots(page, "connections-owner")

    monkeypatch.setenv(TOKEN_ENV, "gitea-faketoken")  # the fix: the token the fake Gitea knows
    forge.get_by_role("button", name="Resync forge").click()
    page.wait_for_url(re.compile(r"/settings/connections\?resynced=\d+"))
    assert "A sync of “forge” is queued" in page.inner_text("p.notice")
    forge = _connection(page, "forge")
    assert forge.locator(".conn-job").inner_text() == "sync queued"  # the retry was pulled forward
    _wait(lambda: any(e.action == "connection.resync" and e.target == "forge"
                      for e in store.list_audit_events(action="connection.resync")[0]), what="the audit event")

    assert syncer.run_once()  # the sync worker takes it up at once
    page.get_by_role("link", name="Reload").click()
    page.wait_for_url(re.compile(r"/settings/connections$"))
    forge = _connection(page, "forge")
    assert forge.locator(".conn-status").inner_text() == "synced"
    assert forge.locator(".conn-error").count() == 0
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", forge.locator(".conn-synced").inner_text())

    def counted() -> bool:  # the permission rule's cache learns of the new repository within seconds
        page.reload()
        return _connection(page, "forge").locator(".conn-repo-count").inner_text() == "1"

    _wait(counted, what="the new repository to be counted")
    forge = _connection(page, "forge")
    forge.locator("summary").click()
    assert forge.locator(".repo-row .repo-name").inner_text().endswith("/acme/app")


def test_the_owner_reindexes_one_repository(world, page_for):
    store = world["store"]
    page = page_for(world["owner"])
    page.goto(world["url"] + "/settings/connections")
    local = _connection(page, "local")
    local.locator("summary").focus()
    page.keyboard.press("Enter")  # the repositories open from the keyboard
    button = local.get_by_role("button", name=f"Re-index {DEMO}")
    button.focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"reindexed=\d+"))
    assert f"Re-indexing {DEMO} is queued." in page.inner_text("p.notice")
    jobs = [j for j in store.list_jobs(kind=m.INDEX_JOB, state=m.PENDING) if j.repo_id == world["ids"][DEMO]]
    assert jobs, "no index job was queued"
    _wait(lambda: store.list_audit_events(action="repo.reindex")[0], what="the audit event")


def test_a_member_reads_the_page_without_buttons_and_cannot_post(world, page_for):
    store = world["store"]
    page = page_for(world["member"])
    page.goto(world["url"] + "/settings/connections")
    text = page.inner_text("main")
    assert page.locator("form.conn-resync, form.repo-reindex").count() == 0
    assert "Only owners can start a sync" in text
    acme = _connection(page, "acme")
    acme.locator("summary").click()
    names = acme.locator(".repo-row .repo-name").all_inner_texts()
    assert OPEN in names and SECRET not in names  # hidden from the member: not even named
    assert SECRET not in page.content()
    assert acme.locator(".conn-repo-count").inner_text() == str(len(names))
    # the problems of a sync may name repositories: a member who does not see them all gets a count
    evil = _connection(page, EVIL_CONN)
    assert evil.locator(".conn-error, .conn-warnings").count() == 0
    assert "2 problems" in evil.locator(".conn-hidden").inner_text()
    shots(page, "connections-member")

    owner = page_for(world["owner"])
    owner.goto(world["url"] + "/settings/connections")
    acme_owner = _connection(owner, "acme")
    acme_owner.locator("summary").click()
    assert SECRET in acme_owner.locator(".repo-row .repo-name").all_inner_texts()  # the owner has a grant

    token = _csrf(page)
    forge_id = store.get_connection("forge").id
    before = len(store.list_jobs(kind=m.SYNC_JOB, limit=1000))
    for path in (f"/settings/connections/{forge_id}/sync", f"/settings/connections/repos/{world['ids'][DEMO]}/reindex"):
        r = page.request.post(world["url"] + path, form={"csrf_token": token}, max_redirects=0)
        assert r.status == 403 and "Only owners" in r.text(), path
    assert len(store.list_jobs(kind=m.SYNC_JOB, limit=1000)) == before


@pytest.mark.parametrize("path, form, status, says", [
    ("/settings/connections/999999/sync", {}, 404, "No such connection"),
    ("/settings/connections/abc/sync", {}, 404, "No such connection"),
    ("/settings/connections/repos/999999/reindex", {}, 404, "No such repository"),
    ("/settings/connections/repos/x/reindex", {}, 404, "No such repository"),
    ("/settings/access", {"anonymous": "maybe"}, 400, "must be “on” or “off”, not 'maybe'"),
    ("/settings/access", {}, 400, "must be “on” or “off”"),
    ("/settings/mcp", {"name": ""}, 400, "Give the key a name"),
    ("/settings/mcp", {"name": "x" * 256}, 400, "Give the key a name"),
])
def test_bad_requests_say_what_is_wrong(world, page_for, path, form, status, says):
    page = page_for(world["owner"])
    page.goto(world["url"] + "/settings/connections")
    r = page.request.post(world["url"] + path, form={**form, "csrf_token": _csrf(page)}, max_redirects=0)
    assert r.status == status and says in html.unescape(r.text())
    assert r.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize("path, form", [
    ("/settings/connections/{forge}/sync", {}),
    ("/settings/connections/repos/{demo}/reindex", {}),
    ("/settings/access", {"anonymous": "on"}),
    ("/settings/mcp", {"name": "no token"}),
])
def test_every_form_needs_the_csrf_token(world, page_for, path, form):
    store = world["store"]
    page = page_for(world["owner"])
    page.goto(world["url"] + "/settings/connections")
    url = world["url"] + path.format(forge=store.get_connection("forge").id, demo=world["ids"][DEMO])
    keys = len(store.list_api_keys(world["owner"]["id"], include_revoked=True))
    for token in (None, "", "x" * 43):
        data = dict(form) if token is None else {**form, "csrf_token": token}
        r = page.request.post(url, form=data, max_redirects=0)
        assert r.status == 403 and "security token" in r.text()
    assert store.service_setting(SETTING_KEY) in (None, {"enabled": False})
    assert len(store.list_api_keys(world["owner"]["id"], include_revoked=True)) == keys


def test_hostile_names_and_errors_are_text(world, page_for):
    page = page_for(world["owner"])
    page.goto(world["url"] + "/settings/connections")
    evil = _connection(page, EVIL_CONN)
    assert evil.count() == 1
    error = evil.locator(".conn-error").inner_text()
    assert "<script>window.__pwned=2</script>" in error
    assert world["data"] not in page.content() and "<data dir>/repos/7/HEAD" in error  # never a server path
    assert EVIL_WARNING in evil.locator(".conn-warnings").inner_text()
    evil.locator("summary").click()
    row = evil.locator(".repo-row")
    assert row.locator(".repo-name").inner_text() == EVIL_REPO
    assert row.locator(".repo-error").inner_text().startswith("<i>index</i> failed in <data dir>/repos/")
    assert page.locator("main img, main svg, main script, main b, main i").count() == 0
    assert _pwned(page) is None
    shots(page, "connections-hostile")


# ----------------------------------------------------------------------------- access

def test_the_owner_switches_anonymous_access_for_the_api(world, page_for):
    store = world["store"]
    api = httpx.Client(base_url=world["serve_url"], timeout=30)

    def anonymous_search() -> int:
        return api.post("/web/api/search", json=SEARCH).status_code

    assert anonymous_search() == 401
    page = page_for(world["owner"])
    page.goto(world["url"] + "/settings/access")
    assert page.inner_text("#anonymous-state") == "off"
    shots(page, "access-off")
    page.get_by_role("button", name="Turn anonymous access on").click()
    page.wait_for_selector("p.notice")
    assert page.inner_text("#anonymous-state") == "on"
    assert store.service_setting(SETTING_KEY) == {"enabled": True}
    _wait(lambda: anonymous_search() == 200, timeout=10, what="anonymous search to be allowed")
    visitor = page_for(None)
    visitor.goto(world["url"] + "/")  # the pages follow too: no sign-in needed
    assert "/login" not in visitor.url
    shots(page, "access-on")

    page.get_by_role("button", name="Turn anonymous access off").click()
    page.wait_for_selector("p.notice")
    assert page.inner_text("#anonymous-state") == "off"
    _wait(lambda: anonymous_search() == 401, timeout=10, what="anonymous search to be refused again")
    _wait(lambda: [e.details for e in store.list_audit_events(action="settings.access")[0]]
          == [{"enabled": False}, {"enabled": True}], what="two audit events")

    member = page_for(world["member"])
    assert member.goto(world["url"] + "/settings/access").status == 403
    r = member.request.post(world["url"] + "/settings/access", form={"anonymous": "on", "csrf_token": _csrf(member)},
                            max_redirects=0)
    assert r.status == 403 and store.service_setting(SETTING_KEY) == {"enabled": False}
    assert member.locator("nav.settings-tabs a", has_text="Access").count() == 0


def _session_client(url: str, store, user_id: int) -> tuple[httpx.Client, str]:
    cookie, session = store.create_web_session(user_id, ttl_seconds=3600)
    return httpx.Client(base_url=url, cookies={sessions.SESSION_COOKIE: cookie}, timeout=30), session.csrf_token


def test_forced_on_by_the_environment_cannot_be_switched_off(tmp_path):
    store = Store.open(str(tmp_path / "data"))
    owner = store.create_user("owner@example.com", "Owner")
    app = build_app(lambda: None, get_store=lambda: store, anonymous_access=True, data_dir=str(tmp_path / "data"))
    with serving(app) as url:
        client, token = _session_client(url, store, owner.id)
        page = client.get("/settings/access")
        assert page.status_code == 200 and "forced on by" in page.text and "FORCE_ENABLE_ANONYMOUS_ACCESS=true" in page.text
        assert re.search(r"<button[^>]*disabled", page.text)
        r = client.post("/settings/access", data={"anonymous": "off", "csrf_token": token})
        assert r.status_code == 409 and "remove it" in r.text
        assert store.service_setting(SETTING_KEY) is None  # nothing stored
        assert httpx.get(url + "/api/repos").status_code == 200  # still open
    store.close()


def test_every_replica_follows_the_stored_choice_within_its_cache(tmp_path):
    """Two API replicas (two apps, each with its own store handle on one database)."""
    data = str(tmp_path / "data")
    first, second = Store.open(data), Store.open(data)
    owner = first.create_user("owner@example.com", "Owner")
    apps = [build_app(lambda: None, get_store=lambda s=s: s, data_dir=data) for s in (first, second)]
    with serving(apps[0]) as one, serving(apps[1]) as two:
        assert [httpx.get(u + "/api/repos").status_code for u in (one, two)] == [401, 401]
        client, token = _session_client(one, first, owner.id)
        assert client.post("/settings/access", data={"anonymous": "on", "csrf_token": token}).status_code == 200
        assert httpx.get(one + "/api/repos").status_code == 200  # at once where it was switched
        started = time.monotonic()
        _wait(lambda: httpx.get(two + "/api/repos").status_code == 200, timeout=10, what="the other replica")
        assert time.monotonic() - started < AnonymousAccess(lambda: None, False).ttl_s + 2
    first.close()
    second.close()


@pytest.mark.parametrize("forced, stored, expected", [
    (False, None, False),
    (False, {"enabled": False}, False),
    (False, {"enabled": True}, True),
    (True, None, True),
    (True, {"enabled": False}, True),  # the environment wins
    (False, {"enabled": "yes"}, False),  # only a real true turns it on
    (False, "garbage", False),
])
def test_precedence(tmp_path, forced, stored, expected):
    store = Store.open(str(tmp_path / "data"))
    if stored is not None:
        store.put_service_setting(SETTING_KEY, stored)
    assert AnonymousAccess(lambda: store, forced).enabled() is expected
    store.close()


# ----------------------------------------------------------------------------- MCP

def test_the_mcp_page_makes_a_key_and_snippets_that_work(world, page_for):
    page = page_for(world["member"])
    page.goto(world["url"] + "/settings/mcp")
    mcp_url = world["url"] + "/api/mcp"
    assert page.inner_text("#mcp-url") == mcp_url
    assert page.inner_text("#snippet-claude") == f"claude mcp add --transport http codesearch {mcp_url}"
    assert json.loads(page.inner_text("#snippet-vscode")) == {"servers": {"codesearch": {"type": "http", "url": mcp_url}}}
    assert "OAuth" in page.inner_text("main")
    shots(page, "mcp")

    page.fill("#mcp-key-name", "my editor")
    page.get_by_role("button", name="Create a key and show the snippets").click()
    page.wait_for_selector(".key-created")
    claude = page.inner_text("#snippet-claude-key")
    key = re.search(r'--header "Authorization: Bearer (\S+)"', claude).group(1)
    assert claude == f'claude mcp add --transport http codesearch {mcp_url} --header "Authorization: Bearer {key}"'
    cursor = json.loads(page.inner_text("#snippet-cursor-key"))
    assert cursor == {"mcpServers": {"codesearch": {"url": mcp_url, "headers": {"Authorization": f"Bearer {key}"}}}}
    vscode = json.loads(page.inner_text("#snippet-vscode-key"))
    assert vscode["servers"]["codesearch"] == {"type": "http", "url": mcp_url, "headers": {"Authorization": f"Bearer {key}"}}
    # Codex, OpenCode and Windsurf, each in its own documented format (the three formats: below)
    codex = page.inner_text("#snippet-codex-key")
    assert f"export CODESEARCH_API_KEY={key}" in codex
    assert tomllib.loads(codex.split("\n\n", 1)[1])["mcp_servers"]["codesearch"] == {
        "url": mcp_url, "bearer_token_env_var": "CODESEARCH_API_KEY"}
    assert json.loads(page.inner_text("#snippet-opencode-key"))["mcp"]["codesearch"]["headers"] == {
        "Authorization": f"Bearer {key}"}
    assert json.loads(page.inner_text("#snippet-windsurf-key"))["mcpServers"]["codesearch"]["serverUrl"] == mcp_url
    assert "my editor" in [k.name for k in world["store"].list_api_keys(world["member"]["id"])]
    shots(page, "mcp-key")

    # the copy button puts the snippet on the clipboard, from the keyboard too
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("button", name="Copy the Claude Code snippet").first.focus()
    page.keyboard.press("Enter")
    assert page.evaluate("navigator.clipboard.readText()") == claude

    # what the snippet says works: the MCP endpoint answers the key
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "settings-test", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    r = httpx.post(mcp_url, json=hello, headers={**headers, **cursor["mcpServers"]["codesearch"]["headers"]}, timeout=30)
    assert r.status_code == 200 and "serverInfo" in r.text
    assert httpx.post(mcp_url, json=hello, headers=headers, timeout=30).status_code == 401

    page.goto(world["url"] + "/settings/mcp")  # shown once: opening the page again does not show it
    assert page.locator(".key-created").count() == 0 and key not in page.content()


URL = "https://code.example.com/api/mcp"


@pytest.mark.parametrize("client, key, parse, expected", [
    # Codex: a [mcp_servers.<name>] table of ~/.codex/config.toml; a key only from an environment variable
    ("codex", None, tomllib.loads, {"mcp_servers": {"codesearch": {"url": URL}}}),
    ("codex", "cs_key", lambda t: tomllib.loads(t.split("\n\n", 1)[1]),
     {"mcp_servers": {"codesearch": {"url": URL, "bearer_token_env_var": "CODESEARCH_API_KEY"}}}),
    # OpenCode: opencode.json's "mcp", a server of type "remote"
    ("opencode", None, json.loads, {"$schema": "https://opencode.ai/config.json",
                                    "mcp": {"codesearch": {"type": "remote", "url": URL, "enabled": True}}}),
    ("opencode", "cs_key", json.loads, {"$schema": "https://opencode.ai/config.json", "mcp": {"codesearch": {
        "type": "remote", "url": URL, "enabled": True, "headers": {"Authorization": "Bearer cs_key"}}}}),
    # Windsurf: ~/.codeium/windsurf/mcp_config.json, the URL as "serverUrl"
    ("windsurf", None, json.loads, {"mcpServers": {"codesearch": {"serverUrl": URL}}}),
    ("windsurf", "cs_key", json.loads,
     {"mcpServers": {"codesearch": {"serverUrl": URL, "headers": {"Authorization": "Bearer cs_key"}}}}),
])
def test_snippets_in_each_clients_format(client, key, parse, expected):
    text = mcp_snippets(URL, key)[client]
    assert parse(text) == expected
    if client == "codex" and key:
        assert text.startswith("export CODESEARCH_API_KEY=cs_key")


def test_snippets_quote_what_a_shell_would_split():
    snippets = mcp_snippets("https://code.example.com/a b/api/mcp", "cs_key")
    assert snippets["claude"] == ("claude mcp add --transport http codesearch 'https://code.example.com/a b/api/mcp' "
                                  '--header "Authorization: Bearer cs_key"')


def test_settings_tabs_link_the_new_pages(world, page_for):
    page = page_for(world["owner"])
    page.goto(world["url"] + "/settings/keys")
    for tab, path in (("MCP", "/settings/mcp"), ("Connections", "/settings/connections"), ("Access", "/settings/access")):
        page.locator("nav.settings-tabs a", has_text=re.compile(f"^{tab}$")).click()
        page.wait_for_url(re.compile(re.escape(path) + "$"))
        assert page.locator("nav.settings-tabs a[aria-current=page]").inner_text() == tab
    visitor = page_for(None)
    for path in ("/settings/connections", "/settings/mcp", "/settings/access"):
        visitor.goto(world["url"] + path)
        assert "/login?next=" in visitor.url


# ----------------------------------------------------------------------------- the store's part of Resync

@pytest.mark.parametrize("before, expected", [
    ("none", "a new job, due now"),
    ("pending", "the same job, due now"),
    ("retry waiting", "the same job, pulled forward to now"),
    ("running", "the running job, untouched"),
])
def test_request_connection_sync(tmp_path, before, expected):
    store = Store.open(str(tmp_path / "data"), retry_base_seconds=600)
    store.upsert_connection("c", "github", {"type": "github", "orgs": ["a"]})
    old = None
    if before != "none":
        old = store.enqueue_sync_job("c")
    if before in ("retry waiting", "running"):
        old = store.claim_job(m.SYNC_JOB, "w")
    if before == "retry waiting":
        old = store.fail_job(old.id, "host down", worker_id="w")
        assert old.state == m.PENDING and old.next_attempt_at > store._now()
    job = store.request_connection_sync("c")
    if old is not None:
        assert job.id == old.id, expected
    if before == "running":
        assert job.state == m.IN_PROGRESS
    else:
        assert job.state == m.PENDING and job.next_attempt_at <= store._now(), expected
        assert store.claim_job(m.SYNC_JOB, "w2").id == job.id  # a sync worker takes it at once
    with pytest.raises(NotFound):
        store.request_connection_sync("no such connection")
    store.close()
