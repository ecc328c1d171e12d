"""E-mail sign-in codes in the store (codesearch.store.email_codes): single-use, short-lived,
a few tries, stored hashed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from codesearch.store import Store
from codesearch.store.email_codes import MAX_ATTEMPTS

ENV = {"SOURCEBOT_ENCRYPTION_KEY": "email-codes-test-secret-0123456789"}


@pytest.fixture
def store(tmp_path):
    with Store.open(str(tmp_path), environ=ENV) as s:
        yield s


def _wrong(code: str) -> str:
    return f"{(int(code) + 1) % 10**6:06d}"


def test_a_code_is_six_digits_and_works_once(store):
    code = store.issue_email_code("Alice@Example.com")
    assert len(code) == 6 and code.isdigit()
    assert store.use_email_code("alice@example.com ", code)  # the address as typed, in any case
    assert not store.use_email_code("alice@example.com", code)  # used up


@pytest.mark.parametrize("case", ["other address", "expired", "replaced", "too many wrong tries"])
def test_codes_that_do_not_work(store, case):
    code = store.issue_email_code("a@example.com", ttl=timedelta(seconds=-1) if case == "expired" else
                                  timedelta(minutes=10))
    if case == "other address":
        assert not store.use_email_code("b@example.com", code)
        assert store.use_email_code("a@example.com", code)  # still a@'s
        return
    if case == "replaced":
        newer = store.issue_email_code("a@example.com")
        assert code == newer or not store.use_email_code("a@example.com", code)
        return
    if case == "too many wrong tries":
        for _ in range(MAX_ATTEMPTS):
            assert not store.use_email_code("a@example.com", _wrong(code))
    assert not store.use_email_code("a@example.com", code)


def test_fewer_wrong_tries_leave_the_code_working(store):
    code = store.issue_email_code("a@example.com")
    for _ in range(MAX_ATTEMPTS - 1):
        assert not store.use_email_code("a@example.com", _wrong(code))
    assert store.use_email_code("a@example.com", code)


def test_neither_the_code_nor_the_address_is_stored(store):
    code = store.issue_email_code("secret-person@example.com")
    with store.engine.connect() as c:
        rows = [tuple(map(str, r)) for r in c.execute(text("SELECT * FROM email_codes"))]
    assert len(rows) == 1
    flat = " ".join(rows[0])
    assert code not in flat and "secret-person" not in flat
