"""The environment variables Sourcebot documents, read with its meaning and defaults
(codesearch.environment): where the data lives, the sign-in secret and session age, who may
create and use API keys, the log level.

A running Serve instance cannot switch its environment, so the app is built in process for each
case (as in test_service_auth.py); the data directory and the log level are checked on the real
command line, in a subprocess.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import subprocess
import sys
import warnings
from datetime import timedelta

import pytest

from codesearch import environment
from codesearch.serving.api import build_app
from codesearch.store import Store
from codesearch import sessions
from codesearch.accounts import hash_password
from tests.conftest import LOCAL

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

OWNER = {"email": "owner@example.com", "password": "owner-pass-1"}
MEMBER = {"email": "member@example.com", "password": "member-pass-1"}


# ----------------------------------------------------------------------------- where the data lives

@pytest.mark.parametrize("env,older_release_data,want", [
    ({}, False, "{home}/.codesearch"),
    ({"DATA_DIR": "{tmp}/vol"}, False, "{tmp}/vol/.codesearch"),  # Sourcebot: $DATA_DIR/.sourcebot
    ({"DATA_DIR": "{tmp}/vol"}, True, "{tmp}/vol"),  # an older release kept its data in DATA_DIR itself
    ({"DATA_CACHE_DIR": "{tmp}/cache"}, False, "{tmp}/cache"),
    ({"DATA_DIR": "{tmp}/vol", "DATA_CACHE_DIR": "{tmp}/cache"}, True, "{tmp}/cache"),
    ({"DATA_DIR": "  ", "DATA_CACHE_DIR": ""}, False, "{home}/.codesearch"),
])
def test_data_dir(tmp_path, monkeypatch, env, older_release_data, want):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    fill = {"tmp": str(tmp_path), "home": str(tmp_path / "home")}
    env = {k: v.format(**fill) for k, v in env.items()}
    if older_release_data:
        os.makedirs(tmp_path / "vol")
        Store.open(tmp_path / "vol", environ={}).close()
    assert environment.data_dir(env) == want.format(**fill)


def _cli(*args, env: dict, umask: int | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("DATA_DIR", "DATA_CACHE_DIR", "SOURCEBOT_LOG_LEVEL", "SOURCEBOT_ENCRYPTION_KEY")}
    return subprocess.run([sys.executable, "-m", "codesearch.cli", *args], capture_output=True, text=True,
                          env={**clean, **env}, timeout=60,
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_cli_puts_a_private_data_dir_where_sourcebot_would(tmp_path):
    """DATA_DIR → $DATA_DIR/.codesearch, made 0700 with 0600 files even under umask 000; the
    next command finds the same data there."""
    out = _cli("users", "create", "a@example.com", env={"DATA_DIR": str(tmp_path / "vol")}, umask=0)
    assert out.returncode == 0, out.stderr
    data = tmp_path / "vol" / ".codesearch"
    assert _mode(data) == 0o700
    assert {p.name: _mode(p) for p in data.iterdir()} == {
        name: 0o600 for name in ("codesearch.db", "codesearch.db-wal", "codesearch.db-shm", ".secret")
        if (data / name).exists()}
    assert (data / "codesearch.db").exists() and (data / ".secret").exists()
    listed = _cli("users", "list", env={"DATA_CACHE_DIR": str(data)})
    assert listed.returncode == 0 and "a@example.com" in listed.stdout


@pytest.mark.parametrize("level,info_shown", [
    (None, True),  # Sourcebot's default: info
    ("info", True), ("INFO", True), ("debug", True), (" warn ", False), ("error", False),
])
def test_log_level(tmp_path, level, info_shown):
    env = {"DATA_CACHE_DIR": str(tmp_path / "d")} | ({"SOURCEBOT_LOG_LEVEL": level} if level is not None else {})
    out = _cli("users", "create", "a@example.com", env=env)
    assert out.returncode == 0, out.stderr
    # a new data directory logs (at info) that it generated the server secret
    assert ("INFO codesearch.store.secret: generated the server secret" in out.stderr) is info_shown, out.stderr


def test_a_bad_log_level_is_a_clear_error(tmp_path):
    out = _cli("users", "list", env={"DATA_CACHE_DIR": str(tmp_path / "d"), "SOURCEBOT_LOG_LEVEL": "verbose"})
    assert out.returncode == 2
    assert out.stderr.strip() == ("codesearch: environment variable SOURCEBOT_LOG_LEVEL='verbose': "
                                  "use one of debug, info, warn, error")
    assert not (tmp_path / "d").exists()  # nothing was started


# ----------------------------------------------------------------------------- structured logs

JSON_LOG_KEYS = ["timestamp", "level", "logger", "message"]


def _json_lines(text: str) -> list[dict]:
    import json

    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("to_file", [False, True])
def test_structured_logs_are_one_json_object_per_line(tmp_path, to_file):
    """SOURCEBOT_STRUCTURED_LOGGING_ENABLED=true: the CLI's log lines are JSON on stdout (and in
    SOURCEBOT_STRUCTURED_LOGGING_FILE when set), none on stderr."""
    log_file = tmp_path / "logs" / "codesearch.jsonl"
    log_file.parent.mkdir()
    env = {"DATA_CACHE_DIR": str(tmp_path / "d"), "SOURCEBOT_STRUCTURED_LOGGING_ENABLED": "true"}
    if to_file:
        env["SOURCEBOT_STRUCTURED_LOGGING_FILE"] = str(log_file)
    out = _cli("users", "create", "a@example.com", env=env)
    assert out.returncode == 0, out.stderr
    lines = _json_lines(out.stdout)
    secret = [x for x in lines if x["message"].startswith("generated the server secret")]
    assert len(secret) == 1, out.stdout
    assert list(secret[0])[:4] == JSON_LOG_KEYS and secret[0]["level"] == "info"
    assert secret[0]["logger"] == "codesearch.store.secret"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", secret[0]["timestamp"])
    assert "generated the server secret" not in out.stderr
    assert _json_lines(log_file.read_text()) == lines if to_file else not log_file.exists()


def test_structured_logs_carry_the_exception(tmp_path):
    code = (
        "import logging\n"
        "from codesearch import environment\n"
        "environment.configure_logging()\n"
        "log = logging.getLogger('codesearch.demo')\n"
        "log.warning('careful: %s', 'x')\n"
        "try:\n"
        "    1 / 0\n"
        "except ZeroDivisionError:\n"
        "    log.exception('it failed')\n"
        "log.debug('not shown at info')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCEBOT_")}
    env.update({"SOURCEBOT_STRUCTURED_LOGGING_ENABLED": "TRUE", "SOURCEBOT_STRUCTURED_LOGGING_FILE": "",
                "PYTHONPATH": os.getcwd()})
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    got = _json_lines(out.stdout)
    assert len(got) == len(lines) == 2 and out.stderr == ""
    assert [(x["level"], x["logger"], x["message"]) for x in got] == [
        ("warn", "codesearch.demo", "careful: x"), ("error", "codesearch.demo", "it failed")]
    assert "exception" not in got[0]
    assert got[1]["exception"].startswith("Traceback") and "ZeroDivisionError" in got[1]["exception"]


@pytest.mark.parametrize("env, want", [
    ({}, (False, None)),
    ({"SOURCEBOT_STRUCTURED_LOGGING_FILE": "/x.log"}, (False, None)),  # ignored when off, as Sourcebot
    ({"SOURCEBOT_STRUCTURED_LOGGING_ENABLED": "false"}, (False, None)),
    ({"SOURCEBOT_STRUCTURED_LOGGING_ENABLED": "true", "SOURCEBOT_STRUCTURED_LOGGING_FILE": "/x.log"}, (True, "/x.log")),
])
def test_structured_logging_switch(env, want):
    assert environment.structured_logging(env) == want


def test_an_unwritable_log_file_is_a_clear_error(tmp_path):
    env = {"DATA_CACHE_DIR": str(tmp_path / "d"), "SOURCEBOT_STRUCTURED_LOGGING_ENABLED": "true",
           "SOURCEBOT_STRUCTURED_LOGGING_FILE": str(tmp_path / "no-such-dir" / "x.log")}
    out = _cli("users", "list", env=env)
    assert out.returncode == 2
    assert "SOURCEBOT_STRUCTURED_LOGGING_FILE" in out.stderr and "cannot be opened" in out.stderr


# ----------------------------------------------------------------------------- the database

DB_PARTS = {"DATABASE_HOST": "db.example:5432", "DATABASE_USERNAME": "sb", "DATABASE_PASSWORD": "s3cr%40t",
            "DATABASE_NAME": "sourcebot"}


@pytest.mark.parametrize("env, url", [
    ({}, None),
    ({"DATABASE_ARGS": "sslmode=require"}, None),  # alone it says nothing
    (DB_PARTS, "postgresql://sb:s3cr%40t@db.example:5432/sourcebot"),
    (DB_PARTS | {"DATABASE_ARGS": "sslmode=require&schema=cs"},
     "postgresql://sb:s3cr%40t@db.example:5432/sourcebot?sslmode=require&schema=cs"),
    (DB_PARTS | {"DATABASE_URL": "sqlite:////tmp/x.db"}, "sqlite:////tmp/x.db"),  # DATABASE_URL wins, as Sourcebot's
])
def test_sourcebots_split_database_variables(env, url):
    assert environment.database_url(env) == url


@pytest.mark.parametrize("missing", list(DB_PARTS))
def test_some_split_database_variables_are_refused(missing):
    env = {k: v for k, v in DB_PARTS.items() if k != missing}
    with pytest.raises(environment.InvalidEnvironmentVariable, match=f"set {missing} too") as e:
        environment.database_url(env)
    assert "s3cr" not in str(e.value)  # never a value


def test_the_cli_opens_the_database_the_split_variables_name(tmp_path):
    """The command line builds Sourcebot's URL and opens it: here PostgreSQL without its driver,
    so it says which database it tried (password hidden)."""
    out = _cli("users", "list", env={"DATA_CACHE_DIR": str(tmp_path / "d"), **DB_PARTS, "DATABASE_ARGS": "sslmode=require"})
    assert out.returncode != 0
    assert "postgresql://sb:***@db.example:5432/sourcebot?sslmode=require" in out.stderr, out.stderr
    assert "s3cr" not in out.stderr + out.stdout


@pytest.fixture()
def codesearch_logger():
    logger = logging.getLogger("codesearch")
    level = logger.level
    yield logger
    logger.setLevel(level)


@pytest.mark.parametrize("level,want", [(None, logging.INFO), ("debug", logging.DEBUG), ("warn", logging.WARNING)])
def test_each_replica_applies_the_log_level_when_its_app_is_built(codesearch_logger, level, want):
    environ = {} if level is None else {"SOURCEBOT_LOG_LEVEL": level}
    build_app(lambda: None, get_store=lambda: None, anonymous_access=True, environ=environ)
    assert codesearch_logger.getEffectiveLevel() == want
    with pytest.raises(environment.InvalidEnvironmentVariable, match="SOURCEBOT_LOG_LEVEL"):
        build_app(lambda: None, get_store=lambda: None, anonymous_access=True,
                  environ={"SOURCEBOT_LOG_LEVEL": "loud"})


# ----------------------------------------------------------------------------- sessions


@pytest.fixture()
def accounts(tmp_path):
    store = Store.open(tmp_path / "data", environ={})
    owner = store.create_user(OWNER["email"], password_hash=hash_password(OWNER["password"]))
    member = store.create_user(MEMBER["email"], password_hash=hash_password(MEMBER["password"]))
    yield store, owner, member
    store.close()


def _app(store, monkeypatch, env: dict[str, str], **kwargs):
    for name in ("AUTH_SESSION_MAX_AGE_SECONDS", environment.KEY_CREATION_OWNER_ONLY,
                 environment.KEY_CREATION_OWNER_ONLY_DEPRECATED, environment.KEY_USAGE_OWNER_ONLY):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return build_app(lambda: None, get_store=lambda: store, anonymous_access=kwargs.pop("anonymous_access", False),
                     **kwargs)


def _sign_in(app, account) -> tuple[TestClient, str]:
    """A client signed in as `account`, and the Set-Cookie header of its session."""
    c = TestClient(app, base_url=LOCAL)
    token = re.search(r'name="csrf_token" value="([^"]+)"', c.get("/login").text).group(1)
    r = c.post("/login", data={**account, "csrf_token": token}, follow_redirects=False)
    assert r.status_code == 303, r.text
    return c, next(h for h in r.headers.get_list("set-cookie") if h.startswith(sessions.SESSION_COOKIE + "="))


@pytest.mark.parametrize("value,seconds", [(None, 2_592_000), ("120", 120), (" 3600 ", 3600)])
def test_session_max_age(accounts, monkeypatch, value, seconds):
    store, owner, _ = accounts
    c, cookie = _sign_in(_app(store, monkeypatch, {} if value is None else {"AUTH_SESSION_MAX_AGE_SECONDS": value}),
                         OWNER)
    assert f"Max-Age={seconds};" in cookie
    (session,) = [s for s in [store.get_web_session(c.cookies[sessions.SESSION_COOKIE])] if s]
    assert session[0].expires_at - session[0].created_at == timedelta(seconds=seconds)
    assert c.get("/api/repos").status_code == 200
    real = store.clock
    store.clock = lambda: real() + timedelta(seconds=seconds + 1)
    try:
        assert c.get("/api/repos").status_code == 401
    finally:
        store.clock = real


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5"])
def test_a_bad_session_max_age_is_a_clear_error(accounts, monkeypatch, value):
    with pytest.raises(environment.InvalidEnvironmentVariable, match="AUTH_SESSION_MAX_AGE_SECONDS=.*whole number"):
        _app(accounts[0], monkeypatch, {"AUTH_SESSION_MAX_AGE_SECONDS": value})


def test_auth_secret_validates_session_cookies(tmp_path, monkeypatch, accounts):
    """Two replicas with the same AUTH_SECRET accept each other's cookies; after AUTH_SECRET
    changes, old cookies no longer sign anyone in."""
    data = tmp_path / "data"
    replica = {secret: Store.open(data, environ={"AUTH_SECRET": secret}) for secret in ("first", "first ", "second")}
    try:
        c, _ = _sign_in(_app(replica["first"], monkeypatch, {}), OWNER)
        cookie = {sessions.SESSION_COOKIE: c.cookies[sessions.SESSION_COOKIE]}
        for secret, status in (("first", 200), ("first ", 200), ("second", 401)):
            other = TestClient(_app(replica[secret], monkeypatch, {}), cookies=cookie, base_url=LOCAL)
            assert other.get("/api/repos").status_code == status, secret
    finally:
        for s in replica.values():
            s.close()


# ----------------------------------------------------------------------------- API keys

@pytest.mark.parametrize("env,members_create,members_use", [
    ({}, True, True),
    ({"DISABLE_API_KEY_CREATION_FOR_NON_OWNER_USERS": "true"}, False, True),
    ({"DISABLE_API_KEY_CREATION_FOR_NON_OWNER_USERS": "TRUE"}, False, True),
    ({"DISABLE_API_KEY_CREATION_FOR_NON_OWNER_USERS": "false"}, True, True),
    ({"EXPERIMENT_DISABLE_API_KEY_CREATION_FOR_NON_ADMIN_USERS": "true"}, False, True),  # deprecated name
    ({"DISABLE_API_KEY_USAGE_FOR_NON_OWNER_USERS": "true"}, False, False),  # usage implies creation
])
def test_who_may_create_and_use_api_keys(accounts, monkeypatch, env, members_create, members_use):
    store, owner, member = accounts
    app = _app(store, monkeypatch, env)
    for account, user, may_create in ((OWNER, owner, True), (MEMBER, member, members_create)):
        c, _ = _sign_in(app, account)
        page = c.get("/settings/keys")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        assert ('action="/settings/keys"' in page.text) is may_create, account
        before = len(store.list_api_keys(user.id))
        r = c.post("/settings/keys", data={"name": "laptop", "csrf_token": token})
        assert r.status_code == (201 if may_create else 403), account
        assert len(store.list_api_keys(user.id)) == before + (1 if may_create else 0)
        if not may_create:
            assert "Only owners can create API keys" in r.text

    # keys made elsewhere (the CLI is an operator's tool): a member's key works only when allowed,
    # and a refused key is refused even where anonymous access would let a visitor in
    for anonymous in (False, True):
        client = TestClient(_app(store, monkeypatch, env, anonymous_access=anonymous), base_url=LOCAL)
        for user, may_use in ((owner, True), (member, members_use)):
            _, key = store.create_api_key(user.id, "cli")
            for method, path, headers in (("GET", "/api/repos", {"Authorization": f"Bearer {key}"}),
                                          ("GET", "/api/repos", {"X-Sourcebot-Api-Key": key}),
                                          ("POST", "/api/search", {"Authorization": f"Bearer {key}"}),
                                          ("POST", "/api/mcp", {"Authorization": f"Bearer {key}",
                                                                "Accept": "application/json, text/event-stream"})):
                if method == "GET":
                    r = client.get(path, headers=headers)
                elif may_use:
                    continue  # a body needs a searcher or an MCP session; only the refusal is checked here
                else:
                    r = client.post(path, headers=headers, json={"query": "x", "matches": 1} if "search" in path
                                    else {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                if may_use:
                    assert r.status_code == 200, r.text
                else:
                    assert r.status_code == 403 and r.json()["errorCode"] == "INSUFFICIENT_PERMISSIONS"
                    assert "DISABLE_API_KEY_USAGE_FOR_NON_OWNER_USERS" in r.json()["message"]
                    assert "www-authenticate" not in r.headers


# ----------------------------------------------------------------------------- the audit log

@pytest.mark.parametrize("value,recorded", [(None, True), ("false", False)])  # every spelling: tests/service/test_audit.py
def test_audit_logging_switch_in_the_built_app(accounts, monkeypatch, value, recorded):
    """SOURCEBOT_EE_AUDIT_LOGGING_ENABLED=false: a sign-in and reading the usage report leave no
    row (the app's log is flushed by hand: nothing is queued to write later either), and both
    the usage report and the audit log page say that counting needs the log."""
    store = accounts[0]
    monkeypatch.delenv(environment.AUDIT_LOGGING_ENV, raising=False)
    app = _app(store, monkeypatch, {} if value is None else {environment.AUDIT_LOGGING_ENV: value})
    c, _ = _sign_in(app, OWNER)
    assert c.get("/api/usage").json()["auditLoggingEnabled"] is recorded
    for page in ("/settings/usage", "/settings/audit"):
        r = c.get(page)
        assert r.status_code == 200 and ('id="audit-logging-off"' in r.text) is not recorded, page
    app.state.services.audit.flush()
    actions = {e.action for e in store.list_audit_events(per_page=500)[0]}
    assert ({"login", "usage.read"} <= actions) if recorded else actions == set()


def test_a_bad_audit_logging_switch_stops_the_app(accounts, monkeypatch):
    with pytest.raises(environment.InvalidEnvironmentVariable, match="SOURCEBOT_EE_AUDIT_LOGGING_ENABLED='off'"):
        _app(accounts[0], monkeypatch, {environment.AUDIT_LOGGING_ENV: "off"})
