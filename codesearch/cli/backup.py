"""``codesearch backup FILE`` and ``codesearch restore FILE``: the state database in one file.

``backup`` reads the state database of the data directory (``DATABASE_URL`` when set, as
``serve`` does) in one snapshot while the service goes on, and writes it with the server secret
file (unless ``--without-secret``) to a new file, mode 0600: `codesearch.store.backup` says what
is and is not in it. It never migrates or changes the database, except for one audit record of
the backup written after it.

``restore`` loads such a file into an empty database (``--replace`` drops the one there first;
stop the service before), migrating it forward when it was made by an older codesearch, and puts
its server secret in the data directory. Mirrors and index are rebuilt by the service from the
restored connections when it starts. A newer, rotten or cut file is refused and nothing changes.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from codesearch.cli.common import DATA_DIR_HELP

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from codesearch.cli.common import Subparsers
    from codesearch.store.backup import BackupSummary


def _data_dir(args: argparse.Namespace) -> str:
    from codesearch.serving.launcher import default_data_dir

    return os.path.abspath(args.data_dir or default_data_dir())


def _engine(data_dir: str) -> Engine:
    from codesearch.store.backup import database_url
    from codesearch.store.engine import is_memory_sqlite, make_engine
    from codesearch.store.files import private_dir, tighten_sqlite

    private_dir(data_dir)
    engine = make_engine(database_url(data_dir))
    if engine.url.get_backend_name() == "sqlite" and engine.url.database and not is_memory_sqlite(engine.url):
        tighten_sqlite(engine.url.database)
    return engine


def _rows(summary: BackupSummary) -> str:
    return f"{summary.total_rows} rows in {len(summary.rows)} tables, schema version {summary.schema_version}"


def backup(args: argparse.Namespace) -> int:
    from codesearch.cli.common import audit
    from codesearch.store import Store
    from codesearch.store.backup import backup_to_file, secret_entry
    from codesearch.store.engine import describe_database

    data_dir = _data_dir(args)
    engine = _engine(data_dir)
    try:
        secret = secret_entry(data_dir, include=not args.without_secret)
        summary = backup_to_file(engine, args.file, secret=secret)
        database = describe_database(engine.url)
    finally:
        engine.dispose()
    with Store.open(data_dir) as store:
        audit(store, "store.backup", os.path.basename(args.file), rows=summary.total_rows, secret=summary.secret)
    size = os.path.getsize(args.file)
    print(f"backed up {database}: {_rows(summary)} to {args.file} ({size} bytes)")
    notes = {
        "file": "the server secret is in the backup: keep the file as safe as the data directory",
        "environment": "the server secret comes from the environment and is not in the backup: keep it too",
        "left out": "the server secret is not in the backup (--without-secret): keep the data directory's .secret",
    }
    if summary.secret in notes:
        print(f"note: {notes[summary.secret]}", file=sys.stderr)
    return 0


def restore(args: argparse.Namespace) -> int:
    from codesearch.cli.common import audit
    from codesearch.store import Store
    from codesearch.store.engine import describe_database
    from codesearch.store.restore import read_header, restore_from_file, restore_secret

    data_dir = _data_dir(args)
    header = read_header(args.file)
    restore_secret(data_dir, header, replace=args.replace, check_only=True)
    engine = _engine(data_dir)
    try:
        summary = restore_from_file(engine, args.file, replace=args.replace)
        database = describe_database(engine.url)
    finally:
        engine.dispose()
    secret_note = restore_secret(data_dir, header, replace=args.replace)
    with Store.open(data_dir) as store:
        audit(store, "store.restore", os.path.basename(args.file), rows=summary.total_rows, replace=args.replace)
        now = store.schema_version()
    moved = f", migrated to {now}" if now != summary.schema_version else ""
    print(f"restored {database}: {_rows(summary)}{moved}")
    print(f"note: {secret_note}", file=sys.stderr)
    print("note: mirrors and index are rebuilt from the connections when the service starts", file=sys.stderr)
    return 0


def register(sub: Subparsers) -> None:
    b = sub.add_parser(
        "backup",
        help="back up the state database (while the service runs)",
        description="Write the state database (and the server secret) to a new file, consistently, while the "
        "service runs. Mirrors and index are not in it: they are rebuilt after a restore.",
    )
    b.add_argument("file", metavar="FILE", help="the backup file to create (refused when it exists)")
    b.add_argument("--without-secret", action="store_true", help="leave the server secret file out of the backup")
    b.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    b.set_defaults(func=backup)
    r = sub.add_parser(
        "restore",
        help="restore a backup into an empty state database",
        description="Load a backup into an empty state database (migrating it forward if it is older), with its "
        "server secret. Stop the service first.",
    )
    r.add_argument("file", metavar="FILE", help="the backup file")
    r.add_argument(
        "--replace", action="store_true", help="drop the database (and server secret) there first: all of it is lost"
    )
    r.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    r.set_defaults(func=restore)
