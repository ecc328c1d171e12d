"""``codesearch serve``: the whole service in the foreground (`codesearch.service.launcher`)."""

from __future__ import annotations

from codesearch.cli.common import add_data_dir


def run(args) -> int:
    from codesearch.service.launcher import main_serve

    return main_serve(args)


def register(sub) -> None:
    sv = sub.add_parser("serve", help="run the service: sync, index, serve the HTTP API (foreground)")
    sv.add_argument("--config", metavar="FILE", help="config file (default: $CONFIG_PATH, else an offline demo)")
    sv.add_argument("--port", type=int, default=3000, help="HTTP port (default 3000)")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 for all)")
    add_data_dir(sv)
    sv.add_argument("--searchers", type=int, default=2,
                    help="shard searchers: the index is split over this many partitions (default 2)")
    sv.add_argument("--searcher-copies", type=int, default=1,
                    help="copies of every partition; each search goes to one copy (default 1)")
    sv.add_argument("--replicas", type=int, default=1, help="Serve replicas of the HTTP API (default 1)")
    sv.add_argument("--no-dashboard", action="store_true",
                    help="start Ray without its dashboard (by default the Ray instance codesearch starts has one)")
    sv.set_defaults(func=run)
