"""What several subcommands share: the ``--data-dir`` option, the store it opens, the user an
``--user``/EMAIL names, the audit trail of the operator's changes, and options that a group of
nested subcommands accepts before or after the action (``keys --user X list`` and ``keys list
--user X`` both work)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:  # for the annotations only: the store loads when a command opens it
    from codesearch.store import Store
    from codesearch.store.models import User

    # What each command module's `register` adds its parser to (argparse's class is generic in typeshed only).
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

DATA_DIR_HELP = "data directory (default: $DATA_CACHE_DIR, $DATA_DIR/.codesearch or ~/.codesearch)"


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)


def add_actions(
    parser: argparse.ArgumentParser,
    add_options: Callable[[argparse.ArgumentParser], None],
    actions: dict[str, str],
    **defaults: object,
) -> dict[str, argparse.ArgumentParser]:
    """Nested subcommands (``dest="action"``) of `parser`, one per name in `actions` (name → help),
    each accepting the options `add_options` adds, as `parser` itself does. An option given
    before the action keeps its value unless given again after it: the actions' copies have no
    default (`argparse.SUPPRESS`), so they never overwrite it. `add_options` therefore sets no
    defaults itself; `defaults` (dest → value) are `parser`'s."""
    add_options(parser)
    parser.set_defaults(**defaults)
    template = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    add_options(template)
    sub = parser.add_subparsers(dest="action", required=True)
    return {
        name: sub.add_parser(name, help=text, description=text, parents=[template]) for name, text in actions.items()
    }


def open_store(args: argparse.Namespace) -> Store:
    """The store of ``--data-dir`` (else the default data directory, as ``serve`` finds it). A bad
    ``SOURCEBOT_EE_AUDIT_LOGGING_ENABLED`` is refused here, before any change that `audit` records."""
    from codesearch.environment import audit_logging_enabled
    from codesearch.serving.launcher import default_data_dir
    from codesearch.store import Store

    audit_logging_enabled()

    return Store.open(os.path.abspath(args.data_dir or default_data_dir()))


def find_user(store: Store, email: str) -> User:
    """The user with this e-mail; exits with a hint when there is none."""
    user = store.find_user_by_email(email)
    if user is None:
        raise SystemExit(f"codesearch: no user {email!r} (create one with: codesearch users create {email})")
    return user


def audit(store: Store, action: str, target: str, **details: object) -> None:
    """The operator's account changes, in the audit log (actor ``cli``; never the key or password),
    written at once: nothing when ``SOURCEBOT_EE_AUDIT_LOGGING_ENABLED=false``, as in the service."""
    from codesearch.environment import audit_logging_enabled

    if audit_logging_enabled():
        store.add_audit_events([{"actor": "cli", "action": action, "target": target, "details": details}])
