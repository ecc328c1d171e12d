"""The `codesearch` dispatcher (codesearch/cli/): nested subcommands parse the command lines they
always took, options before or after the action; `users` and `keys` work end to end on a data
directory (in this process, on the real store)."""

from __future__ import annotations

import io

import pytest

from codesearch import cli
from codesearch.store import Store


def parse(line: str) -> dict:
    args = vars(cli.build_parser().parse_args(line.split()))
    return {k: v for k, v in args.items() if k not in ("func", "act")}


@pytest.mark.parametrize("line,expected", [
    ("keys create --user a@x", {"command": "keys", "action": "create", "user": "a@x", "name": "cli", "all": False,
                                "data_dir": None}),
    ("keys --user a@x create", {"command": "keys", "action": "create", "user": "a@x", "name": "cli", "all": False,
                                "data_dir": None}),
    ("keys --user a@x --name ci create --data-dir /d", {"command": "keys", "action": "create", "user": "a@x",
                                                        "name": "ci", "all": False, "data_dir": "/d"}),
    ("keys --user a@x create --user b@x", {"command": "keys", "action": "create", "user": "b@x", "name": "cli",
                                           "all": False, "data_dir": None}),  # the later one wins
    ("keys revoke 7 --user a@x", {"command": "keys", "action": "revoke", "key_id": 7, "user": "a@x", "name": "cli",
                                  "all": False, "data_dir": None}),
    ("keys --all list --user a@x", {"command": "keys", "action": "list", "user": "a@x", "name": "cli", "all": True,
                                    "data_dir": None}),
    ("users create a@x --name A --password-stdin", {"command": "users", "action": "create", "email": "a@x", "name": "A",
                                                    "password": False, "password_stdin": True, "data_dir": None}),
    ("users --data-dir /d --password-stdin set-password a@x", {"command": "users", "action": "set-password",
                                                               "email": "a@x", "name": None, "password": False,
                                                               "password_stdin": True, "data_dir": "/d"}),
    ("users list", {"command": "users", "action": "list", "name": None, "password": False, "password_stdin": False,
                    "data_dir": None}),
    ("config schema", {"command": "config", "config_command": "schema", "file": "index.json"}),
])
def test_command_lines(line, expected):
    assert parse(line) == expected


@pytest.mark.parametrize("line", [
    "users create",  # no e-mail
    "users set-password --password-stdin",
    "users frob",
    "users create a@x --password --password-stdin",
    "keys revoke --user a@x",  # no key id
    "keys revoke seven --user a@x",
    "config",
])
def test_bad_command_lines_exit_2(line, capsys):
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(line.split())
    assert e.value.code == 2 and "error:" in capsys.readouterr().err


def test_users_and_keys_end_to_end(tmp_path, monkeypatch, capsys):
    data = str(tmp_path / "data")
    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-password\n"))
    assert cli.main(["users", "--data-dir", data, "create", "owner@example.com", "--password-stdin"]) == 0
    assert "created user owner@example.com (OWNER), id 1" in capsys.readouterr().out

    assert cli.main(["keys", "list", "--data-dir", data]) == 2
    assert "keys list needs --user EMAIL" in capsys.readouterr().err
    assert cli.main(["keys", "--user", "owner@example.com", "--data-dir", data, "create"]) == 0
    created = capsys.readouterr()
    secret = created.out.strip()
    assert "API key 1 for owner@example.com" in created.err and len(secret) > 20
    with Store.open(data) as store:
        assert store.verify_api_key(secret).email == "owner@example.com"

    assert cli.main(["keys", "revoke", "1", "--user", "owner@example.com", "--data-dir", data]) == 0
    assert cli.main(["keys", "revoke", "1", "--user", "owner@example.com", "--data-dir", data]) == 1
    assert "has no active key 1" in capsys.readouterr().err
    assert cli.main(["keys", "list", "--all", "--user", "owner@example.com", "--data-dir", data]) == 0
    assert capsys.readouterr().out.rstrip().endswith("\trevoked")
    with Store.open(data) as store:
        events, _total = store.list_audit_events(actor="cli")
        assert [e.action for e in events] == ["apikey.revoke", "apikey.create", "user.create"]  # newest first

    with pytest.raises(SystemExit, match="no user 'nobody@example.com'"):
        cli.main(["keys", "list", "--user", "nobody@example.com", "--data-dir", data])
