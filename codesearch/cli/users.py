"""``codesearch users create|list|set-password``: local accounts, from the server's shell
(``remove``, ``deactivate``, ``reactivate`` and ``service-account``: `codesearch.cli.members`).

The first user becomes OWNER. A password is never taken from the command line: typed twice at a
prompt, or one line of stdin with ``--password-stdin``; it is checked and hashed by
`codesearch.accounts`, as the web's pages do. Setting a password signs the user's web sessions out.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from codesearch.cli.common import (
    DATA_DIR_HELP,
    add_actions,
    audit,
    find_user,
    open_store,
)
from codesearch.cli.members import ACTIONS as MEMBER_ACTIONS
from codesearch.cli.members import register_actions as register_member_actions
from codesearch.plurals import plural

if TYPE_CHECKING:
    from codesearch.cli.common import Subparsers


def read_password(args: argparse.Namespace, *, required: bool) -> str | None:
    """The new password: one line of stdin with --password-stdin, else (when `required` or
    --password) typed twice at a prompt. Never from the command line."""
    from codesearch.accounts import password_problem

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif required or args.password:
        import getpass

        if not sys.stdin.isatty():
            raise SystemExit("codesearch: no terminal to ask for the password; pipe it with --password-stdin")
        password = getpass.getpass("New password: ")
        if getpass.getpass("Again: ") != password:
            raise SystemExit("codesearch: the passwords do not match")
    else:
        return None
    problem = password_problem(password)
    if problem:
        raise SystemExit(f"codesearch: {problem}")
    return password


def create(args: argparse.Namespace) -> int:
    from codesearch.accounts import hash_password

    password = read_password(args, required=False)
    with open_store(args) as store:
        user = store.create_user(
            args.email, args.name or "", password_hash=hash_password(password) if password else None
        )
        audit(store, "user.create", user.email, role=user.role)
        print(f"created user {user.email} ({user.role}), id {user.id}")
    if not password:
        print(f"to sign in to the web UI, set a password: codesearch users set-password {user.email}", file=sys.stderr)
    return 0


def set_password(args: argparse.Namespace) -> int:
    from codesearch.accounts import hash_password

    password = read_password(args, required=True)
    assert password is not None  # required: read_password returns one or exits
    with open_store(args) as store:
        user = find_user(store, args.email)
        store.set_user_password(user.id, hash_password(password))
        ended = store.delete_user_web_sessions(user.id)
        print(f"password set for {user.email}" + (f"; {plural(ended, 'web session')} signed out" if ended else ""))
    return 0


def list_users(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        for u in store.list_users():
            status = "deactivated" if u.suspended_at else "active"
            print(f"{u.id}\t{u.email}\t{u.role}\t{u.name}\t{u.kind}\t{status}")
    return 0


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", help="with create: display name")
    pw = parser.add_mutually_exclusive_group()
    pw.add_argument(
        "--password", action="store_true", help="with create: ask for a web sign-in password (set-password always asks)"
    )
    pw.add_argument(
        "--password-stdin",
        action="store_true",
        help="with create and set-password: read the password from the first line of stdin",
    )
    parser.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)


def register(sub: Subparsers) -> None:
    us = sub.add_parser("users", help="manage users (the first one becomes OWNER)")
    actions = add_actions(
        us,
        _options,
        {
            "create": "create a user (the first one becomes OWNER)",
            "list": "list the users: id, e-mail, role, name, kind (human or service), status",
            "set-password": "set a user's web sign-in password (signs their sessions out)",
            **MEMBER_ACTIONS,
        },
    )
    for name, func in (("create", create), ("set-password", set_password)):
        actions[name].add_argument("email", metavar="EMAIL", help="the user's e-mail")
        actions[name].set_defaults(func=func)
    actions["list"].set_defaults(func=list_users)
    register_member_actions(actions)
