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
    ("users remove a@x", {"command": "users", "action": "remove", "email": "a@x", "name": None, "password": False,
                          "password_stdin": False, "data_dir": None}),
    ("users deactivate a@x --data-dir /d", {"command": "users", "action": "deactivate", "email": "a@x", "name": None,
                                            "password": False, "password_stdin": False, "data_dir": "/d"}),
    ("users --data-dir /d reactivate a@x", {"command": "users", "action": "reactivate", "email": "a@x", "name": None,
                                            "password": False, "password_stdin": False, "data_dir": "/d"}),
    ("users --data-dir /d service-account create ci --role OWNER", {
        "command": "users", "action": "service-account", "service_action": "create", "account_name": "ci",
        "role": "OWNER", "key_name": "cli", "name": None, "password": False, "password_stdin": False,
        "data_dir": "/d"}),
    ("users service-account list --data-dir /d", {
        "command": "users", "action": "service-account", "service_action": "list", "name": None, "password": False,
        "password_stdin": False, "data_dir": "/d"}),
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
    "users remove",  # no e-mail
    "users deactivate a@x b@x",
    "users service-account",  # no action
    "users service-account create",  # no name
    "users service-account create ci --role ADMIN",
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


def _cli(data: str, *line: str) -> int:
    return cli.main(["users", *line, "--data-dir", data])


def test_offboarding_and_service_accounts_end_to_end(tmp_path, monkeypatch, capsys):
    """The rules of the settings pages, from the shell: the last owner stays, an unknown e-mail
    is named, deactivating ends a key at once, every change is audited with the actor cli."""
    monkeypatch.delenv("SOURCEBOT_EE_AUDIT_LOGGING_ENABLED", raising=False)
    data = str(tmp_path / "data")
    assert _cli(data, "service-account", "create", "ci") == 2  # the first account must be a person
    assert "the first account must be a person" in capsys.readouterr().err
    for email in ("owner@example.com", "member@example.com"):
        assert _cli(data, "create", email) == 0
    with Store.open(data) as store:
        member = store.find_user_by_email("member@example.com")
        _, member_key = store.create_api_key(member.id, "laptop")
    capsys.readouterr()

    for action, what in (("remove", "removed"), ("deactivate", "deactivated")):  # the last active owner stays
        assert _cli(data, action, "owner@example.com") == 1
        assert f"'owner@example.com' is the last owner and cannot be {what}" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no user 'nobody@example.com'"):
        _cli(data, "deactivate", "nobody@example.com")

    assert _cli(data, "deactivate", "member@example.com") == 0
    assert "deactivated member@example.com" in capsys.readouterr().out
    assert _cli(data, "deactivate", "member@example.com") == 0  # a no-op, not audited twice
    assert "already deactivated" in capsys.readouterr().out
    with Store.open(data) as store:
        assert store.verify_api_key(member_key) is None  # ended at once
    assert _cli(data, "list") == 0
    assert capsys.readouterr().out.splitlines()[1].endswith("member@example.com\tMEMBER\t\thuman\tdeactivated")
    assert _cli(data, "reactivate", "member@example.com") == 0
    assert "reactivated member@example.com" in capsys.readouterr().out

    assert _cli(data, "service-account", "create", "CI bot", "--key-name", "ci") == 0
    created = capsys.readouterr()
    secret = created.out.strip()
    assert "created service account CI bot (MEMBER)" in created.err and "shown once" in created.err
    with Store.open(data) as store:
        bot = store.verify_api_key(secret)
        assert bot.is_service and bot.email.endswith("@service-account.invalid")
    assert _cli(data, "service-account", "list") == 0
    assert capsys.readouterr().out == f"{bot.id}\t{bot.email}\tMEMBER\tCI bot\tactive\t1 active key\n"
    assert _cli(data, "service-account", "create", " ") == 2
    assert "NAME: a service account needs a name of 1 to 100 characters" in capsys.readouterr().err

    assert _cli(data, "remove", "member@example.com") == 0
    with Store.open(data) as store:
        assert store.find_user_by_email("member@example.com") is None
        events, _ = store.list_audit_events(actor="cli")
        assert [(e.action, e.target) for e in reversed(events)] == [
            ("user.create", "owner@example.com"), ("user.create", "member@example.com"),
            ("member.deactivate", "member@example.com"), ("member.reactivate", "member@example.com"),
            ("service_account.create", "CI bot"), ("apikey.create", str(store.list_api_keys(bot.id)[0].id)),
            ("member.remove", "member@example.com"),
        ]

    # SOURCEBOT_EE_AUDIT_LOGGING_ENABLED: false records nothing; a bad value changes nothing
    monkeypatch.setenv("SOURCEBOT_EE_AUDIT_LOGGING_ENABLED", "off")
    assert _cli(data, "remove", bot.email) == 2
    assert "SOURCEBOT_EE_AUDIT_LOGGING_ENABLED='off'" in capsys.readouterr().err
    monkeypatch.setenv("SOURCEBOT_EE_AUDIT_LOGGING_ENABLED", "false")
    assert _cli(data, "remove", bot.email) == 0
    with Store.open(data) as store:
        assert store.find_user_by_email(bot.email) is None
        assert store.list_audit_events(actor="cli")[1] == 7
