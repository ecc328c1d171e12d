"""``codesearch keys create|list|revoke --user EMAIL``: API keys, from the server's shell.

``create`` prints the secret once on stdout (the note goes to stderr, so ``$(codesearch keys
create …)`` is the key); the store keeps only its hash. Creating and revoking are audited.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from codesearch.cli.common import (
    DATA_DIR_HELP,
    add_actions,
    audit,
    find_user,
    open_store,
)

if TYPE_CHECKING:
    from codesearch.cli.common import Subparsers
    from codesearch.store import Store
    from codesearch.store.models import User


def create(store: Store, user: User, args: argparse.Namespace) -> int:
    key_id, secret = store.create_api_key(user.id, args.name)
    audit(store, "apikey.create", str(key_id), user=user.email, name=args.name)
    print(f"API key {key_id} for {user.email} (shown once, keep it safe):", file=sys.stderr)
    print(secret)
    return 0


def list_keys(store: Store, user: User, args: argparse.Namespace) -> int:
    for k in store.list_api_keys(user.id, include_revoked=args.all):
        used = k.last_used_at.strftime("%Y-%m-%d %H:%M") if k.last_used_at else "never"
        revoked = "\trevoked" if k.revoked_at else ""
        print(f"{k.id}\t{k.name}\tcreated {k.created_at:%Y-%m-%d %H:%M}\tlast used {used}{revoked}")
    return 0


def revoke(store: Store, user: User, args: argparse.Namespace) -> int:
    if not store.revoke_api_key(user.id, args.key_id):
        print(f"codesearch: {user.email} has no active key {args.key_id}", file=sys.stderr)
        return 1
    audit(store, "apikey.revoke", str(args.key_id), user=user.email)
    print(f"revoked key {args.key_id}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Every action is about one user's keys: open the store, find the user, act."""
    if not args.user:
        print(f"codesearch: keys {args.action} needs --user EMAIL (the key owner)", file=sys.stderr)
        return 2
    with open_store(args) as store:
        act: Callable[[Store, User, argparse.Namespace], int] = args.act  # create, list_keys or revoke
        return act(store, find_user(store, args.user), args)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", metavar="EMAIL", help="the key owner (required)")
    parser.add_argument("--name", help="with create: a name for the key (default cli)")
    parser.add_argument("--all", action="store_true", help="with list: include revoked keys")
    parser.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)


def register(sub: Subparsers) -> None:
    ks = sub.add_parser("keys", help="manage API keys")
    actions = add_actions(
        ks,
        _options,
        {"create": "create an API key (printed once)", "list": "list a user's API keys", "revoke": "revoke an API key"},
        name="cli",
    )
    actions["revoke"].add_argument("key_id", type=int, metavar="KEY_ID", help="the key's id (from list)")
    for name, act in (("create", create), ("list", list_keys), ("revoke", revoke)):
        actions[name].set_defaults(func=run, act=act)
