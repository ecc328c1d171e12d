"""``codesearch config validate FILE`` and ``codesearch config schema``: check a config file
before a server loads it; print the JSON schema an editor can validate against.

``validate`` reports every problem at once (exit 2) or a one-line summary and the warnings
(exit 0); with ``--check-env`` it also resolves the ``{"env": …}`` tokens, as ``serve`` would.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from codesearch.plurals import plural

if TYPE_CHECKING:
    from codesearch.cli.common import Subparsers
    from codesearch.config.models import Config


def _env_problems(config: Config) -> list[str]:
    """The tokens and environment overrides whose environment variable is not set."""
    from codesearch.config.loader import resolve_token
    from codesearch.errors import ConfigError

    problems = []
    for name, conn in config.connections.items():
        if conn.token is not None and conn.token.env is not None:
            try:
                resolve_token(conn.token, connection=name)
            except ConfigError as e:
                problems += e.problems
    for name, o in config.environment_overrides.items():
        if o.type == "token" and o.value.env is not None and not os.environ.get(o.value.env, "").strip():
            problems.append(
                f'environmentOverrides.{name}.value: environment variable "{o.value.env}" is not set or empty'
            )
    return problems


def validate(args: argparse.Namespace) -> int:
    from codesearch.config import load_config
    from codesearch.errors import ConfigError

    try:
        config = load_config(args.file, source=args.file)
        problems = _env_problems(config) if args.check_env else []
        if problems:
            raise ConfigError(args.file, problems)
    except ConfigError as e:
        print(f"{e.source}: invalid ({plural(len(e.problems), 'problem')})", file=sys.stderr)
        for p in e.problems:
            print(f"  {p}", file=sys.stderr)
        return 2
    connections = plural(len(config.connections), "connection")
    print(f"{args.file}: valid ({connections}, {plural(len(config.contexts), 'context')})")
    for w in config.warnings:
        print(f"  warning: {w}")
    return 0


def schema(args: argparse.Namespace) -> int:
    from codesearch.config import schema_bytes, schema_files

    try:
        data = schema_bytes(args.file)
    except FileNotFoundError:
        print(f"codesearch: no schema file {args.file!r}; files: {', '.join(schema_files())}", file=sys.stderr)
        return 2
    sys.stdout.write(data.decode("utf-8"))
    return 0


def register(sub: Subparsers) -> None:
    c = sub.add_parser("config", help="check a config file or print the config schema")
    csub = c.add_subparsers(dest="config_command", required=True)
    cv = csub.add_parser("validate", help="validate a config file: every problem at once (exit 2), or a summary")
    cv.add_argument("file", metavar="FILE", help="the config file (JSON, comments allowed)")
    cv.add_argument(
        "--check-env",
        action="store_true",
        help='also check that the environment variables named by {"env": …} tokens are set',
    )
    cv.set_defaults(func=validate)
    cs = csub.add_parser("schema", help="print the JSON schema (index.json, or another file of it)")
    cs.add_argument(
        "--file", default="index.json", metavar="NAME", help="schema file, e.g. github.json (default index.json)"
    )
    cs.set_defaults(func=schema)
