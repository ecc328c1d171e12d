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
import subprocess
import time

import httpx
import pytest

from tests.conftest import TEST_LLM_TOKEN, TEST_LLM_TOKEN_ENV
from tests.corpus import make_local_repo
from tests.fakellm import FakeModelServer, last_user_text, tool_outputs
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
    from codesearch.service.deployment import search_application
    from codesearch.store.models import INDEXED
    from codesearch.sync import repo_info
    from codesearch.web.sessions import hash_password

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


# ----------------------------------------------------------------------------- the stream, over HTTP


def test_a_question_streams_tool_calls_then_the_answer_in_sourcebots_event_shape(world):
    world["fake"].add([("grep", {"pattern": "def handle_request", "repo": DEMO})], cite_first_grep)
    r = ask(world, question("Where is handle_request defined?"))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
    evs = events(r)
    types = [e if isinstance(e, str) else e["type"] for e in evs]
    assert types == ["start", "tool-input-available", "tool-output-available", "text-start", "text-delta", "text-end",
                     "data-chat", "message-metadata", "finish", "[DONE]"]
    call, result = evs[1], evs[2]
    assert call["toolName"] == "grep" and call["input"] == {"pattern": "def handle_request", "repo": DEMO}
    assert result["toolCallId"] == call["toolCallId"] and result["output"]["isError"] is False
    assert result["output"]["summary"].startswith("Found 1 match in 1 file")
    assert f"[{DEMO}] src/app.py:" in result["output"]["text"]
    answer = evs[4]["delta"]
    assert answer == f"`handle_request` is defined in `{DEMO}/src/app.py:4`."
    chat = evs[6]["data"]
    assert chat["chatUrl"] == f"{world['url']}/chat/{chat['chatId']}" and chat["turn"] == 0
    assert chat["visibility"] == "PRIVATE"
    # the answer as HTML: the code reference opens the file at the line
    assert (f'<a href="/askweb/browse/{DEMO}/-/blob/src/app.py#L4" class="code-ref"' in chat["answerHtml"])
    assert evs[7]["messageMetadata"]["modelName"] == "Scripted"
    stored = world["store"].get_chat(chat["chatId"])
    assert stored.question == "Where is handle_request defined?" and stored.answer == answer
    assert stored.user_id == world["owner"]["id"] and [s["tool"] for s in stored.steps] == ["grep"]


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
