"""Managing chats in the state database (migration 13): names, token use per answer, deleting,
duplicating, and sharing with named members."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from sqlalchemy import text

from codesearch.store import MIGRATIONS, NotFound, Store, migrate
from codesearch.store.chat_sharing import MAX_CHAT_MEMBERS, MAX_CHAT_NAME
from codesearch.store.secret import ENV_VAR
from codesearch.store.store import make_engine
from tests.store.test_store import Clock
from tests.store.test_store_chats import STEPS, MODEL, _assert_table_matches

ENV = {ENV_VAR: "test-secret"}
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)
V13 = next(v for v, description, _ in MIGRATIONS if "shared with named members" in description)
USAGE = {"input_tokens": 1234, "output_tokens": 56, "requests": 2}


@pytest.fixture
def clock():
    return Clock(T0)


@pytest.fixture
def store(tmp_path, clock):
    s = Store.open(tmp_path, environ=ENV, clock=clock)
    yield s
    s.close()


@pytest.fixture
def people(store):
    return {name: store.create_user(f"{name}@x.org", name.title()).id for name in ("ann", "bob", "cy")}


def test_migration_13_keeps_existing_chats_unnamed_and_without_token_counts(tmp_path, clock):
    engine = make_engine(f"sqlite:///{tmp_path / 'codesearch.db'}")
    assert V13 == 13 and migrate(engine, migrations=MIGRATIONS[:V13 - 1]) == V13 - 1
    with engine.begin() as c:
        c.execute(text("INSERT INTO chats (id, visibility, question, answer, model, steps, status, created_at) VALUES "
                       "('old', 'PRIVATE', 'q?', 'a.', '{}', '[]', 'COMPLETED', '2025-01-01 00:00:00.000000')"))
    engine.dispose()
    with Store.open(tmp_path, environ=ENV, clock=clock) as s:
        for name in ("chats", "chat_turns", "chat_access"):
            _assert_table_matches(s.engine, name)
        old = s.get_chat("old")
        assert (old.name, old.usage, old.title) == (None, None, "q?")
        assert s.chat_members("old") == []


def test_token_use_is_kept_with_each_answer(store, people):
    chat = store.create_chat("q?", "a.", user_id=people["ann"], model=MODEL, steps=STEPS, usage=USAGE)
    turn = store.add_chat_turn(chat.id, "and?", "b.", usage={"input_tokens": 7, "output_tokens": 8, "requests": 1})
    assert store.get_chat(chat.id).usage == USAGE
    assert [t.usage for t in store.list_chat_turns(chat.id)] == [turn.usage] == [
        {"input_tokens": 7, "output_tokens": 8, "requests": 1}]
    assert store.create_chat("no usage").usage is None


@pytest.mark.parametrize("name, stored", [
    ("Retry policy", "Retry policy"),
    ("  spaced \n  out\tname ", "spaced out name"),
    ("x" * MAX_CHAT_NAME, "x" * MAX_CHAT_NAME),
])
def test_rename(store, people, name, stored):
    chat = store.create_chat("Where is retry?", user_id=people["ann"])
    assert store.rename_chat(chat.id, name).name == stored
    assert store.get_chat(chat.id).title == stored


@pytest.mark.parametrize("name, error", [
    ("", "the name is empty"),
    ("   ", "the name is empty"),
    ("x" * (MAX_CHAT_NAME + 1), f"{MAX_CHAT_NAME + 1} characters long; at most {MAX_CHAT_NAME}"),
])
def test_bad_names_are_refused(store, people, name, error):
    chat = store.create_chat("q", user_id=people["ann"])
    with pytest.raises(ValueError, match=error):
        store.rename_chat(chat.id, name)
    assert store.get_chat(chat.id).name is None


def test_delete_takes_the_follow_ups_and_shares_along(store, people):
    chat = store.create_chat("q", "a", user_id=people["ann"])
    other = store.create_chat("other", "a", user_id=people["ann"])
    store.add_chat_turn(chat.id, "f", "g")
    store.share_chat(chat.id, people["bob"])
    store.share_chat(other.id, people["bob"])
    store.delete_chat(chat.id)
    with pytest.raises(NotFound):
        store.get_chat(chat.id)
    assert store.list_chat_turns(chat.id) == [] and store.chat_members(chat.id) == []
    assert [c.id for c in store.list_chats_shared_with(people["bob"])] == [other.id]
    with pytest.raises(NotFound):
        store.delete_chat(chat.id)


def test_duplicate_is_a_private_unshared_copy_of_the_duplicator(store, people, clock):
    chat = store.create_chat("Where is retry?", "In a.", user_id=people["ann"], visibility="PUBLIC", model=MODEL,
                             steps=STEPS, usage=USAGE)
    store.add_chat_turn(chat.id, "And?", "b.", usage=USAGE)
    store.share_chat(chat.id, people["bob"])
    clock.advance(300)
    copy = store.duplicate_chat(chat.id, people["bob"])
    assert copy.id != chat.id
    assert (copy.user_id, copy.visibility, copy.name) == (people["bob"], "PRIVATE", "Copy of Where is retry?")
    assert (copy.question, copy.answer, copy.model, copy.steps, copy.usage) == (
        chat.question, chat.answer, chat.model, chat.steps, chat.usage)
    assert [(t.position, t.question, t.answer) for t in store.list_chat_turns(copy.id)] == [(1, "And?", "b.")]
    assert store.chat_members(copy.id) == []
    named = store.duplicate_chat(chat.id, people["cy"], "Mine")
    assert named.name == "Mine" and store.get_chat(chat.id).user_id == people["ann"]  # the original is untouched
    with pytest.raises(NotFound):
        store.duplicate_chat("nope", people["bob"])
    with pytest.raises(NotFound):
        store.duplicate_chat(chat.id, 999_999)


def test_sharing_with_members_and_taking_it_back(store, people):
    chat = store.create_chat("q", user_id=people["ann"])
    assert store.share_chat(chat.id, people["bob"]) is True
    assert store.share_chat(chat.id, people["bob"]) is False  # once
    assert store.share_chat(chat.id, people["cy"]) is True
    assert [u.email for u in store.chat_members(chat.id)] == ["bob@x.org", "cy@x.org"]
    assert (store.is_chat_shared_with(chat.id, people["bob"]), store.is_chat_shared_with(chat.id, people["ann"])) == (
        True, False)
    assert store.unshare_chat(chat.id, people["bob"]) is True
    assert store.unshare_chat(chat.id, people["bob"]) is False
    assert not store.is_chat_shared_with(chat.id, people["bob"])
    assert [c.id for c in store.list_chats_shared_with(people["cy"])] == [chat.id]
    with pytest.raises(NotFound):
        store.share_chat(chat.id, 999_999)
    with pytest.raises(NotFound):
        store.share_chat("nope", people["bob"])


def test_a_chat_is_shared_with_a_bounded_number_of_members(store, people):
    chat = store.create_chat("q", user_id=people["ann"])
    ids = [store.create_user(f"m{i}@x.org").id for i in range(MAX_CHAT_MEMBERS)]
    for uid in ids:
        store.share_chat(chat.id, uid)
    with pytest.raises(ValueError, match=f"at most {MAX_CHAT_MEMBERS} members"):
        store.share_chat(chat.id, people["bob"])
    assert len(store.chat_members(chat.id)) == MAX_CHAT_MEMBERS


def test_removing_an_account_removes_its_shares(store, people):
    chat = store.create_chat("q", user_id=people["bob"])
    store.share_chat(chat.id, people["cy"])
    store.share_chat(chat.id, people["ann"])
    store.remove_user(people["cy"])  # a member removed: the share goes with the account
    assert [u.email for u in store.chat_members(chat.id)] == ["ann@x.org"]
    store.remove_user(people["bob"])  # the chat's user removed: the private chat goes, and its shares
    assert store.list_chats_shared_with(people["ann"]) == []
