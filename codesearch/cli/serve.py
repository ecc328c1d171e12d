"""``codesearch serve``: the whole service in the foreground (`codesearch.serving.launcher`).

Its options that describe the service map onto `ServiceArgs`, the arguments a Serve config gives
``serve deploy`` (`service_args`), so both make their spec the same way
(`codesearch.serving.spec.spec_from`); ``--host``, ``--port`` and ``--no-dashboard`` are about
this process and stay with it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from codesearch import defaults
from codesearch.cli.common import add_data_dir

if TYPE_CHECKING:
    from codesearch.cli.common import Subparsers
    from codesearch.serving.spec import ServiceArgs

#: The options of ``codesearch serve`` that are `ServiceArgs` fields (dest → field, the same name).
SERVICE_OPTIONS = ("config", "data_dir", "searchers", "searcher_copies", "replicas")


def option_name(dest: str) -> str:
    """How the command line spells the option of `dest` (``searcher_copies`` → ``--searcher-copies``)."""
    return "--" + dest.replace("_", "-")


def service_args(args: argparse.Namespace) -> ServiceArgs:
    """The `ServiceArgs` of a parsed ``codesearch serve`` (a bad value raises `ConfigError` naming
    its option, e.g. ``--searchers``)."""
    from codesearch.serving.spec import ServiceArgs

    return ServiceArgs.model_validate(
        {dest: getattr(args, dest) for dest in SERVICE_OPTIONS},
        context={"source": "codesearch serve", "names": {dest: option_name(dest) for dest in SERVICE_OPTIONS}},
    )


def run(args: argparse.Namespace) -> int:
    from codesearch.serving.launcher import run as serve

    return serve(service_args(args), port=args.port, host=args.host, dashboard=not args.no_dashboard)


def register(sub: Subparsers) -> None:
    sv = sub.add_parser("serve", help="run the service: sync, index, serve the HTTP API (foreground)")
    sv.add_argument("--config", metavar="FILE", help="config file (default: $CONFIG_PATH, else an offline demo)")
    sv.add_argument("--port", type=int, default=defaults.PORT, help=f"HTTP port (default {defaults.PORT})")
    sv.add_argument(
        "--host", default=defaults.HOST, help=f"address to listen on (default {defaults.HOST}; 0.0.0.0 for all)"
    )
    add_data_dir(sv)
    sv.add_argument(
        "--searchers",
        type=int,
        default=defaults.SEARCHERS,
        help=f"shard searchers: the index is split over this many partitions (default {defaults.SEARCHERS})",
    )
    sv.add_argument(
        "--searcher-copies",
        type=int,
        default=defaults.SEARCHER_COPIES,
        help=f"copies of every partition; each search goes to one copy (default {defaults.SEARCHER_COPIES})",
    )
    sv.add_argument(
        "--replicas",
        type=int,
        default=defaults.REPLICAS,
        help=f"Serve replicas of the HTTP API (default {defaults.REPLICAS})",
    )
    sv.add_argument(
        "--no-dashboard",
        action="store_true",
        help="start Ray without its dashboard (by default the Ray instance codesearch starts has one)",
    )
    sv.set_defaults(func=run)
