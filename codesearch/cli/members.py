"""``codesearch users remove|deactivate|reactivate EMAIL`` and ``codesearch users service-account
create NAME|list``: offboarding and service accounts from the server's shell.

The same store methods and rules as the settings pages and ``DELETE /api/ee/user``
(`codesearch.store.offboarding`): removing deletes the account with every credential;
deactivating ends every credential at once and keeps the account; reactivating lets the user
sign in again (their old keys stay revoked). The last active owner can be neither removed nor
deactivated: the command says so and exits 1, changing nothing. An unknown e-mail exits 1 with a
hint. Each change is in the audit log under the action the pages record (``member.remove``,
``member.deactivate``, ``member.reactivate``, ``service_account.create``, ``apikey.create``),
with the actor ``cli`` (`codesearch.cli.common.audit`).

``service-account create`` prints the account's first API key once on stdout (the note goes to
stderr, so ``KEY=$(codesearch users service-account create ci)`` holds the key), as ``keys
create`` does; more keys: ``codesearch keys create --user <its e-mail>``.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from codesearch.cli.common import DATA_DIR_HELP, audit, find_user, open_store

if TYPE_CHECKING:
    from codesearch.store import Store

#: The actions this module adds to ``codesearch users`` (name → help).
ACTIONS = {
    "remove": "remove a member: the account and every credential it has are deleted",
    "deactivate": "deactivate a member: every credential ends at once, the account is kept",
    "reactivate": "reactivate a deactivated member (they sign in again; old keys stay revoked)",
    "service-account": "service accounts (non-human members owning API keys): create NAME, list",
}


def _status(suspended: object) -> str:
    return "deactivated" if suspended else "active"


def remove(args: argparse.Namespace) -> int:
    from codesearch.store.offboarding import LastOwner

    with open_store(args) as store:
        user = find_user(store, args.email)
        try:
            gone = store.remove_user(user.id)
        except LastOwner as e:
            print(f"codesearch: {e}", file=sys.stderr)
            return 1
        audit(store, "member.remove", gone.email, userId=gone.id, kind=gone.kind)
        print(f"removed {gone.email}: the account, its sessions, API keys and OAuth grants are deleted")
    return 0


def _set_active(args: argparse.Namespace, *, suspend: bool) -> int:
    from codesearch.store.offboarding import LastOwner

    with open_store(args) as store:
        user = find_user(store, args.email)
        try:
            changed, did = store.set_user_suspended(user.id, suspend)
        except LastOwner as e:
            print(f"codesearch: {e}", file=sys.stderr)
            return 1
        if not did:
            print(f"{changed.email} is already {_status(changed.suspended_at)}")
            return 0
        audit(store, "member.deactivate" if suspend else "member.reactivate", changed.email)
        if suspend:
            print(f"deactivated {changed.email}: its sessions, API keys and OAuth grants are ended")
        else:
            print(f"reactivated {changed.email}: they may sign in again (their old API keys stay revoked)")
    return 0


def deactivate(args: argparse.Namespace) -> int:
    return _set_active(args, suspend=True)


def reactivate(args: argparse.Namespace) -> int:
    return _set_active(args, suspend=False)


def create_service_account(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        try:
            account = store.create_service_account(args.account_name, role=args.role)
        except ValueError as e:
            print(f"codesearch: NAME: {e}", file=sys.stderr)
            return 2
        audit(store, "service_account.create", account.name, userId=account.id, role=account.role)
        key_id, secret = store.create_api_key(account.id, args.key_name)
        audit(store, "apikey.create", str(key_id), owner=account.email, name=args.key_name)
        print(
            f"created service account {account.name} ({account.role}), id {account.id}, e-mail {account.email}; "
            f"API key {key_id} (shown once, keep it safe):",
            file=sys.stderr,
        )
        print(secret)
    return 0


def list_service_accounts(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        for a in store.list_service_accounts():
            print(_account_line(store, a.id, a.email, a.role, a.name, a.suspended_at))
    return 0


def _account_line(store: Store, uid: int, email: str, role: str, name: str, suspended: object) -> str:
    keys = len(store.list_api_keys(uid))
    return f"{uid}\t{email}\t{role}\t{name}\t{_status(suspended)}\t{keys} active key{'' if keys == 1 else 's'}"


def register_actions(actions: dict[str, argparse.ArgumentParser]) -> None:
    """Give the actions of `ACTIONS` (made by ``codesearch users``' parser) their arguments."""
    for name, func in (("remove", remove), ("deactivate", deactivate), ("reactivate", reactivate)):
        actions[name].add_argument("email", metavar="EMAIL", help="the member's e-mail")
        actions[name].set_defaults(func=func)
    sub = actions["service-account"].add_subparsers(dest="service_action", required=True)
    text = "create a service account and print its first API key once"
    create = sub.add_parser("create", help=text, description=text)
    create.add_argument("account_name", metavar="NAME", help="the account's name (1 to 100 characters)")
    create.add_argument("--role", choices=("MEMBER", "OWNER"), default="MEMBER", help="its role (default MEMBER)")
    create.add_argument("--key-name", default="cli", help="a name for its first API key (default cli)")
    create.set_defaults(func=create_service_account)
    listing = sub.add_parser("list", help="list the service accounts: id, e-mail, role, name, status, active keys")
    listing.set_defaults(func=list_service_accounts)
    for p in (create, listing):
        p.add_argument("--data-dir", metavar="DIR", default=argparse.SUPPRESS, help=DATA_DIR_HELP)
