"""``codesearch index PATH... --out DIR``: build shards from local directories or git repositories.

Each PATH is one repository: a git repository is indexed at HEAD (plus the branches and tags
matching ``--branches``/``--tags``) from its object store, any other directory as plain files.
The summary (files, bytes, shards, speed, index size) goes to stderr, so stdout stays empty.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, TextIO

from codesearch import defaults
from codesearch.plurals import noun, plural

if TYPE_CHECKING:
    from codesearch.cli.common import Subparsers


class FileProgress:
    """A one-line progress report on stderr, refreshed at most 5 times a second (TTY only)."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr  # the stream of now, not of import time
        self.enabled = self.stream.isatty()
        self.start = time.monotonic()
        self.last = 0.0
        self.files = 0
        self.bytes = 0

    def __call__(self, size: int) -> None:
        self.files += 1
        self.bytes += size
        now = time.monotonic()
        if self.enabled and now - self.last > 0.2:
            self.last = now
            rate = self.bytes / max(now - self.start, 1e-9) / 1e6
            self.stream.write(f"\r  {self.files:,} files, {self.bytes / 1e6:,.1f} MB, {rate:,.1f} MB/s ")
            self.stream.flush()

    def done(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 60 + "\r")


def revision_cap(text: str) -> int:
    """``--max-revisions``: a whole number from 1 to ``MAX_INDEXED_REVISIONS_LIMIT``."""
    top = defaults.MAX_INDEXED_REVISIONS_LIMIT
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (1 to {top})") from None
    if not 1 <= value <= top:
        raise argparse.ArgumentTypeError(f"{value} is out of range: 1 to {top} revisions per repository")
    return value


def split_globs(value: str | None) -> list[str]:
    """``"main, release/*"`` → ``["main", "release/*"]`` (None or blanks: none)."""
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def run(args: argparse.Namespace) -> int:
    from codesearch import environment
    from codesearch.index.builder import IndexSettings
    from codesearch.index.manifest import current_shards
    from codesearch.index.parallel import default_jobs
    from codesearch.index.paths import index_paths

    settings = IndexSettings(
        always_index=environment.always_index_patterns(), max_revisions=environment.max_indexed_revisions()
    )
    if args.max_file_size:
        settings.max_file_size = args.max_file_size
    if args.max_revisions:
        settings.max_revisions = args.max_revisions
    if args.no_ctags:
        settings.ctags = False
    progress = FileProgress()
    stats = index_paths(
        args.paths,
        args.out,
        settings,
        branches=split_globs(args.branches),
        tags=split_globs(args.tags),
        progress=progress,
        compact=not args.no_compact,
        jobs=args.jobs or default_jobs(),
    )
    progress.done()
    for w in stats.warnings:
        print(f"warning: {w}", file=sys.stderr)
    mb = stats.input_bytes / 1e6
    print(
        f"indexed {stats.files:,} files ({mb:,.1f} MB, {stats.skipped:,} skipped) from {len(args.paths)} "
        f"{noun(len(args.paths), 'repository', 'repositories')} into {plural(len(current_shards(args.out)), 'shard')} "
        f"in {stats.seconds:.1f}s "
        f"({mb / max(stats.seconds, 1e-9):,.1f} MB/s); index {stats.total_bytes / 1e6:,.1f} MB, postings "
        f"{stats.postings_bytes / max(stats.input_bytes, 1):.2f}x input",
        file=sys.stderr,
    )
    return 0


def register(sub: Subparsers) -> None:
    ix = sub.add_parser("index", help="index directories or git repositories into shards")
    ix.add_argument("paths", nargs="+", metavar="PATH", help="a git repository or a directory (one repository each)")
    ix.add_argument("--out", required=True, metavar="DIR", help="index directory (created if missing)")
    ix.add_argument("--branches", metavar="GLOB,...", help="also index branches matching these globs")
    ix.add_argument("--tags", metavar="GLOB,...", help="also index tags matching these globs")
    ix.add_argument(
        "--max-file-size", type=int, metavar="BYTES", help=f"skip larger files (default {defaults.MAX_FILE_SIZE})"
    )
    ix.add_argument(
        "--max-revisions",
        type=revision_cap,
        metavar="N",
        help="index at most N revisions per repository (default: CODESEARCH_MAX_INDEXED_REVISIONS, else "
        f"{defaults.MAX_INDEXED_REVISIONS}; at most {defaults.MAX_INDEXED_REVISIONS_LIMIT})",
    )
    ix.add_argument("--no-ctags", action="store_true", help="do not extract symbols")
    ix.add_argument("--jobs", "-j", type=int, metavar="N", help="processes to build with (default: every core)")
    ix.add_argument(
        "--no-compact",
        action="store_true",
        help="keep one set of shards per repository (by default small shards are merged into compound ones)",
    )
    ix.set_defaults(func=run)
