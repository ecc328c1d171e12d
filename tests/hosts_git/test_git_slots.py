"""Git slots (`codesearch.git.slots`): how many git processes one server process runs for its
callers at once. Real git processes, held open on purpose (``cat-file --batch`` waiting for its
input), stand for slow reads; no Ray, no Serve."""

from __future__ import annotations

import contextvars
import os
import threading
import time

import pytest

from codesearch.errors import GitBusy
from codesearch.git import slots
from codesearch.git.process import Git, GitFailed
from tests.corpus import make_local_repo


@pytest.fixture
def repo(tmp_path) -> str:
    return make_local_repo(str(tmp_path / "repo"), {"a.txt": "hello\n"}) + "/.git"


@pytest.fixture
def installed():
    """Slots installed for the test (1 per caller, 2 in all, a short wait), removed after it."""
    table = slots.GitSlots(per_caller=1, total=2, wait_s=0.3)
    slots.install(table)
    yield table
    slots.install(None)


def as_caller(caller: str, fn):
    """Run `fn` in a fresh context that holds `caller`'s claim, as a request's worker thread does."""
    ctx = contextvars.Context()

    def body():
        slots.claim(caller)
        return fn()

    return ctx.run(body)


def open_stream(git_dir: str):
    """A git process that runs until its input is closed (a slow read, as long as we like)."""
    return Git.at(git_dir).stream(["cat-file", "--batch"], stdin=True)


def test_a_caller_past_its_limit_waits_then_gets_429_naming_its_own_limit(repo, installed):
    held = as_caller("user:1", lambda: open_stream(repo))
    try:
        started = time.monotonic()
        with pytest.raises(GitBusy) as err:
            as_caller("user:1", lambda: Git.at(repo).run(["rev-parse", "HEAD"]))
        assert time.monotonic() - started >= 0.25  # it waited for a slot before giving up
        assert err.value.status_code == 429 and err.value.error_code == "TOO_MANY_REQUESTS"
        assert "from you" in str(err.value) and "at most 1" in str(err.value)
        assert err.value.retry_after >= 1
        # another caller is not held back by user:1's reads
        out = as_caller("user:2", lambda: Git.at(repo).run(["rev-parse", "HEAD"]))
        assert out.returncode == 0
    finally:
        held.__exit__(None, None, None)
    assert installed.in_use() == 0


def test_when_the_process_is_full_other_callers_get_503(repo, installed):
    held = [as_caller(f"user:{i}", lambda: open_stream(repo)) for i in (1, 2)]
    try:
        with pytest.raises(GitBusy) as err:
            as_caller("user:3", lambda: Git.at(repo).run(["rev-parse", "HEAD"]))
        assert err.value.status_code == 503 and err.value.error_code == "SERVICE_UNAVAILABLE"
        assert "busy" in str(err.value)
    finally:
        for stream in held:
            stream.__exit__(None, None, None)
    assert installed.in_use() == 0


def test_a_freed_slot_goes_to_the_waiting_caller(repo, installed):
    installed.wait_s = 5.0
    held = as_caller("user:1", lambda: open_stream(repo))
    threading.Timer(0.3, lambda: held.__exit__(None, None, None)).start()
    started = time.monotonic()
    out = as_caller("user:1", lambda: Git.at(repo).run(["rev-parse", "HEAD"]))
    assert out.returncode == 0 and 0.2 < time.monotonic() - started < 4


def test_the_processes_of_one_request_share_its_slot(repo, installed):
    """A stream open while the same request runs another command (nested) takes no second slot."""

    def request():
        with open_stream(repo):
            assert installed.in_use("user:1") == 1
            Git.at(repo).run(["rev-parse", "HEAD"], check=True)  # would wait, then fail, with a 2nd slot
            assert installed.in_use("user:1") == 1
        return installed.in_use("user:1")

    assert as_caller("user:1", request) == 0


def test_work_without_a_claim_is_not_limited(repo, installed):
    """The indexers and mirrors run git with no caller: no slot, no wait."""
    held = [as_caller(f"user:{i}", lambda: open_stream(repo)) for i in (1, 2)]
    try:
        assert Git.at(repo).run(["rev-parse", "HEAD"]).returncode == 0
    finally:
        for stream in held:
            stream.__exit__(None, None, None)


def test_without_installed_slots_a_claim_does_nothing(repo):
    slots.install(None)
    assert as_caller("user:1", lambda: Git.at(repo).run(["rev-parse", "HEAD"])).returncode == 0


def test_a_slot_is_given_back_when_git_fails_or_times_out(repo, installed):
    as_caller("user:1", lambda: Git.at(repo).run(["rev-parse", "--verify", "nope"]))
    assert installed.in_use() == 0

    def timed_out():
        with Git.at(repo, timeout_s=0.2).stream(["cat-file", "--batch"], stdin=True) as stream:
            time.sleep(0.5)  # its timer kills git
            stream.finish()

    with pytest.raises(GitFailed, match="timed out"):
        as_caller("user:1", timed_out)
    assert installed.in_use() == 0


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, (2, None, 10.0)),
        ({"CODESEARCH_GIT_READS_PER_CALLER": "3", "CODESEARCH_GIT_READS_TOTAL": "9"}, (3, 9, 10.0)),
        ({"CODESEARCH_GIT_READS_WAIT_S": "0.5"}, (2, None, 0.5)),
        ({"CODESEARCH_GIT_READS_PER_CALLER": " "}, (2, None, 10.0)),
    ],
)
def test_settings_from_the_environment(environ, wanted):
    got = slots.settings_from_environ(environ)
    per_caller, total, wait_s = wanted
    assert got.per_caller == per_caller and got.wait_s == wait_s
    default_total = max(slots.MIN_TOTAL, slots.TOTAL_PER_CPU * (os.cpu_count() or 1))
    assert got.total == (default_total if total is None else total)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CODESEARCH_GIT_READS_PER_CALLER", "0"),
        ("CODESEARCH_GIT_READS_PER_CALLER", "two"),
        ("CODESEARCH_GIT_READS_TOTAL", "-1"),
        ("CODESEARCH_GIT_READS_WAIT_S", "nan"),
        ("CODESEARCH_GIT_READS_WAIT_S", "0"),
    ],
)
def test_a_bad_setting_is_an_error_naming_the_variable(name, value):
    with pytest.raises(ValueError, match=name):
        slots.settings_from_environ({name: value})


def test_the_error_crosses_processes_whole():
    import pickle

    err = pickle.loads(pickle.dumps(GitBusy("busy", retry_after=3, status_code=503)))
    assert (err.status_code, err.error_code, err.retry_after, str(err)) == (503, "SERVICE_UNAVAILABLE", 3, "busy")
