"""Streamed answers from every provider, against the fake model server speaking each provider's
real streaming wire format on 127.0.0.1 (tests/fakellm.py, tests/fakellm_streams.py): the
pieces arrive one by one, the streamed `Reply` equals the plain one, tool calls come through
streams, and broken streams (error events, cut connections, corrupted AWS event-stream frames)
are clear `ModelError`s. Also the AWS event-stream codec against published frames, and the
Server-Sent Events reader."""

from __future__ import annotations

import json
import re
import struct
import zlib

import pytest

from codesearch.llm import ModelError, ModelSpec, eventstream, run_agent, sse
from codesearch.llm.eventstream import FrameError
from tests.fakellm import FakeModelServer, service_account_keys
from tests.app.test_llm import KEY, FileTools, cite_first_hit, client_for, no_secret_in

AWS_KEY_ID, AWS_SECRET = "AKIDSTREAMKEY123", "stream/secret+access-key-0123456789"
TOOLS = [{"name": "grep", "description": "search", "input_schema": {"type": "object"}}]
HI = [{"role": "user", "content": "where is the retry policy?"}]
TOOL_STEP = {"text": "Let me search the code.", "tool_calls": [("grep", {"pattern": "def retry", "repo": "x"})]}


def _vertex_key_file(tmp_path, server, private) -> str:
    path = tmp_path / "sa.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": private,
        "client_email": "codesearch@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": server.base_url + "/token"}))
    return str(path)


# provider -> (model spec for the fake at `server`, environ, the path a streamed request goes to)
def _setup(provider: str, server: FakeModelServer, key_file: str) -> tuple[ModelSpec, dict, str]:
    base = server.base_url
    if provider in ("openai", "openai-compatible"):
        return (ModelSpec(provider, "m1", base_url=base + "/v1", token={"env": "FAKE_LLM_KEY"}), {"FAKE_LLM_KEY": KEY},
                "/v1/chat/completions")
    if provider == "azure":
        return (ModelSpec("azure", "dep", base_url=base + "/openai", token={"env": "FAKE_LLM_KEY"}),
                {"FAKE_LLM_KEY": KEY}, "/openai/v1/chat/completions")
    if provider == "anthropic":
        return ModelSpec("anthropic", "claude", base_url=base, token={"env": "FAKE_LLM_KEY"}), {"FAKE_LLM_KEY": KEY}, "/v1/messages"
    if provider == "google-generative-ai":
        return (ModelSpec(provider, "gemini-2.5-pro", base_url=base + "/v1beta", token={"env": "FAKE_LLM_KEY"}),
                {"FAKE_LLM_KEY": KEY}, "/v1beta/models/gemini-2.5-pro:streamGenerateContent")
    if provider == "google-vertex":
        prefix = "/v1/projects/p/locations/us-central1/publishers/google"
        return (ModelSpec(provider, "gemini-2.5-pro", base_url=base + prefix, options={"credentials": {"env": "SA"}}),
                {"SA": key_file}, prefix + "/models/gemini-2.5-pro:streamGenerateContent")
    if provider == "google-vertex-anthropic":
        prefix = "/v1/projects/p/locations/us-east5/publishers/anthropic"
        return (ModelSpec(provider, "claude-sonnet-4", base_url=base + prefix, options={"credentials": {"env": "SA"}}),
                {"SA": key_file}, prefix + "/models/claude-sonnet-4:streamRawPredict")
    if provider == "amazon-bedrock":
        return (ModelSpec(provider, "anthropic.claude-3-7-sonnet-20250219-v1:0", base_url=base,
                          options={"region": "eu-central-1", "accessKeyId": {"env": "AWS_KEY"},
                                   "accessKeySecret": {"env": "AWS_SECRET"}}),
                {"AWS_KEY": AWS_KEY_ID, "AWS_SECRET": AWS_SECRET},
                "/model/anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse-stream")
    raise AssertionError(provider)


PROVIDERS = ["openai", "openai-compatible", "azure", "anthropic", "google-generative-ai", "google-vertex",
             "google-vertex-anthropic", "amazon-bedrock"]


@pytest.fixture
def served(tmp_path):
    """`make(provider) -> (server, spec, environ, stream path)` with one fake serving it."""
    private, public = service_account_keys()
    servers = []

    def make(provider: str):
        server = FakeModelServer(api_key=KEY, aws=(AWS_KEY_ID, AWS_SECRET), google_public_key=public)
        server.start()
        servers.append(server)
        return (server, *_setup(provider, server, _vertex_key_file(tmp_path, server, private)))

    yield make
    for server in servers:
        server.stop()


def _same(reply, usage: bool = True) -> tuple:
    """What a reply says, without its tool call ids (fresh for every answer)."""
    return (reply.text, [(c.name, c.arguments, c.error) for c in reply.tool_calls], reply.usage if usage else None,
            reply.stop_reason)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_provider_streams_pieces_and_the_streamed_reply_equals_the_plain_one(served, provider):
    server, spec, environ, stream_path = served(provider)
    server.add(TOOL_STEP, TOOL_STEP, "It is in `src/retry.py:5`.", "It is in `src/retry.py:5`.")
    pieces: list[str] = []
    usage = provider != "openai-compatible"  # usage is not asked of a stream where the option may be refused
    with client_for(spec, environ=environ) as client:
        plain = client.chat(HI, TOOLS)
        streamed = client.chat(HI, TOOLS, on_text=pieces.append)
        assert pieces == ["Let ", "me ", "search ", "the ", "code."]
        assert _same(streamed, usage) == _same(plain, usage)
        assert streamed.text == "Let me search the code." and (streamed.usage["input_tokens"] > 0) == usage
        assert [(c.name, c.arguments) for c in streamed.tool_calls] == [("grep", {"pattern": "def retry", "repo": "x"})]
        assert streamed.tool_calls[0].id and streamed.tool_calls[0].id != plain.tool_calls[0].id
        pieces.clear()
        plain, streamed = client.chat(HI, TOOLS), client.chat(HI, TOOLS, on_text=pieces.append)
        assert "".join(pieces) == streamed.text == "It is in `src/retry.py:5`." and len(pieces) == 4
        assert _same(streamed, usage) == _same(plain, usage) and streamed.tool_calls == []
    api = [r for r in server.requests if r["path"] != "/token"]
    assert [r["status"] for r in api] == [200] * 4  # credentials (Bedrock: the signature) accepted
    assert [r["path"] for r in api][1::2] == [stream_path] * 2
    if stream_path.endswith(":streamGenerateContent"):
        assert api[1]["query"] == "alt=sse"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_agent_streams_its_answer_with_every_provider(served, provider):
    """Tool calls read from streams run, their results go back, and the answer streams."""
    server, spec, environ, _ = served(provider)
    server.add([("grep", {"pattern": "MAX_ATTEMPTS ="})], cite_first_hit)
    server.stream_delay = 0.01
    pieces: list[str] = []
    with client_for(spec, environ=environ) as client:
        result = run_agent("Where is the retry policy?", client, FileTools(), on_text=pieces.append)
    assert "`github.com/acme/api/src/retry.py:3`" in result.answer
    assert "".join(pieces).strip() == result.answer and len(pieces) > 5
    assert [s["tool"] for s in result.steps] == ["grep"] and not result.steps[0]["is_error"]


BROKEN = {  # fault -> what the error says, per provider family (None: the same for all)
    "error": {"chat": "failed while answering: The server had an error while processing your request. (server_error)",
              "anthropic": "failed while answering: Overloaded (overloaded_error)",
              "gemini": "failed while answering: The model is overloaded. Please try again later. (UNAVAILABLE)",
              "bedrock": "failed while answering: The model stream was interrupted. (modelStreamErrorException)"},
    "cut": {"chat": "ended its stream before the answer was complete (no finish_reason)",
            "anthropic": "ended its stream before the answer was complete (no message_stop)",
            "gemini": "ended its stream before the answer was complete (no finishReason)",
            "bedrock": "the stream ended inside a message ("},
    "not-json": {None: "sent a stream event that is not JSON"},
    "crc": {"bedrock": "a message's CRC does not match (the stream is corrupted)"},
    "prelude": {"bedrock": "a message's prelude CRC does not match (the stream is corrupted)"},
}
FAMILY = {"openai": "chat", "anthropic": "anthropic", "google-generative-ai": "gemini", "google-vertex": "gemini",
          "google-vertex-anthropic": "anthropic", "amazon-bedrock": "bedrock"}
BROKEN_CASES = [(p, fault, messages.get(FAMILY[p], messages.get(None)))
                for p in FAMILY for fault, messages in BROKEN.items() if FAMILY[p] in messages or None in messages]


@pytest.mark.parametrize("provider, fault, message", BROKEN_CASES, ids=[f"{p}-{f}" for p, f, _ in BROKEN_CASES])
def test_broken_streams_are_clear_model_errors(served, provider, fault, message):
    server, spec, environ, _ = served(provider)
    server.add("The retry policy lives in src/retry.py, see MAX_ATTEMPTS.", "after the failure")
    server.break_stream(fault)
    pieces: list[str] = []
    with client_for(spec, environ=environ) as client:
        with pytest.raises(ModelError) as info:
            client.chat(HI, on_text=pieces.append)
        assert str(info.value).startswith(f"language model {spec.model} ({provider}) {message}")
        no_secret_in(info.value)
        assert AWS_SECRET not in str(info.value)
        # the stream is not retried (pieces may already be shown); the next request works
        assert len([r for r in server.requests if r["path"] != "/token"]) == 1
        assert client.chat(HI, on_text=pieces.append).text == "after the failure"


def test_a_plain_answer_to_a_streamed_request_is_read_as_such(served):
    server, spec, environ, _ = served("amazon-bedrock")
    answer = {"output": {"message": {"role": "assistant", "content": [{"text": "plain words"}]}},
              "stopReason": "end_turn", "usage": {"inputTokens": 3, "outputTokens": 2}}
    server.fail(200, body=answer)
    pieces: list[str] = []
    with client_for(spec, environ=environ) as client:
        assert client.chat(HI, on_text=pieces.append).text == "plain words"
    assert pieces == ["plain words"]


def test_a_tool_input_that_is_not_json_reaches_the_model_as_an_error(served):
    server, spec, environ, _ = served("amazon-bedrock")
    server.add([("grep", '{"pattern": ')])  # the model wrote broken JSON as the tool input
    with client_for(spec, environ=environ) as client:
        reply = client.chat(HI, TOOLS, on_text=lambda piece: None)
    (call,) = reply.tool_calls
    assert call.name == "grep" and call.arguments == {} and call.error == "the tool input must be a JSON object"


# ------------------------------------------------------------------------------ AWS event-stream codec

# Published frames (the Elixir event_stream package's documented examples): `{"foo": "bar"}`
# without headers, and with a content-type header.
FOO = b'{"foo": "bar"}'
FRAME_NO_HEADERS = bytes([0, 0, 0, 30, 0, 0, 0, 0, 186, 242, 246, 138]) + FOO + bytes([174, 114, 88, 228])
FRAME_CONTENT_TYPE = (bytes([0, 0, 0, 62, 0, 0, 0, 32, 64, 93, 249, 70, 12]) + b"content-type" + bytes([7, 0, 16])
                      + b"application/json" + FOO + bytes([111, 162, 191, 59]))


def test_eventstream_encodes_the_published_frames():
    assert eventstream.encode({}, FOO) == FRAME_NO_HEADERS
    assert eventstream.encode({"content-type": "application/json"}, FOO) == FRAME_CONTENT_TYPE


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_eventstream_decodes_frames_split_anywhere(size):
    data = FRAME_NO_HEADERS + FRAME_CONTENT_TYPE
    messages = list(eventstream.decode(data[i:i + size] for i in range(0, len(data), size)))
    assert [(m.headers, m.payload) for m in messages] == [({}, FOO), ({"content-type": "application/json"}, FOO)]


def _frame(raw_headers: bytes, payload: bytes) -> bytes:
    """A frame built by hand (not by `encode`), for header value types `encode` does not write."""
    prelude = struct.pack("!II", 16 + len(raw_headers) + len(payload), len(raw_headers))
    head = prelude + struct.pack("!I", zlib.crc32(prelude)) + raw_headers + payload
    return head + struct.pack("!I", zlib.crc32(head))


def test_eventstream_reads_every_header_value_type():
    def header(name: str, kind: int, value: bytes) -> bytes:
        return bytes([len(name)]) + name.encode() + bytes([kind]) + value

    raw = (header("t", 0, b"") + header("f", 1, b"") + header("b", 2, struct.pack("!b", -3))
           + header("s", 3, struct.pack("!h", -300)) + header("i", 4, struct.pack("!i", 70000))
           + header("l", 5, struct.pack("!q", 2 ** 40)) + header("a", 6, struct.pack("!H", 3) + b"\x00\x01\x02")
           + header(":event-type", 7, struct.pack("!H", 9) + "métadata".encode()) + header("ts", 8, struct.pack("!q", 1700000000000))
           + header("u", 9, bytes(range(16))))
    (message,) = eventstream.decode([_frame(raw, b"{}")])
    assert message.headers == {"t": True, "f": False, "b": -3, "s": -300, "i": 70000, "l": 2 ** 40, "a": b"\x00\x01\x02",
                               ":event-type": "métadata",
                               "ts": 1700000000000, "u": bytes(range(16))}


MALFORMED = [
    ("bad message crc", FRAME_NO_HEADERS[:-1] + b"\x00", "a message's CRC does not match"),
    ("bad prelude crc", FRAME_NO_HEADERS[:8] + b"\x00\x00\x00\x00" + FRAME_NO_HEADERS[12:], "prelude CRC does not match"),
    ("cut short", FRAME_CONTENT_TYPE[:40], "the stream ended inside a message (40 bytes left over)"),
    ("unknown header type", _frame(bytes([1]) + b"x" + bytes([42]), b""), "header 'x' has an unknown value type 42"),
    ("header past the end", _frame(bytes([1]) + b"x" + bytes([7, 0, 9]) + b"abc", b""), "a header value runs past"),
    ("duplicate header", _frame((bytes([1]) + b"x" + bytes([0])) * 2, b""), "header 'x' appears twice"),
]


@pytest.mark.parametrize("data, message", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_eventstream_refuses_malformed_frames(data, message):
    with pytest.raises(FrameError, match=re.escape(message)):
        list(eventstream.decode([data]))


def test_eventstream_refuses_lengths_that_do_not_add_up():
    prelude = struct.pack("!II", 20, 30)  # headers longer than the whole message
    frame = prelude + struct.pack("!I", zlib.crc32(prelude)) + bytes(8)
    with pytest.raises(FrameError, match=r"lengths do not add up \(total 20, headers 30\)"):
        list(eventstream.decode([frame]))


# ------------------------------------------------------------------------------ Server-Sent Events

def test_sse_joins_data_lines_skips_comments_and_reads_a_last_event_without_blank_line():
    lines = [": keep-alive", "event: message_start", 'data: {"a":', "data: 1}", "", 'data: {"b": 2}']
    assert list(sse.events(lines)) == [("message_start", {"a": 1}), ("", {"b": 2})]
    assert list(sse.events(['data: {"x": 1}', "", "data: [DONE]", "", 'data: {"never": 1}'])) == [("", {"x": 1})]


@pytest.mark.parametrize("line, message", [
    ("data: [1, 2]", "sent a stream event that is not an object"),
    ('data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
     "failed while answering: Overloaded (overloaded_error)"),
    ('data: {"error": "quota"}', "failed while answering: quota"),
])
def test_sse_errors(line, message):
    with pytest.raises(sse.StreamError, match=re.escape(message)):
        list(sse.events([line, ""]))


def test_an_on_text_failure_is_the_callers_own_error_not_the_models(served):
    server, spec, environ, _ = served("google-generative-ai")
    server.add("some words")

    def broken(piece: str) -> None:
        raise KeyError("the page went away")

    with client_for(spec, environ=environ) as client, pytest.raises(KeyError, match="the page went away"):
        client.chat(HI, on_text=broken)
