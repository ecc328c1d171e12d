"""The `codesearch` command line: a dispatcher over one module per subcommand.

    codesearch index PATH... --out DIR [--branches GLOB,...] [--tags GLOB,...]
    codesearch search QUERY --index DIR [--regex] [--case-sensitive] [--context N]
                      [--matches N] [--json]
    codesearch batch QUERIES_FILE (--index DIR | --url URL | --ray) --out FILE.{parquet,csv,jsonl}
    codesearch serve [--config FILE] [--port N] [--host ADDR] [--data-dir DIR] …
    codesearch sync CONFIG --data-dir DIR [--connection NAME]…
    codesearch users create EMAIL | list | set-password EMAIL   [--data-dir DIR]
    codesearch users remove EMAIL | deactivate EMAIL | reactivate EMAIL   [--data-dir DIR]
    codesearch users service-account create NAME [--role R] | list   [--data-dir DIR]
    codesearch keys create | list | revoke KEY_ID  --user EMAIL [--data-dir DIR]
    codesearch config validate FILE [--check-env]
    codesearch config schema [--file NAME]
    codesearch backup FILE [--without-secret] [--data-dir DIR]
    codesearch restore FILE [--replace] [--data-dir DIR]

Each subcommand's module (`codesearch.cli.index`, `.search`, `.batch`, `.serve`, `.users` (with
`.members`), `.keys`, `.sync`, `.config`, `.backup` (backup and restore)) adds its parser
(``register``) and names its handler; ``main`` parses, calls the handler and turns the errors
every command can meet into exit codes. The search results' text is `codesearch.cli.printer`'s.
Handlers import the engine, the store or the service only when they run, so ``codesearch
--help`` stays fast.

Exit codes: 0 success (search: at least one match), 1 no match (or a failed sync or revoke, or
the last owner that ``users remove``/``deactivate`` refuse), 2 bad usage or input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from codesearch.cli import backup, batch, config, index, keys, search, serve, sync, users
from codesearch.errors import CodesearchError, InvalidEnvironmentVariable

#: the subcommands, in the order ``codesearch --help`` lists them
COMMANDS = (index, search, batch, serve, users, keys, sync, config, backup)


def build_parser() -> argparse.ArgumentParser:
    from codesearch import DISTRIBUTION, version

    p = argparse.ArgumentParser(prog="codesearch", description="Index and search code.")
    p.add_argument("--version", action="version", version=f"codesearch {version()} ({DISTRIBUTION})")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from codesearch import environment

    try:
        environment.configure_logging()  # SOURCEBOT_LOG_LEVEL
    except InvalidEnvironmentVariable as e:
        print(f"codesearch: {e}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    try:
        run: Callable[[argparse.Namespace], int] = args.func  # the command module's run
        return run(args)
    except CodesearchError as e:
        print(f"codesearch: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `codesearch search … | head`
        sys.stderr.close()
        return 0
