"""Every model provider of the config schema, against a scripted server speaking its API on
127.0.0.1 (tests/fakellm.py): Azure OpenAI, Anthropic with a bearer token, the Gemini API,
Gemini and Anthropic on Vertex AI (a real service-account key exchanged for a token by
google-auth), Amazon Bedrock (AWS Signature V4, checked against AWS's published test vectors
and recomputed by the server), and what each config field turns into on the wire."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from codesearch import cli
from codesearch.config import load_config, load_schema
from codesearch.errors import ConfigError
from codesearch.llm import ModelClient, ModelError, ModelSpec, run_agent, sigv4
from codesearch.config import model_providers as provider_table
from codesearch.llm.dialects.gemini import parameters
from tests.fakellm import FakeModelServer, service_account_keys
from tests.app.test_llm import ENV, KEY, FileTools, cite_first_hit, client_for, no_secret_in

AWS_KEY_ID, AWS_SECRET, AWS_SESSION = "AKIDTESTKEY123", "test/secret+access-key-0123456789", "session-token-abc"
AWS_ENV = {"AWS_KEY": AWS_KEY_ID, "AWS_SECRET": AWS_SECRET, "AWS_SESSION": AWS_SESSION}
HI = [{"role": "user", "content": "hi"}]


def spec(**entry) -> ModelSpec:
    """A spec from a `models` entry as written in a config file (and checked by our schema)."""
    config = load_config(json.dumps({"models": [entry]}), environ={})
    return ModelSpec.from_config(config.models[0])


# ------------------------------------------------------------------------------------ AWS SigV4

# AWS's published signature test suite: credentials AKIDEXAMPLE / wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY,
# region us-east-1, service "service", 2015-08-30T12:36:00Z, host example.amazonaws.com.
SIGV4_SUITE = [
    ("get-vanilla", "GET", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    ("get-vanilla-query-order-key-case", "GET", "https://example.amazonaws.com/?Param2=value2&Param1=value1",
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
    ("post-vanilla", "POST", "https://example.amazonaws.com/", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
    ("get-utf8", "GET", "https://example.amazonaws.com/\u1234", "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"),
]


@pytest.mark.parametrize("method, url, signature", [r[1:] for r in SIGV4_SUITE], ids=[r[0] for r in SIGV4_SUITE])
def test_sigv4_matches_the_aws_test_suite(method, url, signature):
    added = sigv4.sign(method, url, {}, b"", access_key="AKIDEXAMPLE", secret_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                       region="us-east-1", service="service", now=datetime(2015, 8, 30, 12, 36, tzinfo=timezone.utc))
    assert added == {"x-amz-date": "20150830T123600Z", "authorization": (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={signature}")}


def test_sigv4_signs_the_encoded_path_again_and_the_session_token():
    """Bedrock model ids hold ':' (sent as %3A): the canonical path encodes it once more, like the SDKs do."""
    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    a = sigv4.sign("POST", "https://h/model/a.b-v1%3A0/converse", {}, b"{}", access_key="k", secret_key="s",
                   region="r", service="bedrock", now=when, session_token="tok")
    b = sigv4.sign("POST", "https://h/model/a.b-v1:0/converse", {}, b"{}", access_key="k", secret_key="s",
                   region="r", service="bedrock", now=when, session_token="tok")
    assert a["authorization"] != b["authorization"] and a["x-amz-security-token"] == "tok"
    assert "SignedHeaders=host;x-amz-date;x-amz-security-token," in a["authorization"]


# ------------------------------------------------------------------------------------ endpoints

ENDPOINTS = [
    ({"provider": "openai", "model": "gpt-4o"}, {}, "https://api.openai.com/v1/chat/completions"),
    ({"provider": "deepseek", "model": "deepseek-chat"}, {}, "https://api.deepseek.com/v1/chat/completions"),
    ({"provider": "mistral", "model": "m"}, {}, "https://api.mistral.ai/v1/chat/completions"),
    ({"provider": "openrouter", "model": "m"}, {}, "https://openrouter.ai/api/v1/chat/completions"),
    ({"provider": "xai", "model": "grok-beta"}, {}, "https://api.x.ai/v1/chat/completions"),
    ({"provider": "openai-compatible", "model": "m", "baseUrl": "http://gpu:8000/v1"}, {}, "http://gpu:8000/v1/chat/completions"),
    ({"provider": "azure", "model": "dep", "resourceName": "acme"}, {},
     "https://acme.openai.azure.com/openai/v1/chat/completions"),
    ({"provider": "azure", "model": "dep"}, {"AZURE_RESOURCE_NAME": "fromenv"},
     "https://fromenv.openai.azure.com/openai/v1/chat/completions"),
    ({"provider": "anthropic", "model": "claude"}, {}, "https://api.anthropic.com/v1/messages"),
    ({"provider": "google-generative-ai", "model": "gemini-2.5-pro"}, {},
     "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent"),
    ({"provider": "google-generative-ai", "model": "tunedModels/mine"}, {},
     "https://generativelanguage.googleapis.com/v1beta/tunedModels/mine:generateContent"),
    ({"provider": "google-vertex", "model": "gemini-2.5-pro", "project": "p1", "region": "europe-west4"}, {},
     "https://europe-west4-aiplatform.googleapis.com/v1/projects/p1/locations/europe-west4/publishers/google/models/"
     "gemini-2.5-pro:generateContent"),
    ({"provider": "google-vertex", "model": "gemini-3-pro"}, {"GOOGLE_VERTEX_PROJECT": "p2", "GOOGLE_VERTEX_REGION": "global"},
     "https://aiplatform.googleapis.com/v1/projects/p2/locations/global/publishers/google/models/gemini-3-pro:generateContent"),
    ({"provider": "google-vertex-anthropic", "model": "claude-sonnet-4@20250514", "project": "p", "region": "us-east5"}, {},
     "https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/us-east5/publishers/anthropic/models/"
     "claude-sonnet-4%4020250514:rawPredict"),
    ({"provider": "amazon-bedrock", "model": "anthropic.claude-3-7-sonnet-20250219-v1:0", "region": "eu-west-1"},
     {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"},
     "https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse"),
]


@pytest.mark.parametrize("entry, environ, url", ENDPOINTS, ids=[f"{e['provider']}-{i}" for i, (e, _, _) in enumerate(ENDPOINTS)])
def test_every_provider_has_its_endpoint(entry, environ, url):
    with ModelClient(spec(**entry), environ=environ) as client:
        assert client.endpoint() == url


MISSING_SETTINGS = [
    ({"provider": "azure", "model": "dep"}, "set resourceName (or AZURE_RESOURCE_NAME) or baseUrl"),
    ({"provider": "google-vertex", "model": "g", "region": "us-central1"},
     "set project in its config entry, or the GOOGLE_VERTEX_PROJECT environment variable"),
    ({"provider": "google-vertex-anthropic", "model": "c", "project": "p"},
     "set region in its config entry, or the GOOGLE_VERTEX_REGION environment variable"),
    ({"provider": "amazon-bedrock", "model": "m"}, "set region in its config entry, or the AWS_REGION environment variable"),
]


@pytest.mark.parametrize("entry, message", MISSING_SETTINGS, ids=[e["provider"] for e, _ in MISSING_SETTINGS])
def test_a_missing_setting_is_named(entry, message):
    with ModelClient(spec(**entry), environ={}) as client, pytest.raises(ModelError) as info:
        client.chat(HI)
    assert str(info.value) == f"language model {entry['model']} ({entry['provider']}) cannot be used: {message}"


# ------------------------------------------------------------------------------------ Chat Completions family

@pytest.fixture
def fake():
    with FakeModelServer(api_key=KEY) as server:
        yield server


def test_azure_openai_uses_api_key_api_version_and_reasoning_effort(fake):
    s = spec(provider="azure", model="gpt-4o-deployment", baseUrl=fake.base_url + "/openai", apiVersion="2024-10-21",
             token={"env": "FAKE_LLM_KEY"}, reasoningEffort="low", temperature=0.3)
    fake.add([("grep", {"pattern": "MAX_ATTEMPTS ="})], cite_first_hit)
    with client_for(s) as client:
        result = run_agent("Where is the retry policy?", client, FileTools())
    assert fake.api_paths() == ["/openai/v1/chat/completions"] * 2
    first = fake.requests[0]
    assert first["query"] == "api-version=2024-10-21"
    assert first["headers"]["api-key"] == KEY and "authorization" not in first["headers"]
    assert (first["body"]["model"], first["body"]["reasoning_effort"], first["body"]["temperature"]) == (
        "gpt-4o-deployment", "low", 0.3)
    assert "`github.com/acme/api/src/retry.py:3`" in result.answer


def test_azure_api_version_defaults_to_preview_and_the_key_to_azure_api_key(fake):
    fake.add("ok")
    with client_for(spec(provider="azure", model="dep", baseUrl=fake.base_url + "/openai"),
                    environ={"AZURE_API_KEY": KEY}) as client:
        assert client.chat(HI).text == "ok"
    assert fake.requests[0]["query"] == "api-version=preview" and fake.requests[0]["headers"]["api-key"] == KEY


def test_openai_reasoning_effort_is_sent_and_the_summary_is_a_warning(fake):
    entry = {"provider": "openai", "model": "o4-mini", "baseUrl": fake.base_url + "/v1", "token": {"env": "FAKE_LLM_KEY"},
             "reasoningEffort": "high", "reasoningSummary": "auto", "inputModalities": ["text", "image"]}
    config = load_config(json.dumps({"models": [entry]}), environ={})
    assert [w.split(":")[0] for w in config.warnings] == ["models[0].inputModalities", "models[0].reasoningSummary"]
    assert "Chat Completions" in config.warnings[1]
    fake.add("ok")
    with client_for(ModelSpec.from_config(config.models[0])) as client:
        client.chat(HI)
    body = fake.requests[0]["body"]
    assert body["reasoning_effort"] == "high" and not {"reasoningSummary", "reasoning_summary", "reasoning"} & set(body)


REASONING_CASES = [  # (reasoningTag, what the model wrote, the answer)
    (None, "<think>Which file?\nretry.py.</think>\n\nThe policy is in retry.py.", "The policy is in retry.py."),
    ("reasoning", "<reasoning>hmm</reasoning>Answer.", "Answer."),
    ("reasoning", "<think>kept: not the configured tag</think>Answer.", "<think>kept: not the configured tag</think>Answer."),
    (None, "No reasoning at all.", "No reasoning at all."),
]


@pytest.mark.parametrize("tag, written, answer", REASONING_CASES)
def test_openai_compatible_cuts_reasoning_out_of_answers(fake, tag, written, answer):
    entry = {"provider": "openai-compatible", "model": "qwen3", "baseUrl": fake.base_url + "/v1",
             "token": {"env": "FAKE_LLM_KEY"}, **({"reasoningTag": tag} if tag else {})}
    fake.add(written)
    with client_for(spec(**entry)) as client:
        assert client.chat(HI).text == answer
    assert "reasoningTag" not in fake.requests[0]["body"]


def test_the_same_tags_from_another_provider_are_left_alone(fake):
    fake.add("<think>x</think>y")
    with client_for(spec(provider="openai", model="m", baseUrl=fake.base_url + "/v1", token={"env": "FAKE_LLM_KEY"})) as c:
        assert c.chat(HI).text == "<think>x</think>y"


# ------------------------------------------------------------------------------------ Anthropic

@pytest.mark.parametrize("entry, environ", [
    ({"authToken": {"env": "GATEWAY_TOKEN"}}, {"GATEWAY_TOKEN": KEY}),
    ({}, {"ANTHROPIC_AUTH_TOKEN": KEY}),
])
def test_anthropic_auth_token_is_a_bearer_token(fake, entry, environ):
    fake.add("ok")
    with client_for(spec(provider="anthropic", model="claude-sonnet-4-5", baseUrl=fake.base_url, **entry),
                    environ=environ) as client:
        assert client.chat(HI).text == "ok"
    headers = fake.requests[0]["headers"]
    assert headers["authorization"] == f"Bearer {KEY}" and "x-api-key" not in headers


def test_anthropic_key_and_bearer_token_go_in_their_own_headers(fake):
    fake.add("ok")
    s = spec(provider="anthropic", model="c", baseUrl=fake.base_url, token={"env": "FAKE_LLM_KEY"},
             authToken={"env": "GATEWAY_TOKEN"})
    with client_for(s, environ={**ENV, "GATEWAY_TOKEN": "gw-token-1234"}) as client:
        client.chat(HI)
    headers = fake.requests[0]["headers"]
    assert headers["x-api-key"] == KEY and headers["authorization"] == "Bearer gw-token-1234"


# ------------------------------------------------------------------------------------ Gemini API

class SchemaHeavyTools(FileTools):
    """FileTools whose schemas carry the keywords pydantic writes (the real catalog's), which the
    Gemini API refuses in function parameters."""

    def specs(self) -> list[dict]:
        out = []
        for s in super().specs():
            schema = dict(s["input_schema"], additionalProperties=False, title=s["name"])
            schema["properties"] = dict(schema["properties"], limit={
                "anyOf": [{"type": "integer", "minimum": 1, "maximum": 100}, {"type": "null"}], "default": None,
                "title": "Limit", "description": "How many"})
            out.append(dict(s, input_schema=schema))
        return out


def test_gemini_round_trip_with_thinking_settings(fake):
    s = spec(provider="google-generative-ai", model="gemini-2.5-pro", baseUrl=fake.base_url + "/v1beta",
             token={"env": "FAKE_LLM_KEY"}, thinkingLevel="high", thinkingBudget=2048, temperature=0.4,
             headers={"X-Team": "search"})
    fake.add([("grep", {"pattern": "MAX_ATTEMPTS ="}), ("read_file", {"repo": "github.com/acme/api", "path": "nope.py"})],
             cite_first_hit)
    with client_for(s) as client:
        result = run_agent("Where is the retry policy?", client, SchemaHeavyTools(), repos=["github.com/acme/api"])
    assert fake.api_paths() == ["/v1beta/models/gemini-2.5-pro:generateContent"] * 2
    first, second = fake.requests
    assert first["headers"]["x-goog-api-key"] == KEY and "authorization" not in first["headers"]
    assert first["headers"]["x-team"] == "search"
    body = first["body"]
    assert body["generationConfig"] == {"temperature": 0.4, "thinkingConfig": {"thinkingLevel": "high", "thinkingBudget": 2048}}
    assert "code research assistant" in body["systemInstruction"]["parts"][0]["text"]
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Where is the retry policy?"}]}]
    grep = body["tools"][0]["functionDeclarations"][0]
    assert grep["parameters"]["properties"]["limit"] == {"type": "integer", "minimum": 1, "maximum": 100,
                                                         "description": "How many", "nullable": True}
    # the calls went out as functionCall parts, the results as functionResponse parts, matched by name
    turns = second["body"]["contents"]
    assert [t["role"] for t in turns] == ["user", "model", "user"]
    assert [p["functionCall"]["name"] for p in turns[1]["parts"]] == ["grep", "read_file"]
    responses = [p["functionResponse"] for p in turns[2]["parts"]]
    assert [r["name"] for r in responses] == ["grep", "read_file"]
    assert responses[0]["response"]["content"].startswith("github.com/acme/api/src/retry.py:3")
    assert "not found" in responses[1]["response"]["error"]
    # thought parts stay out of the answer; thinking tokens count as output
    assert "Let me think" not in result.answer and "`github.com/acme/api/src/retry.py:3`" in result.answer
    assert [s["is_error"] for s in result.steps] == [False, True]
    assert result.usage["output_tokens"] >= 14


def test_gemini_answer_without_tools_and_blocked_prompts(fake):
    fake.add("final")
    with client_for(spec(provider="google-generative-ai", model="gemini-2.5-flash", baseUrl=fake.base_url + "/v1beta"),
                    environ={"GOOGLE_GENERATIVE_AI_API_KEY": KEY}) as client:
        assert client.chat(HI, FileTools().specs(), tool_choice="none").text == "final"
        assert fake.requests[0]["body"]["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
        fake.fail(200, body={"promptFeedback": {"blockReason": "SAFETY"}})
        with pytest.raises(ModelError, match=r"unexpected response \(ValueError: no candidates \(the prompt was blocked: SAFETY"):
            client.chat(HI)


def test_gemini_parameters_drop_what_the_api_refuses():
    schema = {"type": "object", "additionalProperties": False, "title": "T", "properties": {
        "a": {"type": ["string", "null"], "default": None}, "b": {"type": "array", "items": {"type": "string", "title": "x"}},
        "c": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}, "required": ["b"]}
    assert parameters(schema) == {"type": "object", "required": ["b"], "properties": {
        "a": {"type": "string", "nullable": True}, "b": {"type": "array", "items": {"type": "string"}},
        "c": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}


# ------------------------------------------------------------------------------------ Vertex AI

@pytest.fixture(scope="module")
def service_account_key():
    return service_account_keys()


@pytest.fixture
def vertex(tmp_path, service_account_key):
    """A fake Vertex AI with its token endpoint, and a key file of a service account it trusts."""
    private, public = service_account_key
    with FakeModelServer(google_public_key=public) as server:
        key_file = tmp_path / "sa.json"
        key_file.write_text(json.dumps({
            "type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": private,
            "client_email": "codesearch@p.iam.gserviceaccount.com", "client_id": "1",
            "token_uri": server.base_url + "/token"}))
        yield server, str(key_file)


def test_vertex_gemini_gets_a_token_with_the_service_account_and_reuses_it(vertex):
    server, key_file = vertex
    base = server.base_url + "/v1/projects/p/locations/us-central1/publishers/google"
    s = spec(provider="google-vertex", model="gemini-2.5-pro", project="p", region="us-central1",
             credentials={"env": "VERTEX_SA_FILE"}, baseUrl=base, thinkingBudget=-1)
    server.add([("grep", {"pattern": "RETRIES"})], "Found it.")
    with client_for(s, environ={"VERTEX_SA_FILE": key_file}) as client:
        result = run_agent("q", client, FileTools())
    assert result.answer == "Found it."
    assert server.api_paths() == ["/token", "/v1/projects/p/locations/us-central1/publishers/google/models/"
                                            "gemini-2.5-pro:generateContent", "/v1/projects/p/locations/us-central1/"
                                            "publishers/google/models/gemini-2.5-pro:generateContent"]
    (token,) = server.access_tokens
    assert [r["headers"]["authorization"] for r in server.requests[1:]] == [f"Bearer {token}"] * 2
    assert server.requests[1]["body"]["generationConfig"] == {"thinkingConfig": {"thinkingBudget": -1}}


def test_vertex_anthropic_uses_raw_predict(vertex):
    server, key_file = vertex
    base = server.base_url + "/v1/projects/p/locations/us-east5/publishers/anthropic"
    s = spec(provider="google-vertex-anthropic", model="claude-sonnet-4", credentials={"env": "VERTEX_SA_FILE"},
             baseUrl=base, temperature=0.1)
    server.add([("grep", {"pattern": "MAX_ATTEMPTS ="})], cite_first_hit)
    with client_for(s, environ={"VERTEX_SA_FILE": key_file}) as client:
        result = run_agent("Where is the retry policy?", client, FileTools())
    assert server.api_paths()[1:] == ["/v1/projects/p/locations/us-east5/publishers/anthropic/models/"
                                      "claude-sonnet-4:rawPredict"] * 2
    body = server.requests[1]["body"]
    assert body["anthropic_version"] == "vertex-2023-10-16" and "model" not in body and body["temperature"] == 0.1
    assert "`github.com/acme/api/src/retry.py:3`" in result.answer


def test_vertex_refuses_a_key_it_does_not_trust(tmp_path, vertex):
    server, _ = vertex
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"type": "service_account", "private_key": other, "client_email": "x@p.iam.gserviceaccount.com",
                               "token_uri": server.base_url + "/token", "private_key_id": "k2", "client_id": "2"}))
    s = spec(provider="google-vertex", model="g", credentials={"env": "SA"}, baseUrl=server.base_url + "/v1/x/publishers/google")
    with client_for(s, environ={"SA": str(bad)}) as client, pytest.raises(ModelError) as info:
        client.chat(HI)
    assert str(info.value).startswith("language model g (google-vertex) cannot be used: no access token from Google: "
                                      "invalid_grant")
    assert other[40:80] not in str(info.value)
    with client_for(s, environ={"SA": str(tmp_path / "missing.json")}) as client, \
            pytest.raises(ModelError, match="key file named by `credentials` does not exist"):
        client.chat(HI)
    assert server.api_paths() == ["/token"]


def test_without_google_auth_vertex_is_refused_by_validate_and_start_up(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "google.auth", None)  # as if the gcp extra were not installed
    doc = {"models": [{"provider": "openai", "model": "gpt-4o"},
                      {"provider": "google-vertex-anthropic", "model": "claude", "project": "p", "region": "us-east5"}]}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    expected = ('models[1]: provider "google-vertex-anthropic" needs the Google auth library: '
                'pip install "codesearch-ray[gcp]" (usable without it: openai, openai-compatible, deepseek, mistral, '
                'openrouter, xai, azure, anthropic, google-generative-ai, amazon-bedrock)')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.problems == [expected]
    assert cli.main(["config", "validate", str(path)]) == 2
    assert expected in capsys.readouterr().err
    with pytest.raises(ModelError, match="needs the Google auth library"):
        ModelClient(ModelSpec.from_config(doc["models"][1]))


# ------------------------------------------------------------------------------------ Bedrock

@pytest.fixture
def bedrock():
    with FakeModelServer(aws=(AWS_KEY_ID, AWS_SECRET)) as server:
        yield server


MODEL_ID = "anthropic.claude-3-7-sonnet-20250219-v1:0"


def bedrock_spec(server, **kw) -> ModelSpec:
    entry = {"provider": "amazon-bedrock", "model": MODEL_ID, "region": "eu-central-1", "baseUrl": server.base_url,
             "accessKeyId": {"env": "AWS_KEY"}, "accessKeySecret": {"env": "AWS_SECRET"},
             "sessionToken": {"env": "AWS_SESSION"}, "temperature": 0.2}
    return spec(**{**entry, **kw})


def test_bedrock_converse_round_trip_signed_with_sigv4(bedrock):
    bedrock.add({"text": "Searching.", "tool_calls": [("grep", {"pattern": "MAX_ATTEMPTS ="})]}, cite_first_hit)
    with client_for(bedrock_spec(bedrock), environ=AWS_ENV) as client:
        result = run_agent("Where is the retry policy?", client, FileTools(), repos=["github.com/acme/api"])
    assert bedrock.api_paths() == ["/model/anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse"] * 2
    first, second = bedrock.requests
    assert [r["status"] for r in bedrock.requests] == [200, 200]  # the server recomputed both signatures
    assert first["headers"]["authorization"].startswith(
        f"AWS4-HMAC-SHA256 Credential={AWS_KEY_ID}/{first['headers']['x-amz-date'][:8]}/eu-central-1/bedrock/aws4_request")
    assert first["headers"]["x-amz-security-token"] == AWS_SESSION
    body = first["body"]
    assert "code research assistant" in body["system"][0]["text"] and body["inferenceConfig"] == {"temperature": 0.2}
    assert [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]] == ["grep", "read_file"]
    assert body["messages"] == [{"role": "user", "content": [{"text": "Where is the retry policy?"}]}]
    assistant, results = second["body"]["messages"][1:]
    assert assistant["content"][0] == {"text": "Searching."}
    use = assistant["content"][1]["toolUse"]
    assert (use["name"], use["input"]) == ("grep", {"pattern": "MAX_ATTEMPTS ="})
    (res,) = results["content"]
    assert res["toolResult"]["toolUseId"] == use["toolUseId"] and res["toolResult"]["status"] == "success"
    assert "`github.com/acme/api/src/retry.py:3`" in result.answer
    assert result.usage["requests"] == 2 and result.usage["input_tokens"] > 0


def test_bedrock_wrong_secret_is_a_signature_error_that_shows_no_secret(bedrock):
    with client_for(bedrock_spec(bedrock), environ={**AWS_ENV, "AWS_SECRET": "not-the-secret-0000"}) as client, \
            pytest.raises(ModelError) as info:
        client.chat(HI)
    assert str(info.value) == (f"language model {MODEL_ID} (amazon-bedrock) answered 403: The request signature we "
                               "calculated does not match the signature you provided.")
    assert "not-the-secret" not in repr(info.value) and AWS_SESSION not in repr(info.value)
    no_secret_in(info.value)


def test_bedrock_credentials_default_to_the_aws_variables(bedrock):
    bedrock.add("ok")
    s = spec(provider="amazon-bedrock", model="amazon.nova-pro-v1:0", baseUrl=bedrock.base_url)
    environ = {"AWS_REGION": "us-west-2", "AWS_ACCESS_KEY_ID": AWS_KEY_ID, "AWS_SECRET_ACCESS_KEY": AWS_SECRET}
    with client_for(s, environ=environ) as client:
        assert client.chat(HI).text == "ok"
    headers = bedrock.requests[0]["headers"]
    assert "/us-west-2/bedrock/aws4_request" in headers["authorization"] and "x-amz-security-token" not in headers
    with client_for(s, environ={"AWS_REGION": "us-west-2"}) as client, pytest.raises(ModelError) as info:
        client.chat(HI)
    assert "set accessKeyId and accessKeySecret in its config entry, or the AWS_ACCESS_KEY_ID" in str(info.value)


# ------------------------------------------------------------------------------------ the table itself

def test_every_provider_of_the_schema_is_in_the_table_and_works_here():
    definitions = load_schema("languageModel.json")["definitions"]
    fields = {d["properties"]["provider"]["const"]: set(d["properties"]) for k, d in definitions.items()
              if k.endswith("LanguageModel")}
    assert sorted(fields) == sorted(provider_table.SUPPORTED_PROVIDERS)
    assert provider_table.usable_providers() == list(provider_table.SUPPORTED_PROVIDERS)  # google-auth is installed here
    for name, p in provider_table.PROVIDERS.items():
        assert set(p.sends) | set(p.ignores) <= fields[name], name
        assert set(provider_table.COMMON_IGNORED) <= fields[name], name
