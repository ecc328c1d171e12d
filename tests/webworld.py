"""Fixtures for the web UI tests: a real headless Chromium (Debian's `chromium-headless-shell`, driven by
Playwright for Python) against the Serve app on 127.0.0.1 over the `tests.mcpworld` repos.

    from tests.webworld import browser, web  # noqa: F401  (pytest fixtures)

    def test_x(web, page_for):
        page = page_for(web["owner"])        # a fresh browser context, signed in
        page.goto(web["url"] + "/")

`web` deploys the app under the route prefix ``/web`` (so every link must honour `root`) with
anonymous access off, an OWNER (`web["owner"]`) and a MEMBER (`web["member"]`), each
``{"email", "password"}``, created with `codesearch.accounts.hash_password`. Screenshots go to
``tests/output/screenshots/`` (git-ignored): `shot(page, name)`.
"""

from __future__ import annotations

import os

import pytest

from tests.chromium import launch_chromium
from tests.mcpworld import build

HERE = os.path.dirname(os.path.abspath(__file__))
SCREENSHOTS = os.path.join(HERE, "output", "screenshots")
PREFIX = "web-test-searcher"


@pytest.fixture(scope="module")
def browser():
    """Per module: Playwright's sync API keeps an event loop running while it is open, and later
    tests that call `asyncio.run` (the MCP client) must not find one."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch_chromium(p)
        yield b
        b.close()


@pytest.fixture(scope="module")
def web(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application
    from codesearch.accounts import hash_password

    w = build(str(tmp_path_factory.mktemp("web")))
    store = w["store"]
    owner = store.find_user_by_email("owner@example.com")  # build() made it, the first user: OWNER
    store.set_user_password(owner.id, hash_password("owner-pass-1"))
    member = store.create_user("member@example.com", "Member", password_hash=hash_password("member-pass-1"))
    pool = SearcherPool.create(w["index"], 2, name_prefix=PREFIX)
    serve.run(search_application(PREFIX, len(pool.actors), anonymous_access=False, data_dir=w["data"],
                                 public_url=f"{serve_url}/web"), name="web-test", route_prefix="/web")
    w.update(url=f"{serve_url}/web", serve_url=serve_url, pool=pool,
             owner={"email": "owner@example.com", "password": "owner-pass-1", "id": owner.id},
             member={"email": "member@example.com", "password": "member-pass-1", "id": member.id})
    yield w
    serve.delete("web-test")
    pool.close()
    store.close()


@pytest.fixture
def page_for(browser, web):
    """`page_for(account or None, sign_in=False)`: a page in a fresh browser context, signed in as
    `account` (`signed_in_context`). `sign_in=True` always signs in through the form: a new
    session, for tests that look at what a sign-in does."""
    contexts = []

    def make(account=None, sign_in=False):
        ctx, page = signed_in_context(browser, web, account, sign_in=sign_in, viewport={"width": 1280, "height": 900})
        contexts.append(ctx)
        page.set_default_timeout(15_000)
        return page

    yield make
    for c in contexts:
        c.close()


def signed_in_context(browser, web, account, sign_in: bool = False, **options):
    """A new browser context (Playwright's `options`: viewport, colour scheme…) and its page,
    signed in as `account` (none: signed out). The first context of an account in a `web` world
    signs in through the form; later ones start with that session's cookies while the service
    still takes them (a sign-out or a deactivation ends it: the next one signs in again), which
    saves each test a sign-in (two page loads and a password hash). `sign_in=True` always goes
    through the form."""
    signed_in = web.setdefault("signed_in", {})  # per `web` world, so per module: email -> its cookies
    state = signed_in.get(account["email"]) if account and not sign_in else None
    ctx = browser.new_context(storage_state=state, **options)
    if state is not None and not _session_holds(ctx, web):
        ctx.clear_cookies()
        state = None
    page = ctx.new_page()
    if account and state is None:
        login(page, web, account)
        # the cookies only: what a test left in local storage (recent queries) stays its own
        signed_in[account["email"]] = {"cookies": ctx.storage_state()["cookies"], "origins": []}
    return ctx, page


def index_local_repo(web, connection: str, name: str, root: str, display_name: str) -> int:
    """Add the git repository at `root` to the `web` world as `name` of a new `git` connection,
    index it into the world's index and mark it indexed (the searchers refresh later). Its id."""
    store = web["store"]
    store.upsert_connection(connection, "git", {"type": "git", "url": "file://" + root})
    ids = store.upsert_repos(connection, [dict(name=name, display_name=display_name, code_host_type="genericGitHost",
                                               clone_url="file://" + root, local_path=root, default_branch="main")]).ids
    return index_stored_repo(web, store.get_repo(ids[name]), root)


def index_stored_repo(web, row, root: str) -> int:
    """Index the git repository at `root`, already in the world's store as `row`, into the world's
    index and mark it indexed (the searchers refresh later). Its id."""
    from codesearch.index.builder import IndexSettings, index_source
    from codesearch.index.sources import GitSource
    from codesearch.store.models import INDEXED
    from codesearch.sync import repo_info

    source = GitSource(root, repo=repo_info(row, row.id))
    try:
        index_source(source, web["index"], IndexSettings())
        revisions = {r.ref: r.commit for r in source.revisions}
    finally:
        source.close()
    web["store"].update_repo_index_status(row.id, INDEXED, revisions=revisions)
    return row.id


def _session_holds(ctx, web) -> bool:
    """Whether the service still takes the session cookie of `ctx`: its home page answers instead of
    sending the browser to sign in."""
    return ctx.request.get(web["url"] + "/", max_redirects=0).status == 200


def login(page, web, account) -> None:
    page.goto(web["url"] + "/login")
    page.fill("input[name=email]", account["email"])
    page.fill("input[name=password]", account["password"])
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login" not in url)


def shot(page, name: str) -> str:
    os.makedirs(SCREENSHOTS, exist_ok=True)
    path = os.path.join(SCREENSHOTS, f"{name}.png")
    page.screenshot(path=path, full_page=True)
    return path
