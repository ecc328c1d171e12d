"""Members in the store (codesearch.store.members, .identities): who becomes OWNER, invites used
once, sign-up and its identity in one transaction, users waiting for approval refused by every
credential, and the schema step that records whose address is verified (migration 7).

Races run real threads, each with its own `Store` on one database (as the API replicas and CLI
commands each open their own). The database is SQLite in a temporary folder; set
``CODESEARCH_TEST_POSTGRES_URL`` (a SQLAlchemy URL of an empty PostgreSQL database, with a driver
installed) to run the same races on PostgreSQL too, where serialization is the store's doing
(advisory lock, conditional UPDATEs) rather than SQLite's single writer.

The credential checks run over HTTP on 127.0.0.1 against the real app (`build_app`).
"""

from __future__ import annotations

import os
import threading

import httpx
import pytest
from sqlalchemy import insert, text

from codesearch.serving.api import build_app
from codesearch.store import Conflict, Store
from codesearch.store.members import InviteInvalid
from codesearch.store.migrations import LATEST_VERSION, MIGRATIONS, migrate
from codesearch.store.store import make_engine
from tests.asgiserver import serving

PG_URL = os.environ.get("CODESEARCH_TEST_POSTGRES_URL", "").strip()
ENV = {"SOURCEBOT_ENCRYPTION_KEY": "members-test-secret-0123456789abcdef"}


def _reset_postgres(url: str) -> None:
    engine = make_engine(url)
    with engine.begin() as c:
        c.execute(text("DROP SCHEMA public CASCADE"))
        c.execute(text("CREATE SCHEMA public"))
    engine.dispose()


@pytest.fixture(params=["sqlite"] + (["postgresql"] if PG_URL else []))
def open_store(request, tmp_path):
    """`open_store()`: a new `Store` on the test's one database (each call its own engine)."""
    url = None
    if request.param == "postgresql":
        _reset_postgres(PG_URL)
        url = PG_URL
    opened: list[Store] = []

    def open_one() -> Store:
        s = Store.open(str(tmp_path), database_url=url, environ=ENV)
        opened.append(s)
        return s

    open_one()  # created and migrated once, before any race
    yield open_one
    for s in opened:
        s.close()


def race(n: int, work) -> list:
    """Run `work(i)` in `n` threads that start together; each one's result or exception."""
    start = threading.Barrier(n)
    results: list = [None] * n

    def run(i):
        start.wait()
        try:
            results[i] = work(i)
        except Exception as e:  # noqa: BLE001 - returned for the caller to check
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


# ----------------------------------------------------------------------------- races

N = 8


def test_simultaneous_first_sign_ups_make_one_owner(open_store):
    stores = [open_store() for _ in range(N)]
    results = race(N, lambda i: stores[i].sign_up(f"user{i}@example.com", require_approval=True))
    assert not [r for r in results if isinstance(r, Exception)], results
    roles = sorted(user.role for user, _pending in results)
    assert roles == ["MEMBER"] * (N - 1) + ["OWNER"]
    (owner,) = [user for user, pending in results if user.role == "OWNER"]
    assert not stores[0].is_pending(owner.id)  # the first never waits, every other does
    assert len(stores[0].list_account_requests()) == N - 1


def test_an_invite_is_used_once_however_many_use_it_at_once(open_store):
    stores = [open_store() for _ in range(N)]
    owner = stores[0].create_user("owner@example.com")
    _invite, token = stores[0].create_invite(owner.id, role="OWNER")
    results = race(N, lambda i: stores[i].sign_up(f"user{i}@example.com", invite_token=token,
                                                  require_approval=True))
    joined = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(joined) == 1 and joined[0][0].role == "OWNER" and joined[0][1] is False
    assert len(refused) == N - 1 and all(isinstance(e, InviteInvalid) and "used already" in str(e) for e in refused)
    assert sorted(u.email for u in stores[0].list_users()) == sorted(["owner@example.com", joined[0][0].email])
    (used,) = stores[0].list_invites(include_used=True)
    assert used.accepted_by == joined[0][0].id


def test_an_invite_taken_by_a_sign_up_and_by_an_existing_user_at_once_goes_to_one(open_store):
    stores = [open_store() for _ in range(N)]
    owner = stores[0].create_user("owner@example.com")
    members = [stores[0].create_user(f"member{i}@example.com") for i in range(N // 2)]
    _invite, token = stores[0].create_invite(owner.id, role="OWNER")

    def use(i):
        if i % 2:
            return stores[i].sign_up(f"new{i}@example.com", invite_token=token)[0]
        return stores[i].accept_invite(token, members[i // 2].id)

    results = race(N, use)
    winners = [r for r in results if not isinstance(r, Exception)]
    assert len(winners) == 1 and winners[0].role == "OWNER", results
    assert all(isinstance(r, InviteInvalid) for r in results if r is not winners[0])
    assert sum(u.role == "OWNER" for u in stores[0].list_users()) == 2


# ----------------------------------------------------------------------------- sign-up with its identity

def _identity(subject: str, email: str | None = None) -> dict:
    """The `link_account` arguments of a GitHub identity (`email`: the address GitHub vouches for)."""
    return dict(provider="github", provider_type="github", subject=subject, host="github:https://github.com",
                login="someone", email=email)


def test_sign_up_links_its_identity_in_the_same_transaction(open_store):
    store = open_store()
    store.create_user("owner@example.com")
    user, _ = store.sign_up("one@example.com", identity=_identity("1", email="one@example.com"),
                            email_verified=True)
    (acct,) = store.list_linked_accounts(user_id=user.id)
    assert (acct.provider, acct.subject, acct.email) == ("github", "1", "one@example.com")
    assert user.email_verified is True
    # the identity is linked already (a concurrent sign-in was faster): nothing at all is stored
    with pytest.raises(Conflict):
        store.sign_up("two@example.com", identity=_identity("1"))
    assert store.find_user_by_email("two@example.com") is None
    # an invite is not used up by a sign-up that fails
    _invite, token = store.create_invite(None)
    with pytest.raises(Conflict):
        store.sign_up("two@example.com", invite_token=token, identity=_identity("1"))
    assert store.find_invite(token) is not None and store.find_user_by_email("two@example.com") is None


VERIFIED_CASES = [
    # how the user came to be, whether its address counts as verified
    ("added by an owner", lambda s: s.create_user("x@example.com"), True),
    ("signed up, the provider vouching", lambda s: s.sign_up("x@example.com", email_verified=True)[0], True),
    ("signed up, unverified", lambda s: s.sign_up("x@example.com")[0], False),
    ("joined with an invite and a password",
     lambda s: s.sign_up("x@example.com", password_hash="h", invite_token=s.create_invite(None)[1])[0], False),
    ("signed up unverified, then linked an identity vouching for the same address",
     lambda s: s.get_user(s.link_account(s.sign_up("x@example.com")[0].id, **_identity("9", email="x@example.com"))
                          .user_id), True),
    ("signed up unverified, then linked an identity vouching for another address",
     lambda s: s.get_user(s.link_account(s.sign_up("x@example.com")[0].id, **_identity("9", email="y@example.com"))
                          .user_id), False),
]


@pytest.mark.parametrize("how,make,verified", VERIFIED_CASES, ids=[c[0] for c in VERIFIED_CASES])
def test_whose_address_counts_as_verified(open_store, how, make, verified):
    store = open_store()
    store.create_user("owner@example.com")
    user = make(store)
    assert user.email_verified is verified
    assert store.find_user_by_email("x@example.com").email_verified is verified


# ----------------------------------------------------------------------------- waiting for approval

def _oauth_token(store: Store, user_id: int) -> str:
    client, _ = store.create_oauth_client("test client", ["http://127.0.0.1:1/cb"], {}, with_secret=False)
    code = store.create_oauth_code(client_id=client.id, user_id=user_id, redirect_uri="http://127.0.0.1:1/cb",
                                   code_challenge="x", scope="mcp", resource=None, ttl_seconds=60)
    return store.redeem_oauth_code(code, client_id=client.id, check=lambda _c: None, access_ttl=600,
                                   refresh_ttl=None).tokens.access_token


def _mcp(base: str, token: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    return httpx.post(base + "/api/mcp", json=body, timeout=30,
                      headers={"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"})


CREDENTIALS = [
    # credential, how a request presents it, the store's own check
    ("API key", lambda s, uid: s.create_api_key(uid, "k")[1],
     lambda base, key: httpx.get(base + "/api/repos", headers={"Authorization": f"Bearer {key}"}),
     lambda s, key: s.verify_api_key(key)),
    ("web session", lambda s, uid: s.create_web_session(uid, ttl_seconds=600)[0],
     lambda base, cookie: httpx.get(base + "/api/repos", cookies={"codesearch_session": cookie}),
     lambda s, cookie: s.get_web_session(cookie)),
    ("OAuth access token", _oauth_token, _mcp, lambda s, token: s.verify_oauth_access_token(token)),
]


class _Searcher:
    def search(self, *a, **k):
        raise AssertionError("no search here")


@pytest.mark.parametrize("kind,issue,request_with,check", CREDENTIALS, ids=[c[0] for c in CREDENTIALS])
def test_a_user_waiting_for_approval_is_refused_by_every_credential(tmp_path, kind, issue, request_with, check):
    """However a waiting user came by a credential (one made before an owner turned approval on,
    one an owner made on the command line, ...), the store refuses it until they are approved."""
    store = Store.open(str(tmp_path), environ=ENV)
    store.create_user("owner@example.com")
    waiting, pending = store.sign_up("new@example.com", require_approval=True)
    assert pending
    credential = issue(store, waiting.id)
    app = build_app(lambda: _Searcher(), get_store=lambda: store, anonymous_access=False, environ={})
    try:
        with serving(app, lifespan="on") as base:
            assert check(store, credential) is None
            assert request_with(base, credential).status_code == 401
            store.approve_account_request(waiting.id)
            assert check(store, credential) is not None
            assert request_with(base, credential).status_code == 200
    finally:
        store.close()


# ----------------------------------------------------------------------------- migration 7

def test_migration_7_marks_the_addresses_the_store_knows_to_be_verified(tmp_path):
    """Users of a version-6 database get `email_verified` from what was stored: a linked account
    with the same address (kept only when its provider vouched for it), or no sign-up of their
    own (no linked account, no invite used); else false."""
    engine = make_engine(f"sqlite:///{tmp_path / 'codesearch.db'}")
    migrate(engine, migrations=MIGRATIONS[:6])
    t = "2025-01-01 00:00:00.000000"
    cases = {  # e-mail: (linked account e-mails, joined with an invite, expected)
        "added@example.com": ([], False, True),
        "sso-verified@example.com": (["sso-verified@example.com"], False, True),
        "sso-unverified@example.com": ([None], False, False),
        "invited-password@example.com": ([], True, False),
        "invited-sso@example.com": (["invited-sso@example.com"], True, True),
        "added-then-gitea@example.com": ([None], False, False),
        "another-address@example.com": (["other@example.com"], False, False),
    }
    with engine.begin() as c:
        for n, (email, (accounts, invited, _)) in enumerate(cases.items(), start=1):
            c.execute(text("INSERT INTO users (id, email, name, role, created_at) VALUES (:i, :e, '', 'MEMBER', :t)"),
                      {"i": n, "e": email, "t": t})
            for k, acct_email in enumerate(accounts):
                c.execute(text("INSERT INTO linked_accounts (user_id, provider, provider_type, subject, email, "
                               "created_at) VALUES (:u, 'p', 'github', :s, :m, :t)"),
                          {"u": n, "s": f"{n}-{k}", "m": acct_email, "t": t})
            if invited:
                c.execute(text("INSERT INTO invites (id, role, created_at, expires_at, accepted_at, accepted_by) "
                               "VALUES (:i, 'MEMBER', :t, :t, :t, :u)"), {"i": f"inv{n}", "t": t, "u": n})
    engine.dispose()
    with Store.open(str(tmp_path), environ=ENV) as store:
        assert store.schema_version() == LATEST_VERSION
        got = {u.email: u.email_verified for u in store.list_users()}
    assert got == {email: expected for email, (_a, _i, expected) in cases.items()}
