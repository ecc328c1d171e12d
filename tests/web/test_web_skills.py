"""Ask skills and search assist (issue 29, items 6 and 9), end to end against one Serve app.

One world under ``/skillsweb`` (anonymous access on) over the `tests.mcpworld` repositories: the
owner and two members (alice, bob), each with a password and an API key, and the scripted
language model of `tests.fakellm` on 127.0.0.1. It covers:

- the MCP tools `create_skill`, `update_skill`, `list_skills` through the official MCP SDK client
  (Sourcebot 5.1.8's names, arguments and answers; who may see and change what);
- ``GET /api/skills`` and a question starting with ``/command`` (the model reads the skill's
  instructions; the chat keeps the question as typed);
- ``POST /api/search_assist`` (the model's query, checked by our parser);
- the pages in Chromium: Settings → Skills (create, edit, share, delete; another member's view),
  the slash-command list of the Ask box, search assist on the search page; axe at 360 and 1400 px
  in both themes.

The MCP client runs its event loop on a thread of its own: the browser's sync API keeps one
running on this thread once opened.
"""

from __future__ import annotations

import concurrent.futures
import json
import time

import httpx
import pytest
from playwright.sync_api import expect

from codesearch.accounts import hash_password
from tests.a11y import audit, describe
from tests.conftest import TEST_LLM_TOKEN, TEST_LLM_TOKEN_ENV
from tests.fakellm import FakeModelServer
from tests.mcpclient import McpClient
from tests.mcpworld import DEMO, build
from tests.webworld import browser, login  # noqa: F401  (pytest fixture)

PREFIX = "skills-web-searcher"


def skill(slug, **over):
    return {"name": f"Skill {slug}", "slug": slug, "description": f"when {slug}", "instructions": f"Do {slug}.",
            **over}


@pytest.fixture(scope="module")
def world(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application

    w = build(str(tmp_path_factory.mktemp("skillsweb")))
    store = w["store"]
    owner = store.find_user_by_email("owner@example.com")
    store.set_user_password(owner.id, hash_password("owner-pass-1"))
    accounts = {"owner": {"email": "owner@example.com", "password": "owner-pass-1", "id": owner.id, "key": w["key"]}}
    for name in ("alice", "bob"):
        user = store.create_user(f"{name}@example.com", name.title(), password_hash=hash_password(f"{name}-pass-1"))
        accounts[name] = {"email": user.email, "password": f"{name}-pass-1", "id": user.id,
                          "key": store.create_api_key(user.id, "skills tests")[1]}
    accounts["scoped"] = {"key": store.create_scoped_access_token(accounts["alice"]["id"], [w["ids"][DEMO]])[1]}
    fake = FakeModelServer(api_key=TEST_LLM_TOKEN).start()
    models = [{"provider": "openai-compatible", "model": "scripted-1", "displayName": "Scripted",
               "baseUrl": fake.base_url + "/v1", "token": {"env": TEST_LLM_TOKEN_ENV}}]
    store.replace_language_models(models)
    pool = SearcherPool.create(w["index"], 1, name_prefix=PREFIX)
    url = f"{serve_url}/skillsweb"
    serve.run(search_application(PREFIX, len(pool.actors), anonymous_access=True, data_dir=w["data"],
                                 public_url=url), name="skills-web", route_prefix="/skillsweb")
    w.update(url=url, fake=fake, models=models, **accounts)
    yield w
    serve.delete("skills-web")
    pool.close()
    fake.stop()
    store.close()


@pytest.fixture(autouse=True)
def fresh(world):
    world["fake"].reset()
    world["fake"].script.clear()
    world["fake"].requests.clear()
    for s in list(world["store"].list_skills(world["alice"]["id"])) + world["store"].list_skills(world["bob"]["id"]):
        try:
            world["store"].delete_skill(s.id, s.user_id, True)
        except Exception:
            pass  # listed twice (a shared skill): gone already
    yield


def http(world, who: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {world[who]['key']}"} if who else {}
    return httpx.Client(base_url=world["url"], headers=headers, timeout=60)


_pool = concurrent.futures.ThreadPoolExecutor(1)


def mcp(world, who: str | None, tool: str, arguments: dict | None = None):
    """Call `tool` with the MCP SDK client as `who` (None: anonymous), on the client's own thread."""
    client = McpClient(world["url"] + "/api/mcp", {"Authorization": f"Bearer {world[who]['key']}"} if who else {})
    if tool == "tools/list":
        return _pool.submit(client.list_tools).result()
    return _pool.submit(client.call, tool, arguments or {}).result()


# ----------------------------------------------------------------------------- MCP tools


def test_the_skill_tools_are_listed_with_sourcebots_arguments_and_hints(world):
    tools = {t.name: t for t in mcp(world, "alice", "tools/list")}
    # (tool, required, optional, read-only, destructive, idempotent)
    table = [
        ("create_skill", ["name", "slug", "description", "instructions"], [], False, False, False),
        ("update_skill", ["slug", "scope"], ["name", "newSlug", "description", "instructions"], False, True, True),
        ("list_skills", [], ["scope"], True, False, True),
    ]
    for name, required, optional, read_only, destructive, idempotent in table:
        schema = tools[name].input_schema
        assert sorted(schema.get("required", [])) == sorted(required), name
        assert set(schema["properties"]) == set(required) | set(optional), name
        hints = tools[name].annotations
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (
            read_only, destructive, idempotent), name
    assert tools["update_skill"].input_schema["properties"]["scope"]["enum"] == ["personal", "shared"]


def test_create_list_and_update_as_sourcebot_answers(world):
    made = mcp(world, "alice", "create_skill", skill("Review PR"))
    assert not made.is_error, made.text
    body = json.loads(made.text)
    assert set(body) == {"id", "slug", "name", "description", "enabled", "createdAt", "url"}
    assert (body["slug"], body["enabled"]) == ("review-pr", True)  # the command is normalized
    assert body["url"] == f"{world['url']}/settings/skills?skill={body['id']}"
    assert body["createdAt"].endswith("Z")

    listed = json.loads(mcp(world, "alice", "list_skills").text)["skills"]
    assert listed == [{"id": body["id"], "slug": "review-pr", "name": "Skill Review PR", "description": "when Review PR",
                       "scope": "personal", "enabled": True, "isSynced": False, "canEdit": True}]

    changed = mcp(world, "alice", "update_skill", {"slug": "/review-pr", "scope": "personal", "newSlug": "review",
                                                    "instructions": "Check the tests first."})
    assert not changed.is_error, changed.text
    body = json.loads(changed.text)
    assert set(body) == {"id", "slug", "name", "description", "scope", "enabled", "updatedAt", "url"}
    assert (body["slug"], body["name"], body["scope"]) == ("review", "Skill Review PR", "personal")
    assert world["store"].find_skill(world["alice"]["id"], "personal", "review").instructions == "Check the tests first."


@pytest.mark.parametrize("who, tool, arguments, error", [
    # (caller, tool, arguments, the error the caller reads)
    (None, "list_skills", {}, "Authentication is required to list skills."),
    (None, "create_skill", skill("x"), "Authentication is required to create skills."),
    ("scoped", "list_skills", {}, "Repository-scoped access tokens cannot manage skills."),
    ("alice", "create_skill", skill("dup"), "A skill with command /dup already exists."),
    ("alice", "create_skill", skill("bad", name="", description="d" * 501),
     "name: Name is required. description: must be 500 characters or fewer"),
    ("bob", "update_skill", {"slug": "dup", "scope": "personal", "name": "mine now"}, "personal skill 'dup' not found"),
    ("bob", "update_skill", {"slug": "team", "scope": "shared", "name": "mine now"},
     "You do not have sufficient permissions to manage this skill."),
    ("owner", "update_skill", {"slug": "team", "scope": "shared", "name": "mine now"},  # owners: on the page only
     "You do not have sufficient permissions to manage this skill."),
])
def test_who_may_do_what_with_the_tools(world, who, tool, arguments, error):
    world["store"].create_skill(world["alice"]["id"], "personal", skill("dup"))
    world["store"].create_skill(world["alice"]["id"], "shared", skill("team"))
    res = mcp(world, who, tool, arguments)
    assert res.is_error and error in res.text, res.text
    assert world["store"].find_skill(world["alice"]["id"], "shared", "team").name == "Skill team"


def test_members_see_their_own_and_the_shared_skills(world):
    store, alice, bob = world["store"], world["alice"]["id"], world["bob"]["id"]
    store.create_skill(alice, "personal", skill("alice-only"))
    store.create_skill(alice, "shared", skill("team"))
    store.create_skill(bob, "personal", skill("bob-only"))
    # (caller, list_skills scope, (slug, scope, canEdit) seen)
    table = [
        ("alice", None, [("alice-only", "personal", True), ("team", "shared", True)]),
        ("bob", None, [("bob-only", "personal", True), ("team", "shared", False)]),
        ("bob", "shared", [("team", "shared", False)]),
        ("owner", "personal", []),
    ]
    for who, scope, seen in table:
        rows = json.loads(mcp(world, who, "list_skills", {"scope": scope} if scope else {}).text)["skills"]
        assert [(r["slug"], r["scope"], r["canEdit"]) for r in rows] == seen, who
        assert all("instructions" not in r for r in rows)
    # the Ask box's list: the same skills, never the instructions; a visitor gets the shared ones
    for who, slugs in (("alice", ["alice-only", "team"]), ("bob", ["bob-only", "team"]), (None, ["team"])):
        with http(world, who) as c:
            got = c.get("/api/skills").json()["skills"]
        assert [s["slug"] for s in got] == slugs and all(set(s) == {"slug", "name", "description", "scope"} for s in got)


# ----------------------------------------------------------------------------- running a skill


def test_a_question_starting_with_a_command_runs_the_skill(world):
    fake, store = world["fake"], world["store"]
    store.create_skill(world["alice"]["id"], "personal", skill("review", instructions="List every TODO first."))
    seen = []

    def answer(messages):
        seen.append(messages[-1]["content"])
        return "done"

    fake.add(answer, answer, answer)
    # (caller, question, what the model reads: the skill's instructions or not)
    table = [
        ("alice", "/review src/app.py please", True),
        ("bob", "/review src/app.py please", False),  # alice's personal skill: not bob's
        ("alice", "/etc/hosts is read where?", False),  # no such skill: left as typed
    ]
    for who, question, applied in table:
        with http(world, who) as c:
            r = c.post("/api/chat/blocking", json={"query": question})
        assert r.status_code == 200, r.text
        prompt = seen[-1]
        assert ("List every TODO first." in prompt) is applied, (who, prompt)
        assert prompt.endswith("src/app.py please") or not applied
        assert store.get_chat(r.json()["chatId"]).question == question  # kept as typed


# ----------------------------------------------------------------------------- search assist


@pytest.mark.parametrize("model_says, query, valid, error", [
    ("```\nlang:python retry\n```", "lang:python retry", True, None),
    ("query: `file:\\.go$ sym:^Server$`", "file:\\.go$ sym:^Server$", True, None),
    ("file:(pr retry", "file:(pr retry", False, "file: invalid regular expression"),
    ("archived:maybe retry\nThis finds retries.", "archived:maybe retry", False, "expected yes, no or only"),
])
def test_search_assist_answers_a_checked_query(world, model_says, query, valid, error):
    world["fake"].add(model_says)
    with http(world, "alice") as c:
        r = c.post("/api/search_assist", json={"prompt": "python code that retries"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["query"], body["isValid"]) == (query, valid)
    assert (body["error"] is None) if valid else (error in body["error"].lower()), body["error"]
    assert body["model"] == {"provider": "openai-compatible", "model": "scripted-1", "displayName": "Scripted"}
    sent = world["fake"].bodies[0]["messages"]
    assert sent[0]["role"] == "system" and "lang:NAME" in sent[0]["content"]
    assert sent[-1] == {"role": "user", "content": "python code that retries"}


@pytest.mark.parametrize("body, status, says", [
    ({"prompt": ""}, 400, "prompt"),
    ({"prompt": "x" * 2001}, 400, "prompt"),
    ({"prompt": "x", "languageModel": {"provider": "openai", "model": "nope"}}, 400, "openai/nope is not configured"),
    ({}, 400, "prompt"),
])
def test_search_assist_refuses_bad_requests(world, body, status, says):
    with http(world, "alice") as c:
        r = c.post("/api/search_assist", json=body)
    assert r.status_code == status and says in r.json()["message"], r.text
    assert world["fake"].requests == []


def test_search_assist_without_a_model_says_so(world):
    world["store"].replace_language_models([])
    try:
        with http(world, None) as c:
            r = c.post("/api/search_assist", json={"prompt": "anything"})
        assert r.status_code == 400 and "No language models are configured" in r.json()["message"]
    finally:
        world["store"].replace_language_models(world["models"])


# ----------------------------------------------------------------------------- the pages


@pytest.fixture
def page_for(browser, world):  # noqa: F811
    contexts = []

    def make(account=None, width=1400, dark=False):
        ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme="dark" if dark else "light")
        contexts.append(ctx)
        page = ctx.new_page()
        page.set_default_timeout(20_000)
        if account:
            login(page, world, account)
        return page

    yield make
    for c in contexts:
        c.close()


def _axe(page, what):
    problems = audit(page)
    assert not problems, f"{what}:\n{describe(problems)}"


def _fill(page, prefix, values):
    for field, value in values.items():
        page.fill(f"#{prefix}-{field}", value)


def test_the_settings_page_creates_edits_shares_and_deletes(world, page_for):
    page = page_for(world["alice"])
    page.goto(world["url"] + "/settings/skills")
    assert page.locator("nav.settings-tabs a[aria-current=page]").inner_text() == "Skills"
    _fill(page, "new", {"name": "Review", "slug": "Review It", "description": "Reviews", "instructions": "Check."})
    page.get_by_role("button", name="Create skill").click()
    page.wait_for_selector("p.notice")
    made = world["store"].find_skill(world["alice"]["id"], "personal", "review-it")
    assert page.locator(f"tr[data-skill-id='{made.id}']").count() == 1

    # a bad field re-shows the form with the problem and what was typed
    _fill(page, "new", {"name": "x" * 5, "slug": "!!!", "description": "d", "instructions": "i"})
    page.get_by_role("button", name="Create skill").click()
    assert "slug: Command is required." in page.locator("section[aria-labelledby=skill-new-h] .form-error").inner_text()
    assert page.input_value("#new-name") == "xxxxx"

    # edit it and share it
    page.goto(f"{world['url']}/settings/skills?skill={made.id}")
    page.fill("#edit-instructions", "Check the tests.")
    page.check("input[name=scope][value=shared] >> nth=0")
    page.get_by_role("button", name="Save").click()
    page.wait_for_selector("p.notice")
    shared = world["store"].find_skill(world["alice"]["id"], "shared", "review-it")
    assert (shared.id, shared.instructions) == (made.id, "Check the tests.")
    assert _skill_actions(world, 2) == ["skill.create", "skill.update"]

    # bob sees it shared, read-only; alice's personal skill is not found for him
    mine = world["store"].create_skill(world["alice"]["id"], "personal", skill("secret"))
    bob = page_for(world["bob"])
    bob.goto(f"{world['url']}/settings/skills?skill={shared.id}")
    assert bob.locator(".skill-instructions").inner_text() == "Check the tests."
    assert bob.locator("#edit-name").count() == 0 and bob.locator(f"tr[data-skill-id='{shared.id}'] .danger").count() == 0
    r = bob.goto(f"{world['url']}/settings/skills?skill={mine.id}")
    assert r.status == 404 and "secret" not in bob.locator("main").inner_text()
    csrf = bob.locator("input[name=csrf_token]").first.input_value()
    for path, status in ((f"/settings/skills/{shared.id}", 403), (f"/settings/skills/{mine.id}/delete", 404),
                         (f"/settings/skills/{shared.id}/delete", 403)):
        resp = bob.request.post(world["url"] + path, form={"csrf_token": csrf, **skill("x"), "scope": "shared"})
        assert resp.status == status, path
    assert world["store"].get_skill(shared.id, world["bob"]["id"]).slug == "review-it"

    # alice deletes it, after confirming
    page.goto(world["url"] + "/settings/skills")
    page.once("dialog", lambda d: d.accept())
    page.locator(f"tr[data-skill-id='{shared.id}'] button.danger").click()
    page.wait_for_selector("p.notice")
    assert page.locator(f"tr[data-skill-id='{shared.id}']").count() == 0
    assert _skill_actions(world, 3) == ["skill.create", "skill.update", "skill.delete"]


def _skill_actions(world, count):
    """The actions of the audit log's skill events, oldest first, once there are `count` (the log
    is written in the background)."""
    deadline = time.monotonic() + 10
    while True:
        events, total = world["store"].list_audit_events(action="skill.", per_page=50)
        if total >= count or time.monotonic() > deadline:
            return [e.action for e in reversed(events)]
        time.sleep(0.05)


def test_the_skill_pages_pass_axe_at_360_and_1400_px_in_both_themes(world, page_for):
    store = world["store"]
    opened = store.create_skill(world["alice"]["id"], "personal", skill("review"))
    store.create_skill(world["bob"]["id"], "shared", skill("team"))
    page = page_for(world["alice"])
    for width in (360, 1400):
        for scheme in ("light", "dark"):
            page.set_viewport_size({"width": width, "height": 900})
            page.emulate_media(color_scheme=scheme)
            view = f"at {width}px, {scheme}"
            page.goto(f"{world['url']}/settings/skills?skill={opened.id}")
            _axe(page, f"settings/skills {view}")
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), view
            page.goto(world["url"] + "/chat")  # the slash-command list, open
            page.locator("#ask-q").press_sequentially("/")
            page.wait_for_selector("#skill-menu-0 li")
            _axe(page, f"the slash-command list {view}")
            page.goto(world["url"] + "/search?q=handle_request")  # search assist, open
            page.wait_for_selector("#search-assist:not([hidden])")
            page.locator("#search-assist summary").click()
            _axe(page, f"search assist {view}")


def test_the_ask_box_lists_commands_and_the_keyboard_picks_one(world, page_for):
    store = world["store"]
    store.create_skill(world["alice"]["id"], "personal", skill("review", name="Review a change"))
    store.create_skill(world["bob"]["id"], "shared", skill("release", name="Release notes"))
    store.create_skill(world["bob"]["id"], "personal", skill("bobs"))
    page = page_for(world["alice"])
    page.goto(world["url"] + "/chat")
    box = page.locator("#ask-q")
    box.press_sequentially("/re")
    page.wait_for_selector("#skill-menu-0 li")
    items = page.locator("#skill-menu-0 [role=option]")
    assert [t.split()[0] for t in items.all_inner_texts()] == ["/review", "/release"]  # personal first, no bob's
    assert box.get_attribute("aria-activedescendant") == "skill-menu-0-0"
    box.press("ArrowDown")
    assert box.get_attribute("aria-activedescendant") == "skill-menu-0-1"
    box.press("Enter")  # picks: does not send the question
    assert box.input_value() == "/release " and page.locator("#skill-menu-0").is_hidden()
    assert world["fake"].requests == []
    box.fill("")
    box.press_sequentially("/zzz")
    assert page.locator("#skill-menu-0").is_hidden()
    # the home page's question box has the list too
    page.goto(world["url"] + "/")
    page.locator("#askbox-q").press_sequentially("/")
    page.wait_for_selector("#skill-menu-1 li")
    page.keyboard.press("Escape")
    assert page.locator("#skill-menu-1").is_hidden()


def test_search_assist_puts_the_query_in_the_search_box(world, page_for):
    fake = world["fake"]
    fake.add("lang:python handle_request", "file:(broken")
    page = page_for(None)
    page.goto(world["url"] + "/search?q=x")
    page.wait_for_selector("#search-assist:not([hidden])")
    page.locator("#search-assist summary").click()
    page.fill("#sa-prompt", "python request handlers")
    page.get_by_role("button", name="Generate query").click()
    q = page.locator("form.searchform input[name=q]")
    expect(q).to_have_value("lang:python handle_request")
    assert "Query ready" in page.inner_text("#sa-result")
    assert page.url.endswith("/search?q=x")  # not run: the user checks it and searches
    page.get_by_role("button", name="Generate query").click()
    page.wait_for_selector("#sa-result.sa-error")
    assert q.input_value() == "file:(broken" and "does not parse" in page.inner_text("#sa-result")
