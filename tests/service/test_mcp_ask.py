"""`ask_codebase` end to end: the Serve app's agent calls a scripted model on 127.0.0.1 (OpenAI-
compatible and Anthropic shapes), the tools really run against the repositories, the answer cites
real files, the session is stored and shown at /chat/<id>; and the REST forms
(`POST /api/chat/blocking`, `GET /api/models`)."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from tests.conftest import TEST_LLM_TOKEN, TEST_LLM_TOKEN_ENV
from tests.fakellm import FakeModelServer, tool_outputs
from tests.mcpclient import McpClient
from tests.mcpworld import DEMO, WIDGETS, build, parse_grep

PREFIX = "mcp-ask-searcher"


@pytest.fixture(scope="module")
def world(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application

    fake = FakeModelServer(api_key=TEST_LLM_TOKEN).start()
    w = build(str(tmp_path_factory.mktemp("ask")))
    w["store"].replace_language_models([
        {"provider": "openai-compatible", "model": "scripted-1", "displayName": "Scripted",
         "baseUrl": fake.base_url + "/v1", "token": {"env": TEST_LLM_TOKEN_ENV}},
        {"provider": "anthropic", "model": "claude-fake", "baseUrl": fake.base_url, "token": {"env": TEST_LLM_TOKEN_ENV}},
    ])
    pool = SearcherPool.create(w["index"], 1, name_prefix=PREFIX)
    public = f"{serve_url}/ask"
    serve.run(search_application(PREFIX, len(pool.actors), anonymous_access=True, data_dir=w["data"],
                                 public_url=public), name="mcp-ask", route_prefix="/ask")
    w.update(fake=fake, base=public, url=f"{public}/api/mcp",
             mcp=McpClient(f"{public}/api/mcp", {"Authorization": f"Bearer {w['key']}"}),
             http=httpx.Client(base_url=public, timeout=120, headers={"Authorization": f"Bearer {w['key']}"}))
    yield w
    w["http"].close()
    serve.delete("mcp-ask")
    pool.close()
    fake.stop()
    w["store"].close()


@pytest.fixture(autouse=True)
def fresh_script(world):
    world["fake"].reset()
    world["fake"].script.clear()
    world["fake"].requests.clear()
    yield


def _cite(messages) -> str:
    """The scripted model's final answer: it cites the first file the grep found."""
    found = sorted(parse_grep(tool_outputs(messages)[0]))
    repo, path, line = found[0]
    return f"`handle_request` is defined in **{repo}/{path}:{line}**:\n\n```python\ndef handle_request(...)\n```"


def test_tool_list_and_models_with_a_configured_model(world):
    names = {t.name for t in world["mcp"].list_tools()}
    assert "ask_codebase" in names and len(names) == 15
    ask = next(t for t in world["mcp"].list_tools() if t.name == "ask_codebase")
    assert ask.annotations.read_only_hint is False
    models = json.loads(world["mcp"].call("list_language_models").text)
    assert models == [{"provider": "openai-compatible", "model": "scripted-1", "displayName": "Scripted"},
                      {"provider": "anthropic", "model": "claude-fake"}]
    assert world["http"].get("/api/models").json() == [
        {"provider": "openai-compatible", "model": "scripted-1", "displayName": "Scripted"},
        {"provider": "anthropic", "model": "claude-fake"}]


def test_ask_codebase_runs_the_tools_and_cites_real_files(world):
    fake = world["fake"]
    fake.add([("grep", {"pattern": "def handle_request", "repo": WIDGETS})],
             [("read_file", {"repo": WIDGETS, "path": "src/widget.py", "limit": 10})],
             _cite)
    progress: list = []
    res = world["mcp"].call("ask_codebase", {"query": "Where is handle_request defined in widgets?"}, progress=progress)
    assert not res.is_error, res.text
    # progress streamed while the agent worked: the model, then each tool call
    assert [p[0] for p in progress] == [1.0, 2.0, 3.0]
    assert progress[0][2] == "asking Scripted (openai-compatible)"
    assert progress[1][2].startswith("grep pattern='def handle_request'") and progress[2][2].startswith("read_file")
    assert f"**{WIDGETS}/src/widget.py:4**" in res.text
    m = re.search(r"Research session: (\S+)/chat/(\S+)", res.text)
    assert m and m.group(1) == world["base"]
    assert res.text.rstrip().endswith("Model: Scripted (openai-compatible)")
    # the tools really ran: what the model got back is what the tools answer
    bodies = fake.bodies
    assert len(bodies) == 3
    assert fake.requests[0]["headers"]["authorization"] == f"Bearer {TEST_LLM_TOKEN}"
    assert {t["function"]["name"] for t in bodies[0]["tools"]} >= {"grep", "read_file", "find_symbol_definitions"}
    grep_result = [m for m in bodies[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert grep_result == world["mcp"].call("grep", {"pattern": "def handle_request", "repo": WIDGETS}).text
    read_result = [m for m in bodies[2]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "4:     def handle_request(self):" in read_result
    # the session is stored, PRIVATE to its owner
    chat_id = m.group(2)
    chat = world["store"].get_chat(chat_id)
    assert chat.visibility == "PRIVATE" and chat.status == "COMPLETED" and len(chat.steps) == 2
    page = world["http"].get(f"/chat/{chat_id}")
    assert page.status_code == 200 and "Where is handle_request defined in widgets?" in page.text
    assert "read_file" in page.text and "&lt;" not in chat.question
    assert httpx.get(f"{world['base']}/chat/{chat_id}", timeout=30).status_code == 404  # anonymous: not visible


def test_anthropic_model_and_repos_scope(world):
    fake = world["fake"]
    fake.add([("grep", {"pattern": "handle_request"})], _cite)
    res = world["mcp"].call("ask_codebase", {"query": "Who handles requests?", "repos": [DEMO],
                                             "languageModel": {"provider": "anthropic", "model": "claude-fake"},
                                             "visibility": "PUBLIC"})
    assert not res.is_error, res.text
    assert fake.requests[0]["path"] == "/v1/messages"
    assert fake.requests[0]["headers"]["x-api-key"] == TEST_LLM_TOKEN
    # grep without a repo searched only the allowed repo
    tool_text = [b for b in fake.bodies[1]["messages"] if b["role"] == "user"][-1]["content"][0]["content"]
    assert {r for r, _p, _l in parse_grep(tool_text)} == {DEMO}
    chat_id = re.search(r"/chat/(\S+)", res.text).group(1)
    page = httpx.get(f"{world['base']}/chat/{chat_id}", timeout=30)  # PUBLIC: anyone with the link
    assert page.status_code == 200 and "Who handles requests?" in page.text


def test_answers_are_shown_as_text_never_as_html(world):
    world["fake"].add("Here: <script>alert('x')</script> and <b>bold</b>")
    res = world["http"].post("/api/chat/blocking", json={"query": "<img src=x onerror=alert(1)>", "visibility": "PUBLIC"})
    assert res.status_code == 200, res.text
    body = res.json()
    assert set(body) == {"answer", "chatId", "chatUrl", "languageModel"}
    assert body["answer"] == "Here: <script>alert('x')</script> and <b>bold</b>"
    assert body["chatUrl"] == f"{world['base']}/chat/{body['chatId']}"
    assert body["languageModel"] == {"provider": "openai-compatible", "model": "scripted-1", "displayName": "Scripted"}
    page = httpx.get(body["chatUrl"], timeout=30).text
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page and "<img src=x" not in page


def test_a_failing_model_is_a_tool_error_and_the_server_stays_up(world):
    fake = world["fake"]
    fake.fail(500, times=5)
    res = world["mcp"].call("ask_codebase", {"query": "anything?"})
    assert res.is_error and "scripted-1" in res.text and "500" in res.text
    assert TEST_LLM_TOKEN not in res.text and "Traceback" not in res.text
    fake.reset()
    fake.fail(401, times=1)
    res = world["mcp"].call("ask_codebase", {"query": "anything?"})
    assert res.is_error and "401" in res.text and TEST_LLM_TOKEN not in res.text
    blocking = world["http"].post("/api/chat/blocking", json={"query": "x"})
    assert blocking.status_code in (400, 502)
    assert not world["mcp"].call("list_repos").is_error
    failed = [c for c in world["store"].list_chats(limit=10) if c.status == "FAILED"]
    assert failed and all(TEST_LLM_TOKEN not in (c.error or "") for c in failed)


@pytest.mark.parametrize("args, message", [
    ({"query": "x", "languageModel": {"provider": "openai", "model": "gpt-nope"}}, "not configured"),
    ({"query": "x", "repos": ["github.com/nope/nope"]}, "list_repos"),
    ({"query": ""}, "query"),
    ({"query": "x", "visibility": "SECRET"}, "visibility"),
])
def test_ask_codebase_bad_input(world, args, message):
    res = world["mcp"].call("ask_codebase", args)
    assert res.is_error and message in res.text
    assert world["fake"].requests == []  # refused before any model call


def test_anonymous_private_is_refused(world):
    anon = McpClient(world["url"])
    res = anon.call("ask_codebase", {"query": "x", "visibility": "PRIVATE"})
    assert res.is_error and "PRIVATE" in res.text


def test_rest_errors(world):
    r = world["http"].post("/api/chat/blocking", json={"query": "x", "languageModel": {"provider": "a", "model": "b"}})
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_REQUEST_BODY"
    r = world["http"].post("/api/chat/blocking", json={"query": "x", "extra": 1})
    assert r.status_code == 400
    r = world["http"].post("/api/chat/blocking", json={"query": "x", "repos": ["nope"]})
    assert r.status_code == 404 and r.json()["errorCode"] == "REPOSITORY_NOT_FOUND"
    assert httpx.get(f"{world['base']}/chat/does-not-exist", timeout=30).status_code == 404
