"""The state database's language models and chats (migration 2), and the scheduler storing the
config's `models`."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone

import pytest
from sqlalchemy import inspect, text

from codesearch.store import (CHAT_FAILED, CHAT_PUBLIC, LATEST_VERSION, MIGRATIONS, Chat, NotFound, Store, migrate)
from codesearch.store import tables
from codesearch.store.migrations import current_version
from codesearch.store.secret import ENV_VAR
from codesearch.store.store import make_engine
from tests.store.test_store import Clock

ENV = {ENV_VAR: "test-secret"}
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)
V2 = next(v for v, description, _ in MIGRATIONS if "chats" in description)


@pytest.fixture
def clock():
    return Clock(T0)


@pytest.fixture
def store(tmp_path, clock):
    s = Store.open(tmp_path, environ=ENV, clock=clock)
    yield s
    s.close()


MODELS = [
    {"provider": "openai", "model": "gpt-4o", "token": {"env": "OPENAI_KEY"}, "headers": {"X-Org": "acme"}},
    {"provider": "anthropic", "model": "claude-sonnet-4", "displayName": "Claude", "temperature": 0.2},
    {"provider": "openai-compatible", "model": "llama3", "baseUrl": "http://llm.internal/v1"},
]


def _assert_table_matches(engine, name: str) -> None:
    insp = inspect(engine)
    table = tables.metadata.tables[name]
    cols = {c["name"]: c for c in insp.get_columns(name)}
    assert list(cols) == [c.name for c in table.columns]
    for col in table.columns:
        assert cols[col.name]["nullable"] == col.nullable or col.primary_key, col.name
    assert {tuple(ix["column_names"]) for ix in insp.get_indexes(name)} == {tuple(c.name for c in ix.columns)
                                                                            for ix in table.indexes}
    assert {(fk["constrained_columns"][0], fk["referred_table"], (fk.get("options") or {}).get("ondelete"))
            for fk in insp.get_foreign_keys(name)} == {(fk.parent.name, fk.column.table.name, fk.ondelete)
                                                       for fk in table.foreign_keys}


# ----------------------------------------------------------------------------- the migration

def test_a_fresh_database_has_the_new_tables(store):
    assert V2 == 2 and store.schema_version() == LATEST_VERSION >= V2
    for name in ("language_models", "chats"):
        _assert_table_matches(store.engine, name)


def test_a_database_at_the_previous_version_is_migrated_and_keeps_its_rows(tmp_path, clock):
    # a database as the previous codesearch left it, with a user in it
    engine = make_engine(f"sqlite:///{tmp_path / 'codesearch.db'}")
    assert migrate(engine, migrations=MIGRATIONS[:V2 - 1]) == V2 - 1
    with engine.begin() as c:
        c.execute(text("INSERT INTO users (email, name, role, created_at) VALUES ('a@x.org', 'A', 'OWNER', "
                       "'2025-01-01 00:00:00.000000')"))
        assert not inspect(c).has_table("chats")
        assert current_version(c) == V2 - 1
    engine.dispose()

    with Store.open(tmp_path, environ=ENV, clock=clock) as s:
        assert s.schema_version() == LATEST_VERSION
        assert [u.email for u in s.list_users()] == ["a@x.org"]
        for name in ("language_models", "chats"):
            _assert_table_matches(s.engine, name)
        chat = s.create_chat("q?", "a.", user_id=s.list_users()[0].id)
        assert s.get_chat(chat.id).user_id == s.list_users()[0].id
        with s.engine.connect() as c:
            versions = c.execute(text("SELECT version, description FROM schema_version ORDER BY version")).all()
        assert [v for v, _ in versions] == [m[0] for m in MIGRATIONS]
        assert versions[V2 - 1][1] == "language models and chats"


# ----------------------------------------------------------------------------- language models

def test_language_models_are_replaced_wholesale_and_keep_their_order(store):
    assert store.list_language_models() == []
    store.replace_language_models(MODELS)
    assert store.list_language_models() == MODELS  # raw entries, in config order
    store.replace_language_models([MODELS[2], MODELS[0]])
    assert store.list_language_models() == [MODELS[2], MODELS[0]]
    store.replace_language_models([])
    assert store.list_language_models() == []
    with pytest.raises(ValueError, match=r"models\[0\] needs a provider and a model"):
        store.replace_language_models([{"provider": "openai"}])


def test_language_model_rows_hold_the_columns(store):
    store.replace_language_models(MODELS)
    with store.engine.connect() as c:
        rows = c.execute(text("SELECT position, provider, model, display_name FROM language_models ORDER BY position")).all()
    assert [tuple(r) for r in rows] == [(0, "openai", "gpt-4o", None), (1, "anthropic", "claude-sonnet-4", "Claude"),
                                        (2, "openai-compatible", "llama3", None)]


# ----------------------------------------------------------------------------- chats

STEPS = [{"tool": "grep", "arguments": {"pattern": "retry"}, "output": "a/b.py:3: retry()", "is_error": False}]
MODEL = {"provider": "openai", "model": "gpt-4o", "displayName": "GPT-4o"}


def test_create_and_get_a_chat(store):
    uid = store.create_user("a@x.org").id
    chat = store.create_chat("Where is retry?", "In `a/b.py:3`.", user_id=uid, model=MODEL, steps=STEPS)
    assert isinstance(chat, Chat) and re.fullmatch(r"[A-Za-z0-9_-]{16}", chat.id)
    assert chat == Chat(id=chat.id, user_id=uid, visibility="PRIVATE", question="Where is retry?", answer="In `a/b.py:3`.",
                        model=MODEL, steps=STEPS, status="COMPLETED", error=None, created_at=T0)
    assert store.get_chat(chat.id) == chat
    assert json.loads(json.dumps(chat.steps)) == STEPS  # plain JSON values


def test_failed_public_and_anonymous_chats(store):
    chat = store.create_chat("q", status=CHAT_FAILED, error="language model gpt-4o (openai) answered 500: boom",
                             visibility=CHAT_PUBLIC)
    got = store.get_chat(chat.id)
    assert (got.user_id, got.visibility, got.status, got.answer, got.steps, got.model) == (None, "PUBLIC", "FAILED", "", [], {})
    assert got.error.endswith("answered 500: boom")


def test_chat_ids_are_random_and_unique(store):
    ids = {store.create_chat(f"q{i}").id for i in range(50)}
    assert len(ids) == 50


def test_a_missing_chat_is_not_found(store):
    with pytest.raises(NotFound) as info:
        store.get_chat("nope")
    assert str(info.value) == "chat 'nope' not found" and info.value.status_code == 404


def test_bad_chat_arguments(store):
    with pytest.raises(ValueError, match="visibility"):
        store.create_chat("q", visibility="SECRET")
    with pytest.raises(ValueError, match="status"):
        store.create_chat("q", status="RUNNING")
    with pytest.raises(NotFound, match="user 999"):
        store.create_chat("q", user_id=999)


def test_list_chats_newest_first_per_user_with_a_limit(store, clock):
    a = store.create_user("a@x.org").id
    b = store.create_user("b@x.org").id
    made = []
    for i, uid in enumerate([a, b, a, None, a]):
        made.append(store.create_chat(f"q{i}", user_id=uid))
        clock.advance(1)
    assert [c.question for c in store.list_chats()] == ["q4", "q3", "q2", "q1", "q0"]
    assert [c.question for c in store.list_chats(user_id=a)] == ["q4", "q2", "q0"]
    assert [c.question for c in store.list_chats(user_id=b)] == ["q1"]
    assert [c.question for c in store.list_chats(user_id=a, limit=2)] == ["q4", "q2"]
    assert store.list_chats(user_id=12345) == []


def test_a_chat_outlives_its_user(store):
    """chats.user_id is a foreign key to users ON DELETE SET NULL."""
    owner = store.create_user("owner@x.org").id
    uid = store.create_user("m@x.org").id
    chat = store.create_chat("q", "a", user_id=uid)
    with store.engine.begin() as c:
        c.execute(text("DELETE FROM users WHERE id = :id"), {"id": uid})
    assert store.get_chat(chat.id).user_id is None and owner != uid


# ----------------------------------------------------------------------------- the scheduler

def test_the_scheduler_stores_the_configs_models_and_follows_changes(tmp_path):
    from codesearch.runtime.scheduler import Scheduler

    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"models": MODELS}))
    sched = Scheduler(str(cfg), str(tmp_path / "data"))  # applies the config
    try:
        assert sched.store.list_language_models() == MODELS
        cfg.write_text(json.dumps({"models": [MODELS[1]]}))
        os.utime(cfg, ns=(os.stat(cfg).st_atime_ns, os.stat(cfg).st_mtime_ns + 10**9))
        assert sched.reload_config() is True
        assert sched.store.list_language_models() == [MODELS[1]]
        cfg.write_text("{}")
        os.utime(cfg, ns=(os.stat(cfg).st_atime_ns, os.stat(cfg).st_mtime_ns + 2 * 10**9))
        assert sched.reload_config() is True
        assert sched.store.list_language_models() == []
    finally:
        sched.store.close()
