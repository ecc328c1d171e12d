"""``codesearch batch QUERIES_FILE (--index DIR | --url URL | --ray) --out FILE``: many queries at
once, their matches written to one file (docs/batch.md).

QUERIES_FILE holds one query per line, or JSON Lines of ``POST /api/search`` bodies (the first
non-blank line decides); blank lines are not queries and there are no comments (``#include`` is a
query). ``query_id`` is a query's position among the file's queries, from 0. The output's format
is its extension's (``.parquet``, ``.csv``, ``.jsonl``), checked before any work. A bad query is
reported on stderr with its line number and left out; the others run. The search is
`codesearch.data`'s: a Ray Dataset, written block by block as it streams out; a progress bar on a
terminal, a summary on stderr at the end.

Exit codes: 0 every query ran, 1 some query was bad (reported; the others are written), 2 bad
usage (no such file, an output format we do not write, no query at all).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

from codesearch.plurals import plural

if TYPE_CHECKING:
    from codesearch.cli.common import Subparsers
    from codesearch.data.queries import BadQuery
    from codesearch.data.sources import Source

API_KEY_ENV = "CODESEARCH_API_KEY"


def run(args: argparse.Namespace) -> int:
    from codesearch.data import output
    from codesearch.data.queries import Defaults, queries_from_lines
    from codesearch.data.sources import HttpSource, RaySource, source_of

    output.check_writable(args.out)  # before anything else: a wrong --out costs nothing
    defaults = Defaults(args.matches, args.regex, args.case_sensitive, args.timeout)
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    source: Source
    if args.ray:
        source = RaySource(args.name_prefix, args.data_dir, api_key)
    elif args.url:
        source = HttpSource(args.url.rstrip("/"), api_key)
    else:
        source = source_of(args.index)
    try:
        with open(args.queries, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        print(f"codesearch: {args.queries}: {e}", file=sys.stderr)
        return 2
    specs, bad, total = queries_from_lines(lines, defaults, contexts_known=source.contexts_known)
    for b in bad:
        _report(args.queries, b)
    if not specs:
        print(
            f"codesearch: {args.queries}: no query to run ({plural(total, 'query', 'queries')} in the file)",
            file=sys.stderr,
        )
        return 2
    failed = len(bad) + _search(args, source, specs, total)
    return 1 if failed else 0


def _search(args: argparse.Namespace, source: Source, specs: list[Any], total: int) -> int:
    """Run the batch, write its rows to ``--out``; the number of queries that failed as they ran."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from codesearch.data import dataset, output, rows
    from codesearch.data.datasource import ProgressCounter
    from codesearch.data.queries import BadQuery

    started = time.monotonic()
    _start_ray(args)
    counter = ProgressCounter.remote()  # type: ignore[attr-defined]  # (a Ray actor class)
    ds = dataset(specs, source, per_file=args.per_file, with_errors=True, tasks=args.tasks, progress=counter)
    writer = output.RowWriter(args.out, rows.schema(args.per_file))
    bar = _Bar(counter, len(specs), sys.stderr)
    failed, matches = 0, 0
    files: set[tuple[str, str]] = set()
    lines = {s.query_id: s.line for s in specs}
    try:
        for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
            assert isinstance(batch, pa.Table)  # (batch_format="pyarrow")
            errors = batch.filter(pc.is_valid(batch[rows.ERROR_COLUMN]))
            for e in errors.to_pylist():
                failed += 1
                bar.clear()
                _report(args.queries, BadQuery(e["query_id"], e[rows.ERROR_COLUMN], lines[e["query_id"]]))
            good = batch.filter(pc.is_null(batch[rows.ERROR_COLUMN])).drop_columns([rows.ERROR_COLUMN])
            writer.write(good)
            matches += (pc.sum(good["match_count"]).as_py() or 0) if args.per_file else good.num_rows
            files.update(zip(good["repository"].to_pylist(), good["path"].to_pylist(), strict=True))
            bar.update(matches)
    except BaseException:
        writer.abort()
        raise
    finally:
        bar.stop()
    writer.close()
    seconds = time.monotonic() - started
    _summary(sys.stderr, total, len(specs) - failed, total - len(specs) + failed, matches, len(files), seconds, writer)
    return failed


def _start_ray(args: argparse.Namespace) -> None:
    """Attach to ``--address`` (with ``--ray``: the cluster the service runs on, ``auto`` unless
    told), else start Ray in this process, quietly: the command shows its own progress."""
    import logging

    import ray
    from ray.data import DataContext

    from codesearch.errors import CodesearchError

    if not ray.is_initialized():
        address = args.address or ("auto" if args.ray else None)
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        except ConnectionError as e:
            raise CodesearchError(f"no Ray cluster at {address!r} to run the batch on: {e}") from None
    context = DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    # (Ray Data says once that its bars are off: they are, for ours)
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)


class _Bar:
    """The progress bar: queries answered (from the read tasks' `ProgressCounter`) and matches
    written, redrawn 4 times a second on a terminal; nothing elsewhere."""

    def __init__(self, counter: Any, total: int, stream: TextIO):
        self.counter, self.total, self.stream = counter, total, stream
        self.tty = stream.isatty()
        self.matches = 0
        self.started = time.monotonic()
        self.width = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        if self.tty:
            threading.Thread(target=self._loop, daemon=True, name="codesearch-batch-progress").start()

    def update(self, matches: int) -> None:
        self.matches = matches

    def _loop(self) -> None:
        import ray

        while not self._stop.wait(0.25):
            try:
                done = int(ray.get(self.counter.value.remote(), timeout=5))
            except Exception:  # noqa: BLE001 - a late answer only delays the bar
                continue
            self._draw(done)

    def _draw(self, done: int) -> None:
        filled = int(30 * done / max(self.total, 1))
        line = (
            f"[{'#' * filled}{'.' * (30 - filled)}] {done:,}/{self.total:,} queries, "
            f"{self.matches:,} matches, {time.monotonic() - self.started:.1f} s"
        )
        with self._lock:
            if not self._stop.is_set():
                self.stream.write("\r" + line.ljust(self.width))
                self.stream.flush()
                self.width = len(line)

    def clear(self) -> None:
        with self._lock:
            if self.tty and self.width:
                self.stream.write("\r" + " " * self.width + "\r")
                self.width = 0

    def stop(self) -> None:
        self._stop.set()
        self.clear()


def _report(path: str, e: BadQuery) -> None:
    print(f"codesearch: {path}: {e}; skipped", file=sys.stderr)


def _summary(
    stream: TextIO, total: int, ran: int, failed: int, matches: int, files: int, seconds: float, writer: Any
) -> None:
    rows = [
        ("queries", f"{total:,}", f"{ran:,} searched, {failed:,} bad" if failed else f"{ran:,} searched"),
        ("matches", f"{matches:,}", ""),
        ("files", f"{files:,}", "distinct files with a match"),
        ("seconds", f"{seconds:.1f}", f"{ran / max(seconds, 1e-9):,.1f} queries/s"),
        ("rows", f"{writer.rows:,}", writer.path),
    ]
    width = max(len(v) for _, v, _ in rows)
    for name, value, note in rows:
        stream.write(f"  {name:<8} {value:>{width}}  {note}".rstrip() + "\n")


def register(sub: Subparsers) -> None:
    s = sub.add_parser(
        "batch",
        help="run many queries at once into a .parquet, .csv or .jsonl file",
        description="Run every query of QUERIES_FILE (one per line, or JSON Lines of POST /api/search bodies) "
        "and write one row per match (or per file) to --out.",
    )
    s.add_argument("queries", metavar="QUERIES_FILE", help="one query per line, or JSON Lines of search bodies")
    where = s.add_mutually_exclusive_group(required=True)
    where.add_argument("--index", metavar="DIR", help="an index directory (or a service data directory)")
    where.add_argument("--url", metavar="URL", help="a running service (http://host:3000)")
    where.add_argument("--ray", action="store_true", help="the searchers of the service on this Ray cluster")
    s.add_argument("--out", required=True, metavar="FILE", help="the output: FILE.parquet, FILE.csv or FILE.jsonl")
    s.add_argument("--api-key", metavar="KEY", help=f"the key to search with (--url, --ray; default ${API_KEY_ENV})")
    s.add_argument("--per-file", action="store_true", help="one row per matching file, with match_count")
    s.add_argument("--matches", type=int, default=10_000, metavar="N", help="cap per query (default 10000)")
    s.add_argument("--regex", action="store_true", help="bare terms are regular expressions (plain lines)")
    s.add_argument("--case-sensitive", action="store_true", help="match case exactly (plain lines)")
    s.add_argument("--timeout", type=float, metavar="S", help="seconds per query (default: no limit in-process)")
    s.add_argument("--tasks", type=int, metavar="N", help="read tasks (default: two per CPU of the cluster)")
    s.add_argument("--address", metavar="ADDR", help="the Ray cluster to run on (default: a local Ray; --ray: auto)")
    s.add_argument("--name-prefix", default="codesearch-searcher", help="the service's searchers (--ray)")
    s.add_argument("--data-dir", metavar="DIR", help="the service's data directory, if not published (--ray)")
    s.set_defaults(func=run)
