"""Chat management in Ask (issue 29, items 7 and 8): rename, delete, duplicate, share with named
members, ``@``-mentioned files in the question's context, Mermaid diagrams drawn safely, and the
model's token use under each answer.

One world, served by Ray Serve under ``/askchats`` with anonymous access and the permission rule
on, over the `tests.mcpworld` repos: ``git.local/demo`` everyone reads; ``github.com/acme/widgets``
is in a connection that enforces permissions and nobody has an account there, so it is hidden
from everyone. Three accounts: the owner (who asks), ``bob`` and ``cy`` (members). The language
model is `tests.fakellm` on 127.0.0.1, scripted per test.
"""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.a11y import audit, describe
from tests.audited import audited
from tests.conftest import TEST_LLM_TOKEN, TEST_LLM_TOKEN_ENV
from tests.fakellm import FakeModelServer
from tests.mcpworld import DEMO, WIDGETS, build
from tests.webworld import browser, login  # noqa: F401  (pytest fixture)

PREFIX = "ask-chats-searcher"
#: Anthropic's stream reports token use (an OpenAI-compatible server is not asked for it: docs/ask.md#token-use)
MODEL = {"provider": "anthropic", "model": "claude-fake", "displayName": "Scripted"}
#: An answer whose diagram tries every way Mermaid has of running the model's text as script.
HOSTILE_DIAGRAM = """Here is the flow.

```mermaid
%%{init: {"securityLevel": "loose", "flowchart": {"htmlLabels": true}}}%%
graph TD
  A["<img src=x onerror=window.__pwned=11;alert(11)>"] --> B["<script>window.__pwned=12;alert(12)</script>"]
  B --> C["<a href='javascript:window.__pwned=13'>link</a>"]
  C --> D[Plain]
  click A callback "runs window.callback"
  click B "javascript:window.__pwned=14;alert(14)"
  click C href "javascript:window.__pwned=15"
  click D call callback()
```

And a plain one:

```mermaid
graph LR
  Client --> Server
```
"""


@pytest.fixture(scope="module")
def world(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch import permissions
    from codesearch.accounts import hash_password
    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application

    base = str(tmp_path_factory.mktemp("askchats"))
    w = build(base)
    store = w["store"]
    rule = permissions.ConnectionRule
    permissions.write_settings(store, permissions.PermissionSettings(enabled=True, connections={
        "local": rule(False, False, None), "acme": rule(True, True, "github:https://github.com")}))
    accounts = {}
    owner = store.find_user_by_email("owner@example.com")
    store.set_user_password(owner.id, hash_password("owner-pass-1"))
    accounts["owner"] = {"email": owner.email, "password": "owner-pass-1", "id": owner.id, "key": w["key"]}
    for name in ("bob", "cy"):
        user = store.create_user(f"{name}@example.com", name.title(), password_hash=hash_password(f"{name}-pass-1"))
        accounts[name] = {"email": user.email, "password": f"{name}-pass-1", "id": user.id,
                          "key": store.create_api_key(user.id, "chat tests")[1]}
    fake = FakeModelServer(api_key=TEST_LLM_TOKEN).start()
    store.replace_language_models([{**MODEL, "baseUrl": fake.base_url, "token": {"env": TEST_LLM_TOKEN_ENV}}])
    pool = SearcherPool.create(w["index"], 1, name_prefix=PREFIX)
    url = f"{serve_url}/askchats"
    serve.run(search_application(PREFIX, len(pool.actors), anonymous_access=True, data_dir=w["data"],
                                 public_url=url), name="ask-chats", route_prefix="/askchats")
    w.update(url=url, fake=fake, pool=pool, **accounts)
    yield w
    serve.delete("ask-chats")
    pool.close()
    fake.stop()
    store.close()


@pytest.fixture(autouse=True)
def fresh_script(world):
    world["fake"].reset()
    world["fake"].script.clear()
    world["fake"].requests.clear()
    yield


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


def api(world, method: str, path: str, who: str | None, body: dict | None = None) -> httpx.Response:
    headers = {"Accept": "application/json"}
    if who:
        headers["Authorization"] = f"Bearer {world[who]['key']}"
    return httpx.request(method, world["url"] + path, json=body, headers=headers, timeout=60)


def owners_chat(world, question="Where do requests go?", **kw):
    return world["store"].create_chat(question, f"To `{DEMO}/src/app.py:4`.", user_id=world["owner"]["id"],
                                      model=MODEL, **kw)


# ----------------------------------------------------------------------------- over HTTP: who may do what


def test_who_may_rename_delete_share_and_duplicate_a_chat(world):
    store = world["store"]
    chat = owners_chat(world)
    cid = chat.id
    # (who, method, path, body) -> status: nobody but the chat's user manages it; 404, so it does not leak
    refused = [
        ("bob", "PUT", f"/api/chat/{cid}/name", {"name": "Mine now"}),
        ("bob", "DELETE", f"/api/chat/{cid}", None),
        ("bob", "GET", f"/api/chat/{cid}/members", None),
        ("bob", "POST", f"/api/chat/{cid}/members", {"email": "cy@example.com"}),
        ("bob", "DELETE", f"/api/chat/{cid}/members/{world['cy']['id']}", None),
        ("bob", "POST", f"/api/chat/{cid}/duplicate", {}),  # bob may not read it, so not copy it either
        ("bob", "GET", f"/chat/{cid}", None),
        (None, "PUT", f"/api/chat/{cid}/name", {"name": "x"}),
        (None, "GET", f"/chat/{cid}", None),
    ]
    for who, method, path, body in refused:
        r = api(world, method, path, who, body)
        assert r.status_code == 404 and r.json()["errorCode"] == "NOT_FOUND", (who, method, path, r.text)
    assert store.get_chat(cid).name is None and store.chat_members(cid) == []

    # bad input says what is wrong, and where
    bad = [
        (f"/api/chat/{cid}/name", "PUT", {"name": "   "}, 400, "name: the name is empty"),
        (f"/api/chat/{cid}/name", "PUT", {"name": "x" * 201}, 400, "at most 200"),
        (f"/api/chat/{cid}/name", "PUT", {"title": "x"}, 400, "title"),
        (f"/api/chat/{cid}/members", "POST", {"email": "nobody@example.com"}, 404, "nobody@example.com"),
        (f"/api/chat/{cid}/members", "POST", {"email": "owner@example.com"}, 400, "that is you"),
        (f"/api/chat/{cid}/members/{world['cy']['id']}", "DELETE", None, 404, "member of this chat"),
    ]
    for path, method, body, status, message in bad:
        r = api(world, method, path, "owner", body)
        assert r.status_code == status and message in r.text, (path, body, r.text)

    # the owner renames and shares it with bob; bob reads it, cy still does not
    assert api(world, "PUT", f"/api/chat/{cid}/name", "owner", {"name": " Request  flow "}).json() == {
        "chatId": cid, "name": "Request flow"}
    members = api(world, "POST", f"/api/chat/{cid}/members", "owner", {"email": "Bob@Example.com"}).json()["members"]
    assert members == [{"id": world["bob"]["id"], "email": "bob@example.com", "name": "Bob"}]
    assert api(world, "GET", f"/chat/{cid}", "bob").status_code == 200
    assert api(world, "GET", f"/chat/{cid}", "cy").status_code == 404
    # a member reads, nothing more: no follow-up, rename, delete or sharing on
    follow_up = {"id": cid, "messages": [{"role": "user", "parts": [{"type": "text", "text": "And?"}]}]}
    assert api(world, "POST", "/api/chat", "bob", follow_up).status_code == 404
    assert api(world, "PUT", f"/api/chat/{cid}/name", "bob", {"name": "x"}).status_code == 404
    assert api(world, "POST", f"/api/chat/{cid}/members", "bob", {"email": "cy@example.com"}).status_code == 404
    assert api(world, "DELETE", f"/api/chat/{cid}", "bob").status_code == 404
    # ... and duplicates: a private chat of bob's, shared with nobody
    copy = api(world, "POST", f"/api/chat/{cid}/duplicate", "bob", {}).json()
    assert copy["name"] == "Copy of Request flow" and copy["chatUrl"].endswith("/chat/" + copy["chatId"])
    stored = store.get_chat(copy["chatId"])
    assert (stored.user_id, stored.visibility, store.chat_members(stored.id)) == (world["bob"]["id"], "PRIVATE", [])
    assert api(world, "GET", f"/chat/{copy['chatId']}", "owner").status_code == 404
    assert api(world, "POST", f"/api/chat/{cid}/duplicate", None, {}).status_code == 401  # visitors own nothing

    # a removed share takes effect at once
    assert api(world, "DELETE", f"/api/chat/{cid}/members/{world['bob']['id']}", "owner").json() == {"members": []}
    assert api(world, "GET", f"/chat/{cid}", "bob").status_code == 404
    # deleting takes it away from everyone
    api(world, "POST", f"/api/chat/{cid}/members", "owner", {"email": "cy@example.com"})
    assert api(world, "DELETE", f"/api/chat/{cid}", "owner").json() == {"chatId": cid, "deleted": True}
    assert api(world, "GET", f"/chat/{cid}", "owner").status_code == 404
    assert api(world, "GET", f"/chat/{cid}", "cy").status_code == 404

    # every action is audited
    for action, details in [("chat.rename", {"name": "Request flow"}), ("chat.member.add", {"member": "bob@example.com"}),
                            ("chat.member.add", {"member": "cy@example.com"}),
                            ("chat.member.remove", {"member": world["bob"]["id"]}),
                            ("chat.duplicate", {"copy": copy["chatId"]}), ("chat.delete", {}),
                            ("chat.read", {"role": "member"})]:
        assert audited(store, action, cid, details=details), (action, details)


def test_a_mentioned_file_goes_to_the_model_as_the_caller_may_read_it(world):
    fake = world["fake"]

    def question(*files):
        parts = [{"type": "text", "text": "What does @src/app.py do?"}]
        parts += [{"type": "data-source", "data": {"type": "file", "repo": r, "path": p, "name": p, "revision": ""}}
                  for r, p in files]
        return {"messages": [{"role": "user", "parts": parts}]}

    fake.add("It serves requests.")
    r = api(world, "POST", "/api/chat", "bob", question((DEMO, "src/app.py")))
    assert r.status_code == 200 and "It serves requests." in r.text
    system = fake.bodies[-1]["system"]
    assert f'<file repo="{DEMO}" path="src/app.py" ref="main">' in system and "def handle_request" in system
    assert audited(world["store"], "chat.ask", "What does @src/app.py do?", details={"files": f"{DEMO}/src/app.py"})
    # refused before anything is asked: a hidden repository answers as an unknown one
    asked = len(fake.requests)
    for files, status, code in [
        ([(WIDGETS, "README.md")], 404, "REPOSITORY_NOT_FOUND"),
        ([(DEMO, "no/such.py")], 404, "FILE_NOT_FOUND"),
        ([(DEMO, f"f{i}.py") for i in range(6)], 400, "INVALID_REQUEST_BODY"),
    ]:
        r = api(world, "POST", "/api/chat", "bob", question(*files))
        assert (r.status_code, r.json()["errorCode"]) == (status, code), (files, r.text)
    r = api(world, "POST", "/api/chat", "bob", {"messages": [{"role": "user", "parts": [
        {"type": "text", "text": "q"}, {"type": "data-source", "data": {"type": "file", "repo": DEMO}}]}]})
    assert r.status_code == 400 and "messages[-1].parts[1].data: repo and path" in r.json()["message"]
    assert len(fake.requests) == asked


# ----------------------------------------------------------------------------- in the browser


def test_managing_a_chat_from_its_page(world, page_for):
    store = world["store"]
    chat = owners_chat(world, "How is a request handled?")
    owner = page_for(world["owner"])
    owner.goto(f"{world['url']}/chat/{chat.id}")
    # rename
    owner.click("#rename-open")
    owner.fill("#rename-input", "Request handling")
    owner.press("#rename-input", "Enter")
    expect(owner.locator("#chat-name")).to_have_text("Request handling")
    assert store.get_chat(chat.id).name == "Request handling"
    # share with bob by e-mail
    owner.click("#chat-members summary")
    owner.fill("#member-email", "bob@example.com")
    owner.press("#member-email", "Enter")
    expect(owner.locator("#member-list li")).to_have_count(1)
    expect(owner.locator("#member-count")).to_have_text("1")
    # bob finds it under "Shared with you", reads it, cannot ask in it or manage it, and duplicates it
    bob = page_for(world["bob"])
    bob.goto(world["url"] + "/chats")
    bob.locator("#shared-list a", has_text="Request handling").click()
    bob.wait_for_url(f"**/chat/{chat.id}")
    for absent in ("#ask-form", "#rename-open", "#chat-members", "#delete-chat", "#share-toggle"):
        assert bob.locator(absent).count() == 0, absent
    bob.click("#duplicate-chat")
    bob.wait_for_url(lambda u: "/chat/" in u and chat.id not in u)
    expect(bob.locator("#chat-name")).to_have_text("Copy of Request handling")
    expect(bob.locator("#ask-form")).to_have_count(1)  # the copy is bob's: he may ask in it
    # the owner takes the share back: bob's next read is refused at once
    owner.click("button[aria-label='Remove bob@example.com']")
    expect(owner.locator("#member-list li")).to_have_count(0)
    assert bob.goto(f"{world['url']}/chat/{chat.id}").status == 404
    # delete
    owner.click("#chat-delete summary")
    owner.click("#delete-chat")
    owner.wait_for_url("**/chats")
    assert chat.id not in owner.content()
    assert owner.goto(f"{world['url']}/chat/{chat.id}").status == 404


def test_at_mentioning_a_file_puts_it_in_the_questions_context(world, page_for):
    fake = world["fake"]
    fake.add("It serves requests.")
    page = page_for(world["bob"])
    page.goto(world["url"] + "/chat")
    page.click("#ask-q")
    page.keyboard.type("What does @app")
    options = page.locator("#mention-list [role=option]")
    expect(options.first).to_contain_text("src/app.py")
    assert WIDGETS not in page.inner_text("#mention-list")  # only files bob may read
    page.keyboard.press("Enter")  # picks the file; does not send
    expect(page.locator("#mention-chips li")).to_have_text([f"{DEMO}/src/app.py×"])
    assert page.input_value("#ask-q") == "What does @src/app.py "
    assert not fake.requests
    page.keyboard.type("do?")
    page.keyboard.press("Enter")
    expect(page.locator(".turn .answer")).to_have_text("It serves requests.")
    assert "def handle_request" in fake.bodies[-1]["system"]
    expect(page.locator("#mention-chips li")).to_have_count(0)  # the next question starts without it


def test_a_hostile_mermaid_diagram_runs_nothing_and_token_use_shows_under_the_answer(world, page_for):
    world["fake"].add(HOSTILE_DIAGRAM)
    page = page_for(world["owner"])
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    # the page's policy blocks inline handlers anyway; a blocked one would mean markup got through
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    # a global `callback`, as a "click A callback" directive would call it
    page.add_init_script("window.callback = () => { window.__pwned = 16; };")
    page.goto(world["url"] + "/chat")
    page.fill("#ask-q", "Draw the request flow")
    page.press("#ask-q", "Enter")
    page.wait_for_url("**/chat/*")

    def check():
        diagrams = page.locator(".answer figure.mermaid-diagram svg")
        expect(diagrams).to_have_count(2, timeout=60_000)  # mermaid is 5 MB of script to load on a busy machine
        expect(diagrams.nth(1)).to_contain_text("Server")
        expect(diagrams.first).to_contain_text("‹script›window.__pwned=12;alert(12)‹/script›")  # a label is text
        for node in diagrams.first.locator("g.node").all():
            node.click(force=True)
        page.wait_for_timeout(200)
        assert page.evaluate("() => window.__pwned") is None and dialogs == [] and blocked == []
        found = page.evaluate("""() => {
            const svgs = [...document.querySelectorAll('.answer figure svg')];
            const all = svgs.flatMap(s => [s, ...s.querySelectorAll('*')]);
            return {
                scripts: document.querySelectorAll('main script, svg script').length,
                foreign: svgs.reduce((n, s) => n + s.querySelectorAll('foreignObject').length, 0),
                handlers: all.filter(e => [...e.attributes].some(a => a.name.toLowerCase().startsWith('on'))).length,
                jsLinks: all.filter(e => [...e.attributes].some(a => /javascript:/i.test(a.value))).length,
            };
        }""")
        assert found == {"scripts": 0, "foreign": 0, "handlers": 0, "jsLinks": 0}, found

    check()
    chat = world["store"].get_chat(page.url.rsplit("/chat/", 1)[1])
    usage = chat.usage
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0 and usage["requests"] == 1
    expect(page.locator(".turn-usage")).to_have_text(
        f"Tokens: {usage['input_tokens']:,} input tokens · {usage['output_tokens']:,} output tokens")
    page.reload()  # the stored page: the same diagrams, drawn as safely, and the token use
    check()
    expect(page.locator(".turn-usage")).to_have_text(
        f"Tokens: {usage['input_tokens']:,} input tokens · {usage['output_tokens']:,} output tokens · 1 model request")


@pytest.mark.parametrize("width", [360, 1400])
@pytest.mark.parametrize("dark", [False, True])
def test_the_chat_pages_pass_axe(world, page_for, width, dark):
    store = world["store"]
    chat = owners_chat(world, "Which way does a request flow?", usage={"input_tokens": 1200, "output_tokens": 80,
                                                                        "requests": 2})
    store.rename_chat(chat.id, "A rather long chat name that has to wrap on a narrow screen without overflowing")
    store.share_chat(chat.id, world["bob"]["id"])
    store.add_chat_turn(chat.id, "Draw it", "```mermaid\ngraph LR\n  Client --> Server\n```", model=MODEL,
                        usage={"input_tokens": 3000, "output_tokens": 20, "requests": 1})
    shared = world["store"].create_chat("Bob's question", "An answer.", user_id=world["bob"]["id"], model=MODEL)
    store.share_chat(shared.id, world["owner"]["id"])
    page = page_for(world["owner"], width=width, dark=dark)
    for path, prepare in ((f"/chat/{chat.id}", lambda: (page.click("#chat-members summary"), page.click("#rename-open"),
                                                        page.locator("figure.mermaid-diagram svg").wait_for(
                                                            timeout=60_000))),
                          ("/chats", lambda: None)):
        page.goto(world["url"] + path)
        prepare()
        problems = audit(page)
        assert not problems, (path, width, dark, describe(problems))
        overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, (path, width, dark, overflow)
