"""The application side of Ask skills and search assist, without a server: a question's leading
``/command`` expanded for the caller (`codesearch.app.skills.expand_command`), who may manage
skills (`manager`), and the model's answer turned into a checked query
(`codesearch.app.search_assist`) against the scripted model of `tests.fakellm`."""

from __future__ import annotations

import pytest

from codesearch.app import search_assist
from codesearch.app.skills import expand_command, manager
from codesearch.errors import InsufficientPermissions, InvalidRequestBody, NotAuthenticated
from codesearch.permissions import Identity
from codesearch.store import Store
from codesearch.store.secret import ENV_VAR
from tests.conftest import TEST_LLM_TOKEN, TEST_LLM_TOKEN_ENV
from tests.fakellm import FakeModelServer


@pytest.fixture
def store(tmp_path):
    s = Store.open(tmp_path, environ={ENV_VAR: "test-secret"})
    yield s
    s.close()


def fields(slug, instructions):
    return {"name": slug.title(), "slug": slug, "description": "d", "instructions": instructions}


def test_a_leading_command_becomes_the_skills_instructions(store):
    alice, bob = store.create_user("a@x.org"), store.create_user("b@x.org")
    store.create_skill(alice.id, "personal", fields("review", "Alice's checklist."))
    store.create_skill(bob.id, "shared", fields("review", "The team's checklist."))
    store.create_skill(bob.id, "shared", fields("notes", "Write release notes."))
    # (caller, question, the instructions the model reads (None: the question as typed), the rest)
    table = [
        (alice, "/review src/app.py", "Alice's checklist.", "src/app.py"),  # personal wins
        (bob, "/review src/app.py", "The team's checklist.", "src/app.py"),
        (None, "/notes", "Write release notes.", ""),  # anonymous: shared skills only
        (alice, "  /notes\n\nfor v2 ", "Write release notes.", "for v2"),
        (alice, "/missing do it", None, None),
        (alice, "/etc/hosts is read where?", None, None),  # a path, not a command
        (alice, "see /review", None, None),  # not at the start
        (alice, "/Review x", None, None),  # commands are lower case
    ]
    for user, question, instructions, rest in table:
        out = expand_command(store, Identity(user), question)
        if instructions is None:
            assert (out.prompt, out.skill) == (question, None), question
            continue
        assert instructions in out.prompt and out.skill is not None, question
        assert out.prompt.endswith(f"---\n\n{rest}") if rest else out.prompt.endswith(instructions), out.prompt


def test_who_may_manage_skills(store):
    alice = store.create_user("a@x.org")
    assert manager(Identity(alice), "list") == alice.id
    with pytest.raises(NotAuthenticated, match="Authentication is required to create skills."):
        manager(Identity(None), "create")
    with pytest.raises(InsufficientPermissions, match="Repository-scoped access tokens cannot manage skills."):
        manager(Identity(alice, repo_scope=frozenset({1})), "list")


@pytest.mark.parametrize("answer, query", [
    ("lang:go retry", "lang:go retry"),
    ("```\nlang:go retry\n```", "lang:go retry"),
    ("```sourcebot\nlang:go retry\n```", "lang:go retry"),
    ("Query: `lang:go retry`", "lang:go retry"),
    ("\n\nlang:go retry\nThis finds Go files about retries.", "lang:go retry"),
    ("", ""),
])
def test_the_models_answer_is_cleaned_to_one_query(answer, query):
    assert search_assist.clean(answer) == query


def test_translate_asks_the_first_model_and_checks_the_query(store, monkeypatch):
    monkeypatch.setenv(TEST_LLM_TOKEN_ENV, TEST_LLM_TOKEN)
    with FakeModelServer(["lang:go retry", "file:(x"], api_key=TEST_LLM_TOKEN) as fake:
        store.replace_language_models([
            {"provider": "openai-compatible", "model": "m1", "baseUrl": fake.base_url + "/v1", "token": {"env": TEST_LLM_TOKEN_ENV}},
            {"provider": "openai-compatible", "model": "m2", "baseUrl": fake.base_url + "/v1", "token": {"env": TEST_LLM_TOKEN_ENV}},
        ])
        good = search_assist.translate(store, "  go code that retries ")
        assert (good.query, good.valid, good.error, good.model["model"]) == ("lang:go retry", True, None, "m1")
        assert fake.bodies[0]["model"] == "m1" and fake.bodies[0]["messages"][-1]["content"] == "go code that retries"
        bad = search_assist.translate(store, "x", {"provider": "openai-compatible", "model": "m2"})
        assert (bad.valid, fake.bodies[1]["model"]) == (False, "m2")
        assert "invalid regular expression" in bad.error


@pytest.mark.parametrize("prompt, models, wanted, message", [
    ("", [{"provider": "openai", "model": "m"}], None, "prompt: describe what you are looking for"),
    ("x" * 2001, [{"provider": "openai", "model": "m"}], None, "prompt: at most 2000 characters"),
    ("x", [], None, "No language models are configured"),
    ("x", [{"provider": "openai", "model": "m"}], {"provider": "openai", "model": "other"}, "openai/other is not"),
])
def test_translate_refuses_what_it_cannot_do(store, prompt, models, wanted, message):
    store.replace_language_models(models)
    with pytest.raises(InvalidRequestBody, match=message):
        search_assist.translate(store, prompt, wanted)
