"""Asking from the browser (issue 15, item 4): the question box, the chat page, ``POST /api/chat``.

One world, served by Ray Serve under ``/askweb`` with anonymous access on and the permission rule
on, over the `tests.mcpworld` repos plus a third one:

- ``git.local/demo``: public, in a connection that does not enforce permissions: everyone reads it;
- ``git.local/evil``: private, in such a connection: every signed-in user reads it, anonymous
  visitors do not. Its files hold HTML (``<script>``, ``onerror``): hostile tool outputs;
- ``github.com/acme/widgets``: in a connection that enforces permissions, public repositories
  included, and nobody has an account there: hidden from everyone.

The language model is `tests.fakellm` on 127.0.0.1 (OpenAI-compatible wire format), scripted
per test to call the real tools; a script step can wait, so that a test sees the tool calls on
the page before the answer exists. Screenshots go to a temporary directory (390 and 1400 px
wide, light and dark).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time

import httpx
import pytest
from playwright.sync_api import expect

from tests.conftest import TEST_LLM_TOKEN, TEST_LLM_TOKEN_ENV
from tests.corpus import make_local_repo
from tests.fakellm import FakeModelServer, tool_outputs
from tests.mcpworld import DEMO, WIDGETS, build, parse_grep
from tests.webworld import browser, login  # noqa: F401  (pytest fixture)

PREFIX = "ask-web-searcher"
EVIL = "git.local/evil"
EVIL_FILES = {
    "page.html": "<p>evil_marker</p>\n<script>window.__pwned = 1</script>\n",
    "notes.md": 'evil_marker <img src=z onerror="window.__pwned = 2"> </pre></code><b>bold</b>\n',
}
HOSTILE_ANSWER = ("Found it <script>window.__pwned = 3</script> <img src=x onerror=\"window.__pwned = 4\">\n\n"
                  "[click me](javascript:window.__pwned=5) and ![img](http://127.0.0.1:9/leak.png)\n\n"
                  "<a href=\"javascript:window.__pwned=6\">raw link</a>")


@pytest.fixture(scope="module")
def world(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch import permissions
    from codesearch.index.builder import IndexSettings, index_source
    from codesearch.index.sources import GitSource
    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application
    from codesearch.store.models import INDEXED
    from codesearch.sync import repo_info
    from codesearch.accounts import hash_password

    base = str(tmp_path_factory.mktemp("askweb"))
    w = build(base)
    store = w["store"]
    root = make_local_repo(os.path.join(base, "src", "evil"), EVIL_FILES)
    store.upsert_connection("evil", "git", {"type": "git", "url": "file://" + root})
    ids = store.upsert_repos("evil", [dict(name=EVIL, display_name="evil", code_host_type="genericGitHost",
                                           clone_url="file://" + root, local_path=root, default_branch="main",
                                           public=False)]).ids
    row = store.get_repo(ids[EVIL])
    source = GitSource(root, repo=repo_info(row, row.id))
    try:
        index_source(source, w["index"], IndexSettings())
        revisions = {r.ref: r.commit for r in source.revisions}
    finally:
        source.close()
    store.update_repo_index_status(row.id, INDEXED, revisions=revisions)
    Rule = permissions.ConnectionRule
    permissions.write_settings(store, permissions.PermissionSettings(enabled=True, connections={
        "local": Rule(False, False, None), "evil": Rule(False, False, None),
        "acme": Rule(True, True, "github:https://github.com")}))

    owner = store.find_user_by_email("owner@example.com")
    store.set_user_password(owner.id, hash_password("owner-pass-1"))
    member = store.create_user("member@example.com", "Member", password_hash=hash_password("member-pass-1"))
    member_key = store.create_api_key(member.id, "ask tests")[1]
    fake = FakeModelServer(api_key=TEST_LLM_TOKEN).start()
    store.replace_language_models([
        {"provider": "openai-compatible", "model": "scripted-1", "displayName": "Scripted",
         "baseUrl": fake.base_url + "/v1", "token": {"env": TEST_LLM_TOKEN_ENV}},
        {"provider": "openai-compatible", "model": "scripted-2", "displayName": "Scripted Two",
         "baseUrl": fake.base_url + "/v1", "token": {"env": TEST_LLM_TOKEN_ENV}},
        {"provider": "anthropic", "model": "claude-fake", "baseUrl": fake.base_url, "token": {"env": TEST_LLM_TOKEN_ENV}},
    ])
    pool = SearcherPool.create(w["index"], 1, name_prefix=PREFIX)
    url = f"{serve_url}/askweb"
    serve.run(search_application(PREFIX, len(pool.actors), anonymous_access=True, data_dir=w["data"],
                                 public_url=url), name="ask-web", route_prefix="/askweb")
    w.update(url=url, fake=fake, pool=pool, evil_root=root,
             owner={"email": "owner@example.com", "password": "owner-pass-1", "id": owner.id, "key": w["key"]},
             member={"email": "member@example.com", "password": "member-pass-1", "id": member.id, "key": member_key})
    yield w
    serve.delete("ask-web")
    pool.close()
    fake.stop()
    store.close()


@pytest.fixture(autouse=True)
def fresh_script(world):
    world["fake"].reset()
    world["fake"].script.clear()
    world["fake"].requests.clear()
    world["fake"].stream_delay = 0.0
    yield


@pytest.fixture
def page_for(browser, world):  # noqa: F811
    """`page_for(account or None, width=1400, dark=False)`: a page in a fresh browser context."""
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


@pytest.fixture(scope="module")
def shots_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ask-screenshots"))


def ask(world, body: dict, headers: dict | None = None, key: str | None = "owner") -> httpx.Response:
    h = dict(headers or {})
    if key:
        h["Authorization"] = f"Bearer {world[key]['key']}"
    return httpx.post(world["url"] + "/api/chat", json=body, headers=h, timeout=120)


def question(text: str, **extra) -> dict:
    return {"messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}], **extra}


def events(resp: httpx.Response) -> list:
    out = []
    for block in resp.text.split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def tool_results(evs: list) -> dict[str, str]:
    """Each tool's output text in a stream, by the tool's name."""
    names = {e["toolCallId"]: e["toolName"] for e in evs if isinstance(e, dict) and e["type"] == "tool-input-available"}
    return {names[e["toolCallId"]]: e["output"]["text"] for e in evs
            if isinstance(e, dict) and e["type"] == "tool-output-available"}


def cite_first_grep(messages) -> str:
    """The scripted model's answer: it cites the first line the grep found, as the prompt asks."""
    repo, path, line = sorted(parse_grep(tool_outputs(messages)[0]))[0]
    return f"`handle_request` is defined in `{repo}/{path}:{line}`."


def pwned(page):
    return page.evaluate("() => window.__pwned")


# ----------------------------------------------------------------------------- without a server


def test_code_references_link_to_the_line_in_repositories_the_viewer_may_read():
    from codesearch.markup.code_refs import render_answer

    html = str(render_answer(
        "See `git.local/demo/src/app.py:4` and git.local/demo-two/lib/x.py:2-5; "
        "[mine](https://example.com/git.local/demo/a.py:3), secret.example/team/repo/k.py:9, "
        "`git.local/demo/src/app.py` (no line).",
        ["git.local/demo", "git.local/demo-two"], "/root"))
    # in backticks and in running text; the longest repository name that fits wins
    assert ('<a href="/root/browse/git.local/demo/-/blob/src/app.py#L4" class="code-ref" '
            'rel="noopener noreferrer nofollow"><code>git.local/demo/src/app.py:4</code></a>') in html
    assert ('<a href="/root/browse/git.local/demo-two/-/blob/lib/x.py#L2-L5" class="code-ref" '
            'rel="noopener noreferrer nofollow">git.local/demo-two/lib/x.py:2-5</a>') in html
    # a link the model wrote stays as written; a repository the viewer may not read is never linked
    assert html.count("code-ref") == 2
    assert "secret.example/team/repo/k.py:9" in html and "/browse/secret.example" not in html
    # hostile markdown stays text
    hostile = str(render_answer('<script>x()</script> [a](javascript:x()) `git.local/demo/"><img src=x>:3`',
                                ["git.local/demo"]))
    assert "<script>" not in hostile and "<img" not in hostile and 'href="javascript' not in hostile


def test_without_anonymous_access_visitors_are_sent_to_sign_in_and_cannot_ask(tmp_path):
    """A server with anonymous access off (the store only: no question gets as far as a search)."""
    from codesearch.serving.api import build_app
    from codesearch.store import Store
    from tests.asgiserver import serving

    store = Store.open(str(tmp_path / "data"))
    store.create_user("owner@example.com", "Owner")
    store.replace_language_models([{"provider": "openai-compatible", "model": "m", "baseUrl": "http://127.0.0.1:9/v1"}])
    app = build_app(lambda: None, get_store=lambda: store, anonymous_access=False, environ={})
    try:
        with serving(app) as url:
            for path in ("/chat", "/chats", "/chat?q=hello"):
                r = httpx.get(url + path, headers={"Accept": "text/html"}, timeout=30)
                assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), path
            r = httpx.post(url + "/api/chat", json=question("hello"), timeout=30)
            assert r.status_code == 401 and r.json()["errorCode"] == "NOT_AUTHENTICATED"
            assert httpx.get(url + "/api/models", timeout=30).status_code == 401
    finally:
        store.close()


# ----------------------------------------------------------------------------- the stream, over HTTP


def test_a_question_streams_tool_calls_then_the_answer_in_sourcebots_event_shape(world):
    world["fake"].add([("grep", {"pattern": "def handle_request", "repo": DEMO})], cite_first_grep)
    r = ask(world, question("Where is handle_request defined?"))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
    evs = events(r)
    types = [e if isinstance(e, str) else e["type"] for e in evs]
    deltas = [e for e in evs if isinstance(e, dict) and e["type"] == "text-delta"]
    assert len(deltas) > 3  # the model streams its answer a few words at a time, and so do we
    assert types == ["start", "tool-input-available", "tool-output-available", "text-start",
                     *["text-delta"] * len(deltas), "text-end", "data-chat", "message-metadata", "finish", "[DONE]"]
    assert {e["id"] for e in deltas} == {evs[3]["id"]}
    call, result = evs[1], evs[2]
    assert call["toolName"] == "grep" and call["input"] == {"pattern": "def handle_request", "repo": DEMO}
    assert result["toolCallId"] == call["toolCallId"] and result["output"]["isError"] is False
    assert result["output"]["summary"].startswith("Found 1 match in 1 file")
    assert f"[{DEMO}] src/app.py:" in result["output"]["text"]
    answer = "".join(e["delta"] for e in deltas)
    assert answer == f"`handle_request` is defined in `{DEMO}/src/app.py:4`."
    chat = next(e["data"] for e in evs if isinstance(e, dict) and e["type"] == "data-chat")
    assert chat["chatUrl"] == f"{world['url']}/chat/{chat['chatId']}" and chat["turn"] == 0
    assert chat["visibility"] == "PRIVATE"
    # the answer as HTML: the code reference opens the file at the line
    assert (f'<a href="/askweb/browse/{DEMO}/-/blob/src/app.py#L4" class="code-ref"' in chat["answerHtml"])
    assert evs[-3]["messageMetadata"]["modelName"] == "Scripted"
    stored = world["store"].get_chat(chat["chatId"])
    assert stored.question == "Where is handle_request defined?" and stored.answer == answer
    assert stored.user_id == world["owner"]["id"] and [s["tool"] for s in stored.steps] == ["grep"]


def test_an_anthropic_model_streams_its_answer_too(world):
    world["fake"].add([("grep", {"pattern": "def handle_request", "repo": DEMO})], cite_first_grep)
    r = ask(world, question("Where is handle_request?", languageModel={"provider": "anthropic", "model": "claude-fake"}))
    assert r.status_code == 200, r.text
    evs = events(r)
    deltas = [e["delta"] for e in evs if isinstance(e, dict) and e["type"] == "text-delta"]
    assert len(deltas) > 3 and "".join(deltas) == f"`handle_request` is defined in `{DEMO}/src/app.py:4`."
    assert [e["toolName"] for e in evs if isinstance(e, dict) and e["type"] == "tool-input-available"] == ["grep"]
    assert world["fake"].requests[0]["path"] == "/v1/messages" and world["fake"].bodies[0]["stream"] is True


def test_a_follow_up_is_asked_in_the_same_chat_with_the_earlier_turns_as_context(world):
    fake = world["fake"]
    fake.add("The server is `Server` in git.local/demo/src/app.py:3.")
    first = events(ask(world, question("Which class serves requests?")))[-4]["data"]
    seen = []
    fake.add(lambda messages: seen.append(messages) or "It uppercases the body.")
    r = ask(world, question("And what does it return?", id=first["chatId"]))
    assert r.status_code == 200, r.text
    data = events(r)[-4]["data"]
    assert data["chatId"] == first["chatId"] and data["turn"] == 1
    convo = [(m["role"], m["content"]) for m in seen[0] if m["role"] in ("user", "assistant")]
    assert convo == [("user", "Which class serves requests?"),
                     ("assistant", "The server is `Server` in git.local/demo/src/app.py:3."),
                     ("user", "And what does it return?")]
    turns = world["store"].list_chat_turns(first["chatId"])
    assert [(t.position, t.question, t.answer) for t in turns] == [(1, "And what does it return?",
                                                                    "It uppercases the body.")]
    page = httpx.get(f"{world['url']}/chat/{first['chatId']}", headers={"Authorization": f"Bearer {world['key']}"},
                     timeout=30)
    assert "Which class serves requests?" in page.text and "And what does it return?" in page.text


@pytest.mark.parametrize("body, status, code, words", [
    ({}, 400, "INVALID_REQUEST_BODY", "messages"),
    ({"messages": []}, 400, "INVALID_REQUEST_BODY", "messages"),
    (question("x", extra=1), 400, "INVALID_REQUEST_BODY", "extra"),
    ({"messages": [{"role": "assistant", "parts": [{"type": "text", "text": "hi"}]}]}, 400, "INVALID_REQUEST_BODY",
     "last message must be the user's question"),
    ({"messages": [{"role": "user", "parts": [{"type": "text", "text": "  "}]}]}, 400, "INVALID_REQUEST_BODY",
     "no text part"),
    (question("x", languageModel={"provider": "openai", "model": "nope"}), 400, "INVALID_REQUEST_BODY",
     "openai/nope is not configured"),
    (question("x", selectedSearchScopes=[{"type": "reposet", "value": "nope"}]), 400, "INVALID_REQUEST_BODY",
     "search context 'nope' does not exist"),
    (question("x", id="no-such-chat"), 404, "NOT_FOUND", "not found"),
])
def test_bad_requests_are_refused_before_anything_streams(world, body, status, code, words):
    r = ask(world, body)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    if code:
        assert r.json()["errorCode"] == code
    assert words in r.text
    assert world["fake"].requests == []  # the model was never asked


def test_a_hidden_repository_in_the_scope_is_refused_as_an_unknown_one(world):
    hidden = ask(world, question("x", selectedSearchScopes=[{"type": "repo", "value": WIDGETS}]), key="member")
    unknown = ask(world, question("x", selectedSearchScopes=[{"type": "repo", "value": "git.local/nope"}]),
                  key="member")
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.json()["errorCode"] == "REPOSITORY_NOT_FOUND"
    assert hidden.text.replace(WIDGETS, "X") == unknown.text.replace("git.local/nope", "X")
    # anonymous visitors: the private repository is hidden too
    anon = ask(world, question("x", selectedSearchScopes=[{"type": "repo", "value": EVIL}]), key=None)
    assert anon.status_code == 404 and anon.json()["errorCode"] == "REPOSITORY_NOT_FOUND"
    assert world["fake"].requests == []


def test_the_tools_never_show_the_model_or_the_page_a_hidden_repository(world):
    fake = world["fake"]
    for who, key, visible in (("member", "member", {DEMO, EVIL}), ("anonymous", None, {DEMO})):
        fake.add([("list_repos", {}), ("grep", {"pattern": "handle_request|evil_marker"})],
                 lambda messages: "Repos and matches:\n" + "\n".join(tool_outputs(messages)))
        r = ask(world, question("List every repository and where handle_request is"), key=key)
        assert r.status_code == 200, r.text
        out = tool_results(events(r))
        listed = {x["name"] for x in json.loads(out["list_repos"])["repos"]}
        assert listed == visible, who
        found = {repo for repo, _p, _l in parse_grep(out["grep"])}
        assert found == visible, who
        sent = json.dumps(fake.bodies)
        for name in {DEMO, EVIL, WIDGETS} - visible:
            assert name not in r.text and name not in sent, (who, name)
        fake.requests.clear()


def test_anonymous_visitors_ask_public_questions_only_and_cannot_follow_up(world):
    world["fake"].add("An answer.")
    r = ask(world, question("Anything?"), key=None)
    assert r.status_code == 200
    data = events(r)[-4]["data"]
    assert data["visibility"] == "PUBLIC" and world["store"].get_chat(data["chatId"]).user_id is None
    private = ask(world, question("x", visibility="PRIVATE"), key=None)
    assert private.status_code == 400 and "needs a signed-in user" in private.json()["message"]
    follow = ask(world, question("x", id=data["chatId"]), key=None)
    assert follow.status_code == 400 and "follow-up questions need a signed-in user" in follow.json()["message"]
    # a signed-in user cannot follow up in someone else's chat either: it is "not found"
    other = ask(world, question("x", id=data["chatId"]), key="member")
    assert other.status_code == 404


def test_sharing_is_for_the_chats_user_and_needs_the_csrf_token_from_a_browser(world):
    store = world["store"]
    chat = store.create_chat("Shared?", "Yes", user_id=world["owner"]["id"], visibility="PRIVATE")
    url = f"{world['url']}/api/chat/{chat.id}"
    other = httpx.patch(url, json={"visibility": "PUBLIC"}, timeout=30,
                        headers={"Authorization": f"Bearer {world['member']['key']}"})
    assert other.status_code == 404 and store.get_chat(chat.id).visibility == "PRIVATE"
    bad = httpx.patch(url, json={"visibility": "EVERYONE"}, timeout=30,
                      headers={"Authorization": f"Bearer {world['key']}"})
    assert bad.status_code == 400 and "visibility" in bad.text
    cookie, session = store.create_web_session(world["owner"]["id"], ttl_seconds=600)
    no_token = httpx.patch(url, json={"visibility": "PUBLIC"}, cookies={"codesearch_session": cookie}, timeout=30)
    # without the token the session does not count: a visitor, for whom the chat does not exist
    assert no_token.status_code == 404 and store.get_chat(chat.id).visibility == "PRIVATE"
    ok = httpx.patch(url, json={"visibility": "PUBLIC"}, cookies={"codesearch_session": cookie},
                     headers={"X-CSRF-Token": session.csrf_token}, timeout=30)
    assert ok.status_code == 200 and ok.json()["visibility"] == "PUBLIC"
    assert store.get_chat(chat.id).visibility == "PUBLIC"
    # a question from the browser's session needs the token as well: without it, the caller is a
    # visitor (anonymous access is on), who may not ask a PRIVATE question
    no_csrf = httpx.post(world["url"] + "/api/chat", json=question("x", visibility="PRIVATE"),
                         cookies={"codesearch_session": cookie}, timeout=30)
    assert no_csrf.status_code == 400 and "needs a signed-in user" in no_csrf.json()["message"]
    assert world["fake"].requests == []


def test_a_model_that_fails_ends_the_stream_with_an_error_and_the_question_is_kept_as_failed(world):
    world["fake"].fail(401, times=1, body={"error": {"message": f"bad key {TEST_LLM_TOKEN}"}})
    r = ask(world, question("Will this work?"))
    assert r.status_code == 200
    evs = events(r)
    assert [e if isinstance(e, str) else e["type"] for e in evs] == ["start", "data-chat", "error", "finish", "[DONE]"]
    message = evs[2]["errorText"]
    assert "scripted-1" in message and "401" in message and TEST_LLM_TOKEN not in message
    failed = world["store"].list_chats(user_id=world["owner"]["id"], limit=1)[0]
    assert evs[1]["data"]["chatId"] == failed.id  # the failed question is kept, and the stream says where
    assert failed.question == "Will this work?" and failed.status == "FAILED" and TEST_LLM_TOKEN not in failed.error


# ----------------------------------------------------------------------------- in the browser


def test_a_question_from_the_home_page_shows_each_tool_call_as_it_happens_then_the_answer(world, page_for):
    gate = threading.Event()
    world["fake"].add([("grep", {"pattern": "def handle_request", "repo": DEMO})],
                      lambda messages: (gate.wait(30), cite_first_grep(messages))[1])
    page = page_for(world["owner"])
    page.goto(world["url"] + "/")
    page.fill("#askbox-q", "Where is handle_request defined?")
    page.press("#askbox-q", "Enter")
    page.wait_for_url("**/askweb/chat?**")
    # the tool call is on the page, with its result, while the model is still thinking
    step = page.locator(".turn .steps li").first
    expect(step.locator(".step-tool")).to_have_text("grep")
    expect(step.locator(".step-summary")).to_contain_text("Found 1 match in 1 file")
    assert "def handle_request" in step.locator(".step-args").inner_text()
    expect(page.locator(".turn .turn-status")).to_have_text("Researching…")
    assert page.locator(".turn .answer").inner_text() == ""
    # the answer appears word by word as the model writes it, then as rendered markdown
    world["fake"].stream_delay = 0.2
    gate.set()
    page.wait_for_function("""() => {
        const s = document.querySelector('.turn .answer-stream');
        return s && s.textContent.startsWith('`handle_request`') && !s.textContent.endsWith('.');
    }""")
    link = page.locator(".turn .answer a.code-ref")
    expect(link).to_have_text(f"{DEMO}/src/app.py:4")
    page.wait_for_url("**/askweb/chat/*")  # the address is the stored chat's
    chat_id = page.url.rsplit("/chat/", 1)[1]
    assert world["store"].get_chat(chat_id).answer == f"`handle_request` is defined in `{DEMO}/src/app.py:4`."
    # the code reference opens the file at the line
    link.click()
    page.wait_for_url(f"**/browse/{DEMO}/-/blob/src/app.py#L4")
    expect(page.locator("#L4")).to_have_class(re.compile(r"\bhl\b"))
    assert "def handle_request" in page.locator("#L4").inner_text()


def test_follow_ups_keyboard_and_the_model_picker(world, page_for):
    fake = world["fake"]
    fake.add("`Server` is in git.local/demo/src/app.py:3.")
    page = page_for(world["owner"])
    page.goto(world["url"] + "/chat")
    expect(page.locator("#ask-model option")).to_have_count(3)
    page.fill("#ask-q", "Which class serves?")
    page.press("#ask-q", "Enter")
    expect(page.locator(".turn .answer a.code-ref")).to_have_text("git.local/demo/src/app.py:3")
    page.wait_for_url("**/chat/*")
    # Shift+Enter is a new line, not a question
    asked = len(fake.requests)
    page.click("#ask-q")
    page.keyboard.type("What does it return?")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("Briefly.")
    assert page.input_value("#ask-q") == "What does it return?\nBriefly."
    time.sleep(0.3)
    assert len(fake.requests) == asked
    # a follow-up to another model, in the same chat
    page.select_option("#ask-model", label="Scripted Two")
    fake.add("It returns the body in upper case.")
    page.keyboard.press("Enter")
    expect(page.locator(".turn")).to_have_count(2)
    expect(page.locator(".turn").nth(1).locator(".answer")).to_have_text("It returns the body in upper case.")
    assert fake.bodies[-1]["model"] == "scripted-2"
    assert page.locator(".turn").nth(1).locator(".chat-question").inner_text() == "What does it return?\nBriefly."
    chat_id = page.url.rsplit("/chat/", 1)[1]
    page.reload()
    expect(page.locator(".turn .chat-question")).to_have_text(["Which class serves?", "What does it return?\nBriefly."])
    assert [t.position for t in world["store"].list_chat_turns(chat_id)] == [1]


def test_history_lists_ones_chats_and_sharing_decides_who_reads_them(world, page_for):
    store = world["store"]
    chat = store.create_chat("Where do requests go?", f"To `{DEMO}/src/app.py:4`.", user_id=world["owner"]["id"],
                             visibility="PRIVATE", model={"provider": "openai-compatible", "model": "scripted-1",
                                                          "displayName": "Scripted"})
    others = store.create_chat("The member's own question", "", user_id=world["member"]["id"])
    owner = page_for(world["owner"])
    owner.goto(world["url"] + "/chats")
    listed = owner.locator("#chat-list li a")
    expect(listed.first).to_have_text("Where do requests go?")  # newest first
    assert "The member's own question" not in owner.inner_text("#chat-list")
    listed.first.click()
    owner.wait_for_url(f"**/chat/{chat.id}")
    # PRIVATE: the other user and visitors get "not found"
    member = page_for(world["member"])
    assert member.goto(f"{world['url']}/chat/{chat.id}").status == 404
    assert page_for(None).goto(f"{world['url']}/chat/{chat.id}").status == 404
    # shared: both read it, and neither may ask in it
    owner.click("#share-toggle")
    expect(owner.locator("#share-toggle")).to_have_text("Stop sharing")
    expect(owner.locator("#chat-visibility")).to_have_text("public")
    assert store.get_chat(chat.id).visibility == "PUBLIC"
    assert member.goto(f"{world['url']}/chat/{chat.id}").status == 200
    assert member.inner_text("h1") == "Where do requests go?"
    assert member.locator("#ask-form").count() == 0 and member.locator("#share-toggle").count() == 0
    visitor = page_for(None)
    assert visitor.goto(f"{world['url']}/chat/{chat.id}").status == 200
    # a shared chat that names a repository the viewer may not read stays hidden from them
    evil_chat = store.create_chat("Evil?", f"See `{EVIL}/page.html:2`.", user_id=world["owner"]["id"],
                                  visibility="PUBLIC")
    assert member.goto(f"{world['url']}/chat/{evil_chat.id}").status == 200
    assert visitor.goto(f"{world['url']}/chat/{evil_chat.id}").status == 404
    assert EVIL not in visitor.content()
    owner.click("#share-toggle")
    expect(owner.locator("#share-toggle")).to_have_text("Share: make public")
    assert member.goto(f"{world['url']}/chat/{chat.id}").status == 404
    assert others.id not in owner.content()
    # a visitor has no history: the list asks them to sign in
    visitor.goto(f"{world['url']}/chats")
    assert "/login" in visitor.url


def test_the_scope_picker_lists_only_readable_repositories_and_scopes_the_tools(world, page_for):
    def picker(page) -> list[str]:
        page.goto(world["url"] + "/chat")
        return page.locator("#scope-list input[name=repo]").evaluate_all("els => els.map(e => e.value)")

    assert picker(page_for(None)) == [DEMO]  # visitors: public repositories only
    member = page_for(world["member"])
    assert picker(member) == [DEMO, EVIL]
    assert WIDGETS not in member.content()
    # the scope narrows what the tools search
    world["fake"].add([("grep", {"pattern": "evil_marker|handle_request"})], "Done.")
    member.click("#ask-scope summary")
    member.fill("#scope-filter", "evil")
    expect(member.locator("#scope-list li:visible")).to_have_count(1)
    member.check(f"#scope-list input[value='{EVIL}']")
    expect(member.locator("#scope-summary")).to_have_text(EVIL)
    member.fill("#ask-q", "Where are the markers?")
    member.press("#ask-q", "Enter")
    expect(member.locator(".turn .answer")).to_have_text("Done.")
    member.locator(".turn .steps summary").first.click()
    output = member.locator(".turn .step-output").first.inner_text()
    assert {repo for repo, _p, _l in parse_grep(output)} == {EVIL}
    # a file page's box scopes the question to its repository
    member.goto(f"{world['url']}/browse/{DEMO}/-/blob/src/app.py")
    member.fill("#askbox-q", "What is this file?")
    world["fake"].add("A server.")
    member.press("#askbox-q", "Enter")
    expect(member.locator(".turn .answer")).to_have_text("A server.")
    assert member.locator("#scope-list input:checked").evaluate_all("els => els.map(e => e.value)") == [DEMO]
    system = world["fake"].bodies[-1]["messages"][0]["content"]
    assert "restrict your searches to them" in system and system.endswith(f"\n- {DEMO}")


def test_visitors_ask_about_public_repositories_when_anonymous_access_is_on(world, page_for):
    world["fake"].add([("list_repos", {})], lambda messages: "Repositories: " + tool_outputs(messages)[0])
    page = page_for(None)
    page.goto(world["url"] + "/")
    page.fill("#askbox-q", "Which repositories are there?")
    page.press("#askbox-q", "Enter")
    expect(page.locator(".turn .answer")).to_contain_text("Repositories:")
    assert DEMO in page.inner_text(".turn .answer") and EVIL not in page.content() and WIDGETS not in page.content()
    expect(page.locator(".turn .step-tool")).to_have_text("list_repos")
    assert "anyone with the link can read them" in page.inner_text("#ask-hint")
    page.wait_for_url("**/chat/*")
    assert page.locator("#share-toggle").count() == 0 and page.locator("#ask-public").count() == 0
    chat = world["store"].get_chat(page.url.rsplit("/chat/", 1)[1])
    assert chat.user_id is None and chat.visibility == "PUBLIC"


def test_a_failed_question_says_why_on_the_page(world, page_for):
    world["fake"].fail(500, times=2, body={"error": {"message": "the model is overloaded"}})
    page = page_for(world["member"])
    page.goto(world["url"] + "/chat")
    page.fill("#ask-q", "Anything?")
    page.press("#ask-q", "Enter")
    expect(page.locator(".turn .error")).to_contain_text("The question failed:")
    expect(page.locator(".turn .error")).to_contain_text("the model is overloaded")
    expect(page.locator("#ask-send")).to_be_enabled()
    page.wait_for_url("**/chat/*")  # kept: the chat's page says it failed
    page.reload()
    expect(page.locator(".turn .error")).to_contain_text("This question failed:")


def test_hostile_answers_questions_and_tool_outputs_are_shown_as_text(world, page_for):
    world["fake"].add([("grep", {"pattern": "evil_marker", "repo": EVIL}), ("read_file", {"repo": EVIL, "path": "page.html"})],
                      HOSTILE_ANSWER)
    page = page_for(world["owner"])
    page.goto(world["url"] + "/chat")
    hostile_q = '<img src=q onerror="window.__pwned = 7"><script>window.__pwned = 8</script>'
    page.fill("#ask-q", hostile_q)
    page.press("#ask-q", "Enter")
    expect(page.locator(".turn .answer")).to_contain_text("Found it <script>window.__pwned = 3</script>")

    def check():
        assert pwned(page) is None
        assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
        assert page.locator("main a[href^='javascript']").count() == 0
        assert page.locator(".turn .chat-question").first.inner_text() == hostile_q
        outputs = page.locator(".turn .step-output").all_text_contents()
        assert any("<script>window.__pwned = 1</script>" in o for o in outputs)
        assert any('onerror="window.__pwned = 2"' in o for o in outputs)

    check()
    page.wait_for_url("**/chat/*")
    page.reload()
    check()


@pytest.mark.parametrize("width", [390, 1400])
@pytest.mark.parametrize("dark", [False, True])
def test_screens_fit_390px_and_wide_in_light_and_dark(world, page_for, shots_dir, width, dark):
    store = world["store"]
    long_answer = ("The request handler is `Server.handle_request` in "
                   f"`{DEMO}/src/app.py:4`:\n\n```python\ndef handle_request(self, body):\n"
                   "    return body.upper()  # a long line that must scroll inside its block, not the page\n```\n\n"
                   "| file | line |\n|---|---|\n| src/app.py | 4 |\n\n" + "word " * 80)
    chat = store.create_chat("How is a request handled, from the socket to the reply, in every repository?",
                             long_answer, user_id=world["owner"]["id"], visibility="PRIVATE",
                             model={"provider": "openai-compatible", "model": "scripted-1", "displayName": "Scripted"},
                             steps=[{"tool": "grep", "arguments": {"pattern": "def handle_request", "repo": DEMO},
                                     "output": f"Found 1 match in 1 file\n[{DEMO}] src/app.py:\n  4:     def handle_request(self, body):",
                                     "is_error": False},
                                    {"tool": "read_file", "arguments": {"repo": DEMO, "path": "src/missing.py"},
                                     "output": "file not found: src/missing.py", "is_error": True}])
    store.add_chat_turn(chat.id, "And the reply?", "It is the body in upper case.",
                        model={"displayName": "Scripted"})
    page = page_for(world["owner"], width=width, dark=dark)
    mode = "dark" if dark else "light"
    for name, path, prepare in (
            ("chat", f"/chat/{chat.id}", lambda: page.locator(".steps summary").first.click()),
            ("new-chat", "/chat?q=Where+is+the+retry+policy%3F", lambda: page.click("#ask-scope summary")),
            ("chats", "/chats", lambda: None),
            ("home", "/", lambda: None)):
        page.goto(world["url"] + path)
        prepare()
        page.wait_for_timeout(150)
        page.screenshot(path=os.path.join(shots_dir, f"{name}-{width}-{mode}.png"), full_page=True)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, (name, width, mode, overflow)
    bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert (bg == "rgb(13, 17, 23)") == dark
    print("screenshots:", shots_dir)
