"""Offboarding in the store (codesearch.store.offboarding, .scoped_tokens): removing and
deactivating end every credential in one transaction, the last active owner stays, service
accounts never get a web session, scoped tokens are short-lived and revocable, and migration 10
keeps existing users active people.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from codesearch.store import Conflict, NotFound, Store
from codesearch.store import models as m
from codesearch.store.migrations import MIGRATIONS, migrate
from codesearch.store.offboarding import LastOwner
from codesearch.store.scoped_tokens import MAX_SCOPED_REPOS
from codesearch.store.store import make_engine
from codesearch.store.web_sessions import AccountDisabled

ENV = {"SOURCEBOT_ENCRYPTION_KEY": "offboarding-store-secret-0123456789abcdef"}


@pytest.fixture
def store(tmp_path):
    s = Store.open(str(tmp_path), environ=ENV)
    s.create_user("owner@example.com")
    s.upsert_connection("c", "github", {"type": "github"})
    s.upsert_repos("c", [dict(name=f"github.com/a/r{i}", code_host_type="github", clone_url="x") for i in range(3)])
    yield s
    s.close()


def _oauth(store: Store, uid: int) -> str:
    client, _ = store.create_oauth_client("c", ["http://127.0.0.1:1/cb"], {}, with_secret=False)
    code = store.create_oauth_code(client_id=client.id, user_id=uid, redirect_uri="http://127.0.0.1:1/cb",
                                   code_challenge="x", scope="mcp", resource=None, ttl_seconds=60)
    return store.redeem_oauth_code(code, client_id=client.id, check=lambda _c: None, access_ttl=600,
                                   refresh_ttl=None).tokens.access_token


#: (credential, issue(store, uid), check(store, credential) -> truthy while it works)
CREDENTIALS = [
    ("API key", lambda s, uid: s.create_api_key(uid, "k")[1], lambda s, v: s.verify_api_key(v)),
    ("web session", lambda s, uid: s.create_web_session(uid, ttl_seconds=600)[0], lambda s, v: s.get_web_session(v)),
    ("OAuth access token", _oauth, lambda s, v: s.verify_oauth_access_token(v)),
    ("scoped access token", lambda s, uid: s.create_scoped_access_token(uid, [1])[1],
     lambda s, v: s.verify_scoped_access_token(v)),
]
ENDINGS = [
    ("removed", lambda s, uid: s.remove_user(uid)),
    ("deactivated", lambda s, uid: s.set_user_suspended(uid, True)),
]


@pytest.mark.parametrize("ending,end", ENDINGS, ids=[e[0] for e in ENDINGS])
@pytest.mark.parametrize("kind,issue,check", CREDENTIALS, ids=[c[0] for c in CREDENTIALS])
def test_every_credential_ends_with_the_member(store, kind, issue, check, ending, end):
    user = store.create_user("m@example.com")
    credential = issue(store, user.id)
    assert check(store, credential)
    end(store, user.id)
    assert not check(store, credential)


def test_reactivating_gives_no_old_credential_back_and_lets_them_sign_in(store):
    user = store.create_user("m@example.com")
    key = store.create_api_key(user.id, "k")[1]
    _, changed = store.set_user_suspended(user.id, True)
    assert changed and not store.set_user_suspended(user.id, True)[1]  # a no-op the second time
    with pytest.raises(AccountDisabled):
        store.create_web_session(user.id, ttl_seconds=60)
    # a key made while deactivated (a race with the owner) is refused as well
    raced = store.create_api_key(user.id, "race")[1]
    assert store.verify_api_key(raced) is None
    back, changed = store.set_user_suspended(user.id, False)
    assert changed and back.suspended_at is None
    assert store.verify_api_key(key) is None
    assert store.get_web_session(store.create_web_session(user.id, ttl_seconds=60)[0]) is not None


def test_removal_deletes_private_chats_and_keeps_shared_ones(store):
    user = store.create_user("m@example.com")
    model = {"provider": "p", "model": "m"}
    private = store.create_chat("q1", "a", user_id=user.id, visibility=m.CHAT_PRIVATE, model=model, steps=[])
    shared = store.create_chat("q2", "a", user_id=user.id, visibility=m.CHAT_PUBLIC, model=model, steps=[])
    store.remove_user(user.id)
    with pytest.raises(NotFound):
        store.get_chat(private.id)
    assert store.get_chat(shared.id).user_id is None


LAST_OWNER_CASES = [
    # (case, setup(store) -> user id acted on, action, refused)
    ("remove the only owner", lambda s: 1, "remove", True),
    ("deactivate the only owner", lambda s: 1, "deactivate", True),
    ("remove an owner when another is active", lambda s: s.create_user("o2@example.com", role=m.OWNER).id,
     "remove", False),
    ("another owner is deactivated: still the last", lambda s: _deactivated_owner_then(s, 1), "remove", True),
    ("a service account owner does not count", lambda s: _service_owner_then(s, 1), "deactivate", True),
    ("demote the only active owner", lambda s: _deactivated_owner_then(s, 1), "demote", True),
]


def _deactivated_owner_then(s: Store, uid: int) -> int:
    s.set_user_suspended(s.create_user("o2@example.com", role=m.OWNER).id, True)
    return uid


def _service_owner_then(s: Store, uid: int) -> int:
    s.create_service_account("bot", role=m.OWNER)
    return uid


@pytest.mark.parametrize("case,setup,action,refused", LAST_OWNER_CASES, ids=[c[0] for c in LAST_OWNER_CASES])
def test_the_last_active_owner_stays(store, case, setup, action, refused):
    uid = setup(store)
    act = {"remove": lambda: store.remove_user(uid), "deactivate": lambda: store.set_user_suspended(uid, True),
           "demote": lambda: store.set_user_role(uid, m.MEMBER)}[action]
    if refused:
        with pytest.raises(Conflict):
            act()
        assert store.get_user(uid).role == m.OWNER and store.get_user(uid).suspended_at is None
    else:
        act()
    assert isinstance(LastOwner("x"), Conflict) and LastOwner.status_code == 403


def test_a_service_account_owns_keys_and_never_gets_a_session(store):
    bot = store.create_service_account("Nightly CI / build")
    assert bot.kind == m.SERVICE and bot.is_service and bot.password_hash is None and not bot.email_verified
    assert bot.email.endswith("@service-account.invalid") and bot.email.startswith("nightly-ci-build-")
    assert store.verify_api_key(store.create_api_key(bot.id, "ci")[1]).id == bot.id
    with pytest.raises(AccountDisabled, match="service account"):
        store.create_web_session(bot.id, ttl_seconds=60)
    assert [u.id for u in store.list_service_accounts()] == [bot.id]
    for bad in ("", " ", "x" * 101):
        with pytest.raises(ValueError):
            store.create_service_account(bad)


def test_scoped_tokens_are_short_lived_bounded_and_revoked_by_their_maker_only(store):
    owner = store.get_user(1)
    other = store.create_user("m@example.com")
    token, value = store.create_scoped_access_token(owner.id, [3, 1, 3], ttl_seconds=10 ** 6)
    assert token.repo_ids == (3, 1) and (token.expires_at - token.created_at).total_seconds() == 3600
    assert value.startswith("sbst_") and value not in repr(token)
    assert store.verify_scoped_access_token(value)[0].repo_ids == (3, 1)
    assert store.verify_scoped_access_token(value[:-1] + ("B" if value.endswith("A") else "A")) is None
    assert not store.revoke_scoped_access_token(other.id, token.id)
    assert store.revoke_scoped_access_token(owner.id, token.id)
    assert store.verify_scoped_access_token(value) is None
    for bad in ([], list(range(1, MAX_SCOPED_REPOS + 2))):
        with pytest.raises(ValueError):
            store.create_scoped_access_token(owner.id, bad)
    assert store.existing_repo_ids([1, 2, 999]) == {1, 2}


def test_migration_10_keeps_existing_users_active_people(tmp_path):
    url = f"sqlite:///{tmp_path}/m.db"
    engine = make_engine(url)
    migrate(engine, migrations=[x for x in MIGRATIONS if x[0] < 10])
    with engine.begin() as c:  # a user as version 9 stored them: no kind, no suspended_at
        c.execute(text("INSERT INTO users (email, name, role, created_at, email_verified) "
                       "VALUES ('old@example.com', 'Old', 'OWNER', '2025-01-01 00:00:00.000000', 1)"))
    engine.dispose()
    s = Store.open(str(tmp_path), database_url=url, environ=ENV)
    try:
        old = s.find_user_by_email("old@example.com")
        assert old.kind == m.HUMAN and old.suspended_at is None
        key = s.create_api_key(old.id, "k")[1]
        assert s.verify_api_key(key).id == old.id
        assert s.create_scoped_access_token(old.id, [1])[0].user_id == old.id
    finally:
        s.close()
