"""``codesearch search QUERY --index DIR``: search an index directory in this process.

Prints grep-style lines (`codesearch.cli.printer`) or, with ``--json``, the ``POST /api/search``
response. Exit 0 when something matched, 1 when nothing did (like grep), 2 for a bad query.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from codesearch.cli import printer

if TYPE_CHECKING:
    from codesearch.cli.common import Subparsers


def run(args: argparse.Namespace) -> int:
    from codesearch.search.engine import Searcher
    from codesearch.search.options import SearchOptions

    if args.matches < 1 or args.context < 0:
        print("codesearch: --matches must be at least 1 and --context at least 0", file=sys.stderr)
        return 2
    searcher = Searcher(args.index)
    for e in searcher.errors:
        print(f"warning: skipping shard: {e}", file=sys.stderr)
    opts = SearchOptions(
        matches=args.matches,
        context_lines=args.context,
        whole=args.whole,
        is_regex=args.regex,
        case_sensitive=args.case_sensitive,
    )
    resp = searcher.search(args.query, options=opts)
    if args.json:
        printer.print_json(resp)
    else:
        printer.print_text(resp, color=printer.use_color(sys.stdout))
    return 0 if resp["files"] else 1


def register(sub: Subparsers) -> None:
    s = sub.add_parser("search", help="search an index")
    s.add_argument("query", help="query (docs/query-language.md)")
    s.add_argument("--index", required=True, metavar="DIR", help="index directory")
    s.add_argument("--regex", action="store_true", help="bare terms are regular expressions")
    s.add_argument("--case-sensitive", action="store_true", help="match case exactly")
    s.add_argument("--context", type=int, default=0, metavar="N", help="lines of context around matches")
    s.add_argument("--matches", type=int, default=100, metavar="N", help="cap on match ranges returned (default 100)")
    s.add_argument("--whole", action="store_true", help="include whole file contents (with --json)")
    s.add_argument("--json", action="store_true", help="print the POST /api/search JSON response")
    s.set_defaults(func=run)
