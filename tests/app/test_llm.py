"""codesearch.llm against a scripted model server over real HTTP (tests/fakellm.py): both
providers' request shapes, the agent loop with a small real ToolSet, and model failures."""

from __future__ import annotations

import json
import pickle
import re
import socket
import time

import httpx
import pytest

from codesearch.config import load_config
from codesearch.errors import CodesearchError
from codesearch.llm import (SUPPORTED_PROVIDERS, AgentResult, ModelClient, ModelError, ModelSpec, Reply, ToolCall,
                            ToolSet, run_agent, system_prompt)
from tests.fakellm import FakeModelServer, last_user_text, tool_outputs

KEY = "sk-test-0123456789abcdef"
HEADER_SECRET = "hdr-secret-9876"
ENV = {"FAKE_LLM_KEY": KEY, "FAKE_HDR": HEADER_SECRET}

FILES = {
    "github.com/acme/api": {
        "src/retry.py": "import time\n\nMAX_ATTEMPTS = 5\n\ndef retry(fn):\n    for attempt in range(MAX_ATTEMPTS):\n"
                        "        try:\n            return fn()\n        except IOError:\n            time.sleep(2 ** attempt)\n",
        "src/server.py": "from src.retry import retry\n\n@retry\ndef serve():\n    pass\n",
    },
    "github.com/acme/web": {
        "app.ts": "export const RETRIES = 3;\n",
    },
}


class FileTools:
    """A small real ToolSet: grep and read_file over FILES. Records what it ran."""

    def __init__(self, files=FILES):
        self.files = files
        self.calls: list[tuple[str, dict]] = []

    def specs(self) -> list[dict]:
        return [
            {"name": "grep", "description": "Search file contents with a regular expression.",
             "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"},
                                                                "repo": {"type": "string"}},
                              "required": ["pattern"]}},
            {"name": "read_file", "description": "Read a file of a repository.",
             "input_schema": {"type": "object", "properties": {"repo": {"type": "string"}, "path": {"type": "string"}},
                              "required": ["repo", "path"]}},
        ]

    def call(self, name: str, arguments: dict) -> tuple[str, bool]:
        self.calls.append((name, arguments))
        if name == "grep":
            if "pattern" not in arguments:
                return "grep needs a pattern", True
            try:
                rx = re.compile(arguments["pattern"])
            except re.error as e:
                raise CodesearchError(f"invalid regular expression: {e}") from None
            hits = []
            for repo, files in self.files.items():
                if arguments.get("repo") and arguments["repo"] != repo:
                    continue
                for path, text in files.items():
                    for n, line in enumerate(text.splitlines(), 1):
                        if rx.search(line):
                            hits.append(f"{repo}/{path}:{n}: {line.strip()}")
            return "\n".join(hits) or "no matches", False
        if name == "read_file":
            text = self.files.get(arguments.get("repo", ""), {}).get(arguments.get("path", ""))
            if text is None:
                return f"file {arguments.get('path')!r} not found in {arguments.get('repo')!r}", True
            return "\n".join(f"{n}\t{line}" for n, line in enumerate(text.splitlines(), 1)), False
        raise AssertionError(f"the agent called unknown tool {name}")


@pytest.fixture
def fake():
    with FakeModelServer(api_key=KEY) as server:
        yield server


def openai_spec(fake, **kw) -> ModelSpec:
    return ModelSpec(provider=kw.pop("provider", "openai"), model=kw.pop("model", "gpt-4o"),
                     base_url=fake.base_url + "/v1", token={"env": "FAKE_LLM_KEY"}, **kw)


def anthropic_spec(fake, **kw) -> ModelSpec:
    return ModelSpec(provider="anthropic", model=kw.pop("model", "claude-sonnet-4"), base_url=fake.base_url,
                     token={"env": "FAKE_LLM_KEY"}, **kw)


def client_for(spec, **kw) -> ModelClient:
    kw.setdefault("environ", ENV)
    kw.setdefault("sleep", lambda s: None)
    return ModelClient(spec, **kw)


def cite_first_hit(messages):
    """A final answer citing the first grep hit the tools really returned."""
    first = tool_outputs(messages)[0].splitlines()[0]
    ref, _, code = first.partition(": ")
    return f"The retry policy is in `{ref}`:\n\n```python\n{code}\n```"


def no_secret_in(err: BaseException) -> None:
    for text in (str(err), repr(err), repr(err.args)):
        assert KEY not in text and HEADER_SECRET not in text
    assert "Traceback" not in str(err)


SPECS = {"openai": openai_spec, "anthropic": anthropic_spec}


# ----------------------------------------------------------------------------- specs from the config

def test_model_spec_from_config_and_public_view():
    config = load_config(json.dumps({"models": [
        {"provider": "openai", "model": "gpt-4o", "token": {"env": "K"}, "temperature": 0.2,
         "headers": {"X-Org": "acme", "X-Key": {"env": "H"}}},
        {"provider": "openai-compatible", "model": "llama3", "displayName": "Llama",
         "baseUrl": "http://user:pw@llm.internal/v1", "queryParams": {"api-key": {"env": "Q"}}},
    ]}))
    first = ModelSpec.from_config(config.models[0].raw)
    assert (first.provider, first.model, first.temperature, first.token) == ("openai", "gpt-4o", 0.2, {"env": "K"})
    assert first.headers == {"X-Org": "acme", "X-Key": {"env": "H"}} and first.base_url is None
    assert first.public() == {"provider": "openai", "model": "gpt-4o", "displayName": "gpt-4o"}
    second = ModelSpec.from_config(config.models[1])  # a LanguageModel works too
    assert second.public() == {"provider": "openai-compatible", "model": "llama3", "displayName": "Llama"}
    assert second.query_params == {"api-key": {"env": "Q"}}
    shown = json.dumps([first.public(), second.public()]) + repr(first) + repr(second)
    assert "user:pw" not in shown and "X-Key" not in shown and "api-key" not in shown


# ----------------------------------------------------------------------------- request shapes

def test_openai_request_shape_and_tool_round_trip(fake):
    spec = openai_spec(fake, temperature=0.2, headers={"X-Org": "acme", "X-Secret": {"env": "FAKE_HDR"}})
    fake.add([("grep", {"pattern": "MAX_ATTEMPTS ="})], cite_first_hit)
    tools = FileTools()
    with client_for(spec) as client:
        result = run_agent("Where is the retry policy?", client, tools)

    assert fake.api_paths() == ["/v1/chat/completions"] * 2
    first, second = fake.requests
    h = first["headers"]
    assert h["authorization"] == f"Bearer {KEY}" and "x-api-key" not in h
    assert h["x-org"] == "acme" and h["x-secret"] == HEADER_SECRET and h["content-type"] == "application/json"
    body = first["body"]
    assert body["model"] == "gpt-4o" and body["temperature"] == 0.2 and "tool_choice" not in body
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "code research assistant" in body["messages"][0]["content"]
    assert body["messages"][1]["content"] == "Where is the retry policy?"
    assert body["tools"] == [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                                "parameters": t["input_schema"]}} for t in tools.specs()]
    # the tool call went out as the API wants it, and its result came back with the same id
    msgs = second["body"]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
    (call,) = msgs[2]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "grep"
    assert json.loads(call["function"]["arguments"]) == {"pattern": "MAX_ATTEMPTS ="}
    assert msgs[3]["tool_call_id"] == call["id"]
    assert msgs[3]["content"] == "github.com/acme/api/src/retry.py:3: MAX_ATTEMPTS = 5"

    assert tools.calls == [("grep", {"pattern": "MAX_ATTEMPTS ="})]
    assert "`github.com/acme/api/src/retry.py:3`" in result.answer and "MAX_ATTEMPTS = 5" in result.answer
    assert result.steps == [{"tool": "grep", "arguments": {"pattern": "MAX_ATTEMPTS ="},
                             "output": "github.com/acme/api/src/retry.py:3: MAX_ATTEMPTS = 5", "is_error": False}]
    assert result.model == {"provider": "openai", "model": "gpt-4o", "displayName": "gpt-4o"}
    assert result.usage["requests"] == 2 and result.usage["input_tokens"] > 0 and not result.budget_exhausted


def test_anthropic_request_shape_and_tool_round_trip(fake):
    spec = anthropic_spec(fake, temperature=0.5, headers={"X-Secret": {"env": "FAKE_HDR"}})
    fake.add([("grep", {"pattern": "MAX_ATTEMPTS ="}), ("read_file", {"repo": "github.com/acme/api", "path": "nope.py"})],
             cite_first_hit)
    tools = FileTools()
    with client_for(spec) as client:
        result = run_agent("Where is the retry policy?", client, tools, repos=["github.com/acme/api"])

    assert fake.api_paths() == ["/v1/messages"] * 2
    first, second = fake.requests
    h = first["headers"]
    assert h["x-api-key"] == KEY and "authorization" not in h
    assert h["anthropic-version"] == "2023-06-01" and h["x-secret"] == HEADER_SECRET
    body = first["body"]
    assert body["model"] == "claude-sonnet-4" and body["max_tokens"] == 4096 and body["temperature"] == 0.5
    assert "code research assistant" in body["system"] and "- github.com/acme/api" in body["system"]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Where is the retry policy?"}]}]
    assert body["tools"] == [{"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
                             for t in tools.specs()]
    msgs = second["body"]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    uses = msgs[1]["content"]
    assert [(b["type"], b["name"]) for b in uses] == [("tool_use", "grep"), ("tool_use", "read_file")]
    assert uses[0]["input"] == {"pattern": "MAX_ATTEMPTS ="}
    results = msgs[2]["content"]  # both results in one user turn, ids matching, the failure flagged
    assert [b["tool_use_id"] for b in results] == [b["id"] for b in uses]
    assert results[0]["content"].startswith("github.com/acme/api/src/retry.py:3") and "is_error" not in results[0]
    assert results[1]["is_error"] is True and "not found" in results[1]["content"]

    assert [s["tool"] for s in result.steps] == ["grep", "read_file"]
    assert [s["is_error"] for s in result.steps] == [False, True]
    assert "`github.com/acme/api/src/retry.py:3`" in result.answer
    assert result.model == {"provider": "anthropic", "model": "claude-sonnet-4", "displayName": "claude-sonnet-4"}


def test_anthropic_base_url_may_include_v1_and_text_with_tool_calls_round_trips(fake):
    spec = ModelSpec(provider="anthropic", model="claude", base_url=fake.base_url + "/v1/", token={"env": "FAKE_LLM_KEY"})
    fake.add({"text": "Let me search.", "tool_calls": [("grep", {"pattern": "RETRIES"})]}, "Done.")
    with client_for(spec) as client:
        result = run_agent("q", client, FileTools())
    assert fake.api_paths() == ["/v1/messages"] * 2 and result.answer == "Done."
    assistant = fake.requests[1]["body"]["messages"][1]["content"]
    assert assistant[0] == {"type": "text", "text": "Let me search."} and assistant[1]["type"] == "tool_use"


def test_openai_compatible_and_other_openai_shaped_providers(fake):
    spec = ModelSpec(provider="openai-compatible", model="llama3", base_url=fake.base_url + "/v1",
                     token={"env": "FAKE_LLM_KEY"}, query_params={"api-version": "2024", "sig": {"env": "FAKE_HDR"}})
    fake.add("hello")
    with client_for(spec) as client:
        reply = client.chat([{"role": "user", "content": "hi"}], [])
    assert reply == Reply(text="hello", tool_calls=[], usage=reply.usage, stop_reason="stop")
    assert reply.usage["output_tokens"] >= 0 and set(reply.usage) == {"input_tokens", "output_tokens"}
    req = fake.requests[0]
    assert req["headers"]["authorization"] == f"Bearer {KEY}" and "tools" not in req["body"]
    assert req["query"] == f"api-version=2024&sig={HEADER_SECRET}"
    for provider in ("deepseek", "mistral", "openrouter", "xai"):
        fake.add("ok")
        with client_for(ModelSpec(provider=provider, model="m", base_url=fake.base_url + "/v1",
                                  token={"env": "FAKE_LLM_KEY"})) as client:
            assert client.chat([{"role": "user", "content": "hi"}]).text == "ok"
    assert set(SUPPORTED_PROVIDERS) >= {"openai", "openai-compatible", "anthropic"}


def test_without_a_configured_token_the_providers_variable_is_used(fake):
    fake.add("a", "b")
    with client_for(ModelSpec("openai", "gpt-4o", base_url=fake.base_url + "/v1"),
                    environ={"OPENAI_API_KEY": KEY}) as client:
        assert client.chat([{"role": "user", "content": "hi"}]).text == "a"
    with client_for(ModelSpec("anthropic", "claude", base_url=fake.base_url),
                    environ={"ANTHROPIC_API_KEY": KEY}) as client:
        assert client.chat([{"role": "user", "content": "hi"}]).text == "b"
    assert fake.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    assert fake.requests[1]["headers"]["x-api-key"] == KEY


def test_a_shared_httpx_client_is_used_and_not_closed(fake):
    fake.add("one")
    with httpx.Client() as http:
        with client_for(openai_spec(fake), http=http) as client:
            assert client.chat([{"role": "user", "content": "hi"}]).text == "one"
        assert not http.is_closed


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_fake_rejects_malformed_requests_like_the_real_api(fake, provider):
    """The fake is strict, so the shapes above are really checked: a tool result that answers no
    tool call is a 400, which the client reports as a ModelError."""
    call = ToolCall(id="call_1", name="grep", arguments={"pattern": "x"})
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_other", "content": "out"}]
    tools = FileTools().specs()
    with client_for(SPECS[provider](fake)) as client, pytest.raises(ModelError) as info:
        client.chat(messages, tools)
    assert info.value.status == 400 and "answered 400" in str(info.value) and "call_other" in str(info.value)
    assert fake.remaining == 0 and len(fake.requests) == 1  # 400 is not retried
    no_secret_in(info.value)


# ----------------------------------------------------------------------------- the agent loop

@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_agent_reads_real_files_and_cites_them(fake, provider):
    def read_what_grep_found(messages):
        ref = tool_outputs(messages)[-1].splitlines()[0].split(":")[0]  # github.com/acme/api/src/retry.py
        repo, path = "/".join(ref.split("/")[:3]), "/".join(ref.split("/")[3:])
        return [("read_file", {"repo": repo, "path": path})]

    def answer(messages):
        listing = tool_outputs(messages)[-1]
        line = next(l for l in listing.splitlines() if "time.sleep" in l)
        n, code = line.split("\t")
        return f"It backs off exponentially at `github.com/acme/api/src/retry.py:{n}`:\n```\n{code.strip()}\n```"

    fake.add([("grep", {"pattern": "def retry"})], read_what_grep_found, answer)
    steps_seen = []
    tools = FileTools()
    with client_for(SPECS[provider](fake)) as client:
        result = run_agent("How does retry back off?", client, tools, on_step=steps_seen.append)
    assert isinstance(result, AgentResult)
    assert tools.calls == [("grep", {"pattern": "def retry"}),
                           ("read_file", {"repo": "github.com/acme/api", "path": "src/retry.py"})]
    assert "`github.com/acme/api/src/retry.py:10`" in result.answer and "time.sleep(2 ** attempt)" in result.answer
    assert steps_seen == result.steps and len(result.steps) == 2 and result.usage["requests"] == 3


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_unknown_tools_are_errors_for_the_model_not_crashes(fake, provider):
    fake.add([("delete_repo", {"name": "x"})],
             lambda messages: [("grep", {"pattern": "RETRIES"})] if "unknown tool" in tool_outputs(messages)[-1] else "??",
             lambda messages: "Found: " + tool_outputs(messages)[-1])
    tools = FileTools()
    with client_for(SPECS[provider](fake)) as client:
        result = run_agent("q", client, tools)
    assert result.steps[0]["tool"] == "delete_repo" and result.steps[0]["is_error"] is True
    assert "unknown tool 'delete_repo'" in result.steps[0]["output"] and "grep, read_file" in result.steps[0]["output"]
    assert tools.calls == [("grep", {"pattern": "RETRIES"})]  # the unknown tool never reached the ToolSet
    assert result.answer == "Found: github.com/acme/web/app.ts:1: export const RETRIES = 3;"


def test_invalid_json_arguments_are_an_error_for_that_call_only(fake):
    fake.add([("grep", '{"pattern": "RETRIES"'), ("grep", {"pattern": "MAX_ATTEMPTS ="})],
             lambda messages: "Results: " + " | ".join(tool_outputs(messages)))
    tools = FileTools()
    with client_for(openai_spec(fake)) as client:
        result = run_agent("q", client, tools)
    bad, good = result.steps
    assert bad["is_error"] and "not valid JSON" in bad["output"] and bad["arguments"] == {}
    assert not good["is_error"] and tools.calls == [("grep", {"pattern": "MAX_ATTEMPTS ="})]
    assert "not valid JSON" in result.answer and "retry.py:3" in result.answer
    # the malformed arguments were sent back exactly as the model wrote them
    sent = fake.requests[1]["body"]["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"pattern": "RETRIES"'


@pytest.mark.parametrize("provider, arguments", [("openai", "[1, 2]"), ("anthropic", "just a string")])
def test_non_object_arguments_are_an_error_for_that_call(fake, provider, arguments):
    """OpenAI: arguments that are JSON but not an object. Anthropic sends `input` parsed; a server
    sending a non-object anyway gets an error result (and `{}` echoed back, which it accepts)."""
    fake.add([("grep", arguments)], lambda messages: tool_outputs(messages)[-1])
    tools = FileTools()
    with client_for(SPECS[provider](fake)) as client:
        result = run_agent("q", client, tools)
    assert result.steps[0]["is_error"] and "must be a JSON object" in result.answer and tools.calls == []


def test_tool_errors_and_exceptions_go_back_to_the_model(fake):
    class Broken(FileTools):
        def call(self, name, arguments):
            if arguments.get("pattern") == "boom":
                raise RuntimeError("internal detail /secret/path")
            return super().call(name, arguments)

    fake.add([("grep", {"pattern": "("}), ("grep", {"pattern": "boom"}), ("grep", {})],
             lambda messages: "\n".join(tool_outputs(messages)))
    with client_for(openai_spec(fake)) as client:
        result = run_agent("q", client, Broken())
    outputs = [s["output"] for s in result.steps]
    assert all(s["is_error"] for s in result.steps)
    assert outputs[0].startswith("grep failed: invalid regular expression")
    assert outputs[1] == "grep failed with an internal error (RuntimeError); try another approach"
    assert outputs[2] == "grep needs a pattern"
    assert "/secret/path" not in result.answer


def test_long_tool_outputs_are_truncated_for_the_model_and_in_steps(fake):
    big = {"github.com/acme/big": {"f.txt": "needle " + "x" * 50 + "\n" * 1 + ("needle line\n" * 3000)}}
    fake.add([("grep", {"pattern": "needle"})], lambda messages: f"len={len(tool_outputs(messages)[-1])}")
    with client_for(openai_spec(fake)) as client:
        result = run_agent("q", client, FileTools(big), max_tool_output_chars=1000)
    sent = fake.requests[1]["body"]["messages"][-1]["content"]
    assert sent.startswith("github.com/acme/big/f.txt:1: needle") and "[output truncated: showing 1000 of" in sent
    assert len(sent) < 1300 and result.answer == f"len={len(sent)}"
    assert len(result.steps[0]["output"]) < 4100 and "more characters]" in result.steps[0]["output"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_step_budget_ends_with_one_request_for_an_answer_without_tools(fake, provider):
    def final(messages):
        assert "Do not call any tools" in last_user_text(messages)
        return "Partial answer: " + tool_outputs(messages)[0]

    fake.add(*[[("grep", {"pattern": "RETRIES"})]] * 3, final)
    tools = FileTools()
    with client_for(SPECS[provider](fake)) as client:
        result = run_agent("q", client, tools, max_steps=3)
    assert len(tools.calls) == 3 and len(fake.requests) == 4 and result.budget_exhausted
    last = fake.requests[-1]["body"]
    assert last["tool_choice"] == ("none" if provider == "openai" else {"type": "none"}) and last["tools"]
    assert result.answer.startswith("Partial answer: github.com/acme/web/app.ts:1")
    assert "budget of 3 steps ran out" in result.answer


def test_the_budget_note_stands_alone_when_the_model_still_does_not_answer(fake):
    fake.add([("grep", {"pattern": "RETRIES"})], [("grep", {"pattern": "again"})])  # ignores tool_choice none
    with client_for(openai_spec(fake)) as client:
        result = run_agent("q", client, FileTools(), max_steps=1)
    assert result.budget_exhausted and result.answer.startswith("_The research budget of 1 steps ran out")
    assert len(result.steps) == 1  # the tool calls of the final request were not run


def test_too_many_tool_calls_in_one_turn_are_capped(fake):
    fake.add([("grep", {"pattern": f"p{i}"}) for i in range(12)], "done")
    tools = FileTools()
    with client_for(openai_spec(fake)) as client:
        result = run_agent("q", client, tools)
    assert len(tools.calls) == 10 and len(result.steps) == 12
    assert result.steps[-1]["is_error"] and "at most 10 tool calls" in result.steps[-1]["output"]


def test_system_prompt_mentions_references_and_repos():
    assert "`repo/path:line`" in system_prompt() and "search" in system_prompt().lower()
    assert "- github.com/a/b\n- github.com/c/d" in system_prompt(["github.com/a/b", "github.com/c/d"])
    assert isinstance(FileTools(), ToolSet)


# ----------------------------------------------------------------------------- model failures

def test_a_5xx_is_retried_once_then_succeeds(fake):
    fake.fail(503, headers={"Retry-After": "1"})
    fake.add("recovered")
    waits = []
    with client_for(openai_spec(fake), sleep=waits.append) as client:
        assert client.chat([{"role": "user", "content": "hi"}]).text == "recovered"
    assert waits == [1.0] and len(fake.requests) == 2


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_persistent_500_is_a_model_error_after_one_retry(fake, provider):
    fake.fail(500, times=5)
    waits = []
    with client_for(SPECS[provider](fake), sleep=waits.append, retry_wait_s=0.25) as client:
        with pytest.raises(ModelError) as info:
            run_agent("q", client, FileTools())
    e = info.value
    model = "gpt-4o (openai)" if provider == "openai" else "claude-sonnet-4 (anthropic)"
    assert str(e) == f"language model {model} answered 500: fake api_error (500)"
    assert (e.status, e.error_code, e.status_code) == (500, "MODEL_ERROR", 502) and isinstance(e, CodesearchError)
    assert waits == [0.25] and len(fake.requests) == 2
    no_secret_in(e)


def test_429_with_a_long_retry_after_is_not_waited_for(fake):
    fake.fail(429, headers={"Retry-After": "3600"})
    waits = []
    with client_for(openai_spec(fake), sleep=waits.append) as client, pytest.raises(ModelError, match="answered 429"):
        client.chat([{"role": "user", "content": "hi"}])
    assert waits == [] and len(fake.requests) == 1


def test_429_retry_after_as_an_http_date(fake):
    from email.utils import format_datetime
    from datetime import datetime, timedelta, timezone

    fake.fail(429, headers={"Retry-After": format_datetime(datetime.now(timezone.utc) + timedelta(seconds=2), usegmt=True)})
    fake.add("ok")
    waits = []
    with client_for(openai_spec(fake), sleep=waits.append) as client:
        assert client.chat([{"role": "user", "content": "hi"}]).text == "ok"
    assert len(waits) == 1 and 0 < waits[0] <= 2


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_wrong_key_is_401_and_the_echoed_key_is_masked(fake, provider):
    fake.api_key = "sk-the-right-one"
    with client_for(SPECS[provider](fake)) as client, pytest.raises(ModelError) as info:
        client.chat([{"role": "user", "content": "hi"}])
    e = info.value
    assert e.status == 401 and "answered 401: Incorrect API key provided: ***" in str(e)
    assert len(fake.requests) == 1  # 401 is not retried
    no_secret_in(e)
    assert KEY in json.dumps(fake.requests[0]["headers"])  # ... although the key was sent


def test_a_timeout_is_a_model_error(fake):
    fake.hang(2)
    fake.add("too late")
    spec = openai_spec(fake)
    start = time.monotonic()
    with client_for(spec, timeout_s=0.3) as client, pytest.raises(ModelError) as info:
        client.chat([{"role": "user", "content": "hi"}])
    assert time.monotonic() - start < 1.5
    assert str(info.value) == f"language model gpt-4o (openai) did not answer within 0.3s ({fake.base_url}/v1/chat/completions)"
    no_secret_in(info.value)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_body_that_is_not_json_is_a_model_error(fake, provider):
    fake.send_invalid_json()
    with client_for(SPECS[provider](fake)) as client, pytest.raises(ModelError) as info:
        client.chat([{"role": "user", "content": "hi"}])
    assert "answered 200 with a body that is not JSON (content-type application/json)" in str(info.value)


@pytest.mark.parametrize("provider, body", [("openai", {"choices": []}), ("openai", {"choices": [{"message": "x"}]}),
                                            ("anthropic", {"type": "message"}),
                                            ("anthropic", {"content": [{"type": "tool_use", "name": "grep"}]})])
def test_an_unexpected_answer_shape_is_a_model_error(fake, provider, body):
    fake.fail(200, body=body)
    with client_for(SPECS[provider](fake)) as client, pytest.raises(ModelError, match="answered with an unexpected response"):
        client.chat([{"role": "user", "content": "hi"}])


def test_connection_refused_is_a_model_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = ModelSpec("openai-compatible", "local", base_url=f"http://user:{KEY}@127.0.0.1:{port}/v1?key={KEY}",
                     token={"env": "FAKE_LLM_KEY"})
    with client_for(spec) as client, pytest.raises(ModelError) as info:
        client.chat([{"role": "user", "content": "hi"}])
    assert str(info.value) == (f"language model local (openai-compatible) cannot be reached at "
                               f"http://127.0.0.1:{port}/v1/chat/completions: connection refused")
    no_secret_in(info.value)


def test_a_missing_token_variable_names_the_variable_and_sends_nothing(fake):
    with client_for(openai_spec(fake), environ={}) as client, pytest.raises(ModelError) as info:
        client.chat([{"role": "user", "content": "hi"}])
    assert str(info.value) == ('language model gpt-4o (openai) cannot be used: token: environment variable '
                               '"FAKE_LLM_KEY" is not set')
    spec = openai_spec(fake, headers={"X-Secret": {"env": "MISSING_HDR"}})
    with client_for(spec) as client, pytest.raises(ModelError, match='headers.X-Secret: environment variable "MISSING_HDR"'):
        client.chat([{"role": "user", "content": "hi"}])
    assert fake.requests == []


def test_unsupported_providers_and_missing_base_urls_are_refused():
    with pytest.raises(ModelError, match=r"provider 'ollama' is not supported by this server \(supported: openai, "):
        ModelClient(ModelSpec("ollama", "llama3"))
    with pytest.raises(ModelError, match="baseUrl is required for provider openai-compatible"):
        ModelClient(ModelSpec("openai-compatible", "llama"))
    with pytest.raises(ModelError, match="needs a provider and a model"):
        ModelSpec.from_config({"provider": "openai"})


def test_model_errors_pickle_round_trip():
    e = ModelError("language model x (openai) answered 500: boom", "x", 500)
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is ModelError and str(again) == str(e) and (again.model, again.status) == ("x", 500)
    assert (again.error_code, again.status_code) == ("MODEL_ERROR", 502)


def test_model_errors_propagate_from_the_agent_after_tool_steps(fake):
    fake.add([("grep", {"pattern": "RETRIES"})])
    fake.fail(401, path="/v1/chat/completions", body={"error": {"message": "key revoked"}})
    fake._faults[-1]["times"] = 0  # armed below, after the first turn
    steps = []

    def arm(step):
        steps.append(step)
        fake._faults[-1]["times"] = 1

    with client_for(openai_spec(fake)) as client, pytest.raises(ModelError, match="answered 401: key revoked"):
        run_agent("q", client, FileTools(), on_step=arm)
    assert len(steps) == 1 and len(fake.requests) == 2


def test_agent_reports_each_call_before_it_runs_and_sends_a_chats_earlier_turns():
    """`on_call` comes before the tool runs (the web UI shows it live); `history` puts the
    earlier questions and answers of a chat before the new question."""
    events = []

    class Tools:
        def specs(self):
            return [{"name": "grep", "description": "search", "input_schema": {"type": "object", "properties": {}}}]

        def call(self, name, arguments):
            events.append(("ran", name))
            return "found", False

    with FakeModelServer([[("grep", {"pattern": "x"})], "done"], api_key=KEY) as fake:
        spec = ModelSpec("openai", "gpt-4o", base_url=fake.base_url + "/v1", token={"env": "FAKE_LLM_KEY"})
        with client_for(spec) as client:
            result = run_agent("and then?", client, Tools(), history=[("first?", "first answer")],
                               on_call=lambda call: events.append(("call", call.name, call.arguments)),
                               on_step=lambda step: events.append(("step", step["tool"])))
        sent = [(m["role"], m["content"]) for m in fake.bodies[0]["messages"]]
    assert events == [("call", "grep", {"pattern": "x"}), ("ran", "grep"), ("step", "grep")]
    assert sent[1:] == [("user", "first?"), ("assistant", "first answer"), ("user", "and then?")]
    assert result.answer == "done"


@pytest.mark.parametrize("provider", ["openai", "openai-compatible"])
def test_chat_completions_stream_the_text_as_it_is_produced(provider):
    """With `on_text`, Chat Completions providers are asked to stream (``stream: true``); the
    pieces reach `on_text` as they arrive and the `Reply` is the same as unstreamed."""
    pieces = []
    with FakeModelServer([{"text": "Looking for it now.", "tool_calls": [("grep", {"pattern": "def retry", "repo": "x"})]},
                          "It is in `src/retry.py:5`."], api_key=KEY) as fake:
        spec = ModelSpec(provider, "m1", base_url=fake.base_url + "/v1", token={"env": "FAKE_LLM_KEY"})
        with client_for(spec) as client:
            first = client.chat([{"role": "user", "content": "where?"}],
                                [{"name": "grep", "description": "search", "input_schema": {"type": "object"}}],
                                on_text=pieces.append)
            assert pieces == ["Looking ", "for ", "it ", "now."]
            assert first.text == "Looking for it now."
            assert [(c.name, c.arguments) for c in first.tool_calls] == [("grep", {"pattern": "def retry", "repo": "x"})]
            assert first.tool_calls[0].id.startswith("call_") and first.stop_reason == "tool_calls"
            pieces.clear()
            second = client.chat([{"role": "user", "content": "where?"}], on_text=pieces.append)
            assert "".join(pieces) == second.text == "It is in `src/retry.py:5`." and len(pieces) == 4
        body = fake.bodies[0]
        assert body["stream"] is True
        if provider == "openai":  # usage is asked for where the option is known to be accepted
            assert body["stream_options"] == {"include_usage": True} and first.usage["input_tokens"] > 0
        else:
            assert "stream_options" not in body
        # without `on_text`, nothing is streamed
        fake.add("plain")
        with client_for(spec) as client:
            assert client.chat([{"role": "user", "content": "x"}]).text == "plain"
        assert "stream" not in fake.bodies[-1]


def test_a_streamed_request_is_retried_and_a_bad_answer_is_a_model_error():
    with FakeModelServer([], api_key=KEY) as fake:
        fake.fail(429, times=1, body={"error": {"message": "slow down"}}, headers={"Retry-After": "0"})
        fake.add("after the retry")
        spec = ModelSpec("openai", "m1", base_url=fake.base_url + "/v1", token={"env": "FAKE_LLM_KEY"})
        pieces = []
        with client_for(spec) as client:
            assert client.chat([{"role": "user", "content": "x"}], on_text=pieces.append).text == "after the retry"
        assert pieces == ["after ", "the ", "retry"]
        fake.send_invalid_json()
        with client_for(spec) as client, pytest.raises(ModelError, match="not JSON"):
            client.chat([{"role": "user", "content": "x"}], on_text=pieces.append)


def test_anthropic_streams_the_text_as_it_is_produced():
    pieces = []
    with FakeModelServer([{"text": "Let me search.", "tool_calls": [("grep", {"pattern": "def retry"})]},
                          "Found in `src/retry.py:5`."], api_key=KEY) as fake:
        spec = ModelSpec("anthropic", "claude", base_url=fake.base_url, token={"env": "FAKE_LLM_KEY"})
        with client_for(spec) as client:
            tools = [{"name": "grep", "description": "search", "input_schema": {"type": "object"}}]
            first = client.chat([{"role": "user", "content": "where?"}], tools, on_text=pieces.append)
            assert pieces == ["Let ", "me ", "search."] and first.text == "Let me search."
            assert [(c.name, c.arguments) for c in first.tool_calls] == [("grep", {"pattern": "def retry"})]
            assert first.tool_calls[0].id.startswith("toolu_") and first.stop_reason == "tool_use"
            assert first.usage["input_tokens"] > 0 and first.usage["output_tokens"] > 0
            pieces.clear()
            second = client.chat([{"role": "user", "content": "where?"}], tools, on_text=pieces.append)
            assert "".join(pieces) == second.text == "Found in `src/retry.py:5`." and second.tool_calls == []
    assert fake.bodies[0]["stream"] is True and "stream_options" not in fake.bodies[0]
