"""``codesearch sync CONFIG --data-dir DIR``: list, mirror and index every connection of a config
file, sequentially in this process (no Ray, no HTTP): what ``serve`` does in the background, once.

Exit 1 when a connection or a repository failed (each said on stderr), else 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, TextIO

from codesearch.errors import CodesearchError
from codesearch.progress_line import ProgressLine

if TYPE_CHECKING:
    from codesearch.cli.common import Subparsers


class RepoProgress:
    """Per-repository progress of a sync on stderr (`ProgressLine`): ``gh: [3/40] github.com/acme/api``."""

    def __init__(self, connection: str, stream: TextIO | None = None):
        self.connection = connection
        self.line = ProgressLine(stream)

    def __call__(self, repo: str, done: int, total: int) -> None:
        self.line.show(f"{self.connection}: [{done}/{total}] {repo}")

    def done(self) -> None:
        self.line.end(clear=True)


def run(args: argparse.Namespace) -> int:
    from codesearch import environment
    from codesearch.config import apply_environment_overrides, load_config
    from codesearch.git.mirror import MirrorStore
    from codesearch.hosts.github_app import attach_apps
    from codesearch.index.builder import IndexSettings
    from codesearch.sync import sync_connection

    config = load_config(args.config)
    apply_environment_overrides(config)
    for w in config.warnings:
        print(f"warning: {w}", file=sys.stderr)
    data_dir = os.path.abspath(args.data_dir)
    mirrors = MirrorStore(os.path.join(data_dir, "repos"))
    index_dir = os.path.join(data_dir, "index")
    settings = IndexSettings(
        max_file_size=int(config.settings.max_file_size),
        max_trigram_count=int(config.settings.max_trigram_count),
        max_revisions=environment.max_indexed_revisions(),
        always_index=environment.always_index_patterns(),
    )
    failed = 0
    for name, conn in config.connections.items():
        if args.connection and name not in args.connection:
            continue
        progress = RepoProgress(name)
        try:
            report = sync_connection(
                name,
                attach_apps(conn.raw, config.raw.get("apps")),
                mirrors=mirrors,
                index_dir=index_dir,
                index_settings=settings,
                progress=progress,
            )
        except CodesearchError as e:
            progress.done()
            print(f"{name}: failed: {e}", file=sys.stderr)
            failed += 1
            continue
        progress.done()
        for w in report.warnings + report.stats.warnings:
            print(f"{name}: warning: {w}", file=sys.stderr)
        for repo, reason in report.failed.items():
            print(f"{name}: {repo}: failed: {reason}", file=sys.stderr)
        failed += len(report.failed)
        print(
            f"{name}: {len(report.indexed)} of {len(report.repos)} repositories indexed "
            f"({report.stats.files:,} files, {report.stats.input_bytes / 1e6:,.1f} MB)"
        )
    print(f"index: {index_dir}")
    return 1 if failed else 0


def register(sub: Subparsers) -> None:
    y = sub.add_parser("sync", help="list, mirror and index the repositories of a config file's connections")
    y.add_argument("config", metavar="CONFIG", help="config file (Sourcebot v3 format)")
    y.add_argument("--data-dir", required=True, metavar="DIR", help="where mirrors (repos/) and the index (index/) go")
    y.add_argument("--connection", action="append", metavar="NAME", help="only this connection (repeatable)")
    y.set_defaults(func=run)
