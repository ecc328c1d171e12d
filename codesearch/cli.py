"""The `codesearch` command line.

    codesearch index PATH... --out DIR [--branches GLOB,...] [--tags GLOB,...]
    codesearch search QUERY --index DIR [--regex] [--case-sensitive] [--context N]
                      [--matches N] [--json]
    codesearch config validate FILE [--check-env]
    codesearch config schema [--file NAME]

`index` treats each PATH as one repository: a git repository is indexed at HEAD (plus the
branches and tags matching the globs) from its object store, any other directory as plain
files. `search` prints grep-like lines (``repo/path:line:text``, coloured on a terminal) or,
with ``--json``, exactly the ``POST /api/search`` response.

Exit codes: 0 success (search: at least one match), 1 no match, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from codesearch.errors import CodesearchError
from codesearch.plurals import noun, plural
from codesearch.progress_line import ProgressLine


class _Progress:
    """A one-line progress report on stderr, refreshed at most 5 times a second (TTY only)."""

    def __init__(self, stream=None):
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


class _RepoProgress:
    """Per-repository progress of a sync on stderr (`ProgressLine`): ``gh: [3/40] github.com/acme/api``."""

    def __init__(self, connection: str, stream=None):
        self.connection = connection
        self.line = ProgressLine(stream)

    def __call__(self, repo: str, done: int, total: int) -> None:
        self.line.show(f"{self.connection}: [{done}/{total}] {repo}")

    def done(self) -> None:
        self.line.end(clear=True)


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def cmd_index(args) -> int:
    from codesearch.index.builder import IndexSettings, index_paths
    from codesearch.index.manifest import current_shards
    from codesearch.index.parallel import default_jobs

    settings = IndexSettings()
    if args.max_file_size:
        settings.max_file_size = args.max_file_size
    if args.no_ctags:
        settings.ctags = False
    progress = _Progress()
    stats = index_paths(args.paths, args.out, settings, branches=_split(args.branches), tags=_split(args.tags), progress=progress,
                        compact=not args.no_compact, jobs=args.jobs or default_jobs())
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


_C = {"path": "\033[35m", "line": "\033[32m", "match": "\033[1;31m", "sep": "\033[36m", "off": "\033[0m"}


def _print_text(resp: dict, color: bool, out=None) -> None:
    out = out or sys.stdout
    c = _C if color else {k: "" for k in _C}
    for f in resp["files"]:
        where = f"{f['repository']}/{f['fileName']['text']}"
        if not f["chunks"]:
            out.write(f"{c['path']}{where}{c['off']}\n")
            continue
        for ch in f["chunks"]:
            first = ch["contentStart"]["lineNumber"]
            base = ch["contentStart"]["byteOffset"]
            raw = ch["content"].encode("utf-8")
            lines = raw.split(b"\n")
            spans: dict[int, list[tuple[int, int]]] = {}
            offset = 0
            starts = []
            for ln in lines:
                starts.append(offset)
                offset += len(ln) + 1
            for r in ch["matchRanges"]:
                a, b = r["start"]["byteOffset"] - base, r["end"]["byteOffset"] - base
                for i, s in enumerate(starts):
                    e = s + len(lines[i])
                    if a <= e and b >= s and (a < e or a == s):
                        spans.setdefault(i, []).append((max(a, s) - s, min(b, e) - s))
            for i, ln in enumerate(lines):
                sep = ":" if i in spans else "-"
                text = ln
                if color and i in spans:
                    parts, pos = [], 0
                    for a, b in sorted(spans[i]):
                        if a < pos:
                            continue
                        parts += [ln[pos:a], c["match"].encode(), ln[a:b], c["off"].encode()]
                        pos = b
                    text = b"".join(parts) + ln[pos:]
                out.write(f"{c['path']}{where}{c['off']}{c['sep']}{sep}{c['off']}{c['line']}{first + i}{c['off']}"
                          f"{c['sep']}{sep}{c['off']}{text.decode('utf-8', 'replace')}\n")
    if not resp["isSearchExhaustive"]:
        s = resp["stats"]
        print(f"(showing {s['actualMatchCount']} of {s['totalMatchCount']}+ matches; raise --matches for more)", file=sys.stderr)


def cmd_search(args) -> int:
    from codesearch.search.engine import Searcher
    from codesearch.search.options import SearchOptions

    searcher = Searcher(args.index)
    for e in searcher.errors:
        print(f"warning: skipping shard: {e}", file=sys.stderr)
    opts = SearchOptions(matches=args.matches, context_lines=args.context, whole=args.whole,
                         is_regex=args.regex, case_sensitive=args.case_sensitive)
    resp = searcher.search(args.query, options=opts)
    if args.json:
        json.dump(resp, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        _print_text(resp, color=sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
    return 0 if resp["files"] else 1


def cmd_config_validate(args) -> int:
    from codesearch.config import load_config
    from codesearch.config.loader import resolve_token
    from codesearch.errors import ConfigError

    try:
        config = load_config(args.file, source=args.file)
        problems = []
        if args.check_env:
            for name, conn in config.connections.items():
                if conn.token is not None and conn.token.env is not None:
                    try:
                        resolve_token(conn.token, connection=name)
                    except ConfigError as e:
                        problems += e.problems
            for name, o in config.environment_overrides.items():
                if o.type == "token" and o.value.env is not None and not os.environ.get(o.value.env, "").strip():
                    problems.append(f'environmentOverrides.{name}.value: environment variable "{o.value.env}" is not set or empty')
        if problems:
            raise ConfigError(args.file, problems)
    except ConfigError as e:
        print(f"{e.source}: invalid ({len(e.problems)} problem{'s' if len(e.problems) != 1 else ''})", file=sys.stderr)
        for p in e.problems:
            print(f"  {p}", file=sys.stderr)
        return 2
    n, m = len(config.connections), len(config.contexts)
    print(f"{args.file}: valid ({n} connection{'s' if n != 1 else ''}, {m} context{'s' if m != 1 else ''})")
    for w in config.warnings:
        print(f"  warning: {w}")
    return 0


def cmd_config_schema(args) -> int:
    from codesearch.config import schema_bytes, schema_files

    try:
        data = schema_bytes(args.file)
    except FileNotFoundError:
        print(f"codesearch: no schema file {args.file!r}; files: {', '.join(schema_files())}", file=sys.stderr)
        return 2
    sys.stdout.write(data.decode("utf-8"))
    return 0


def cmd_sync(args) -> int:
    """Sync every connection of a config: list, mirror, index (sequentially, in this process)."""
    from codesearch.config import apply_environment_overrides, load_config
    from codesearch.git.mirror import MirrorStore
    from codesearch.index.builder import IndexSettings
    from codesearch.sync import sync_connection

    config = load_config(args.config)
    apply_environment_overrides(config)
    for w in config.warnings:
        print(f"warning: {w}", file=sys.stderr)
    data_dir = os.path.abspath(args.data_dir)
    mirrors = MirrorStore(os.path.join(data_dir, "repos"))
    index_dir = os.path.join(data_dir, "index")
    settings = IndexSettings(max_file_size=int(config.settings.max_file_size), max_trigram_count=int(config.settings.max_trigram_count))
    failed = 0
    for name, conn in config.connections.items():
        if args.connection and name not in args.connection:
            continue
        progress = _RepoProgress(name)
        try:
            report = sync_connection(name, conn.raw, mirrors=mirrors, index_dir=index_dir, index_settings=settings,
                                     progress=progress)
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
        print(f"{name}: {len(report.indexed)} of {len(report.repos)} repositories indexed "
              f"({report.stats.files:,} files, {report.stats.input_bytes / 1e6:,.1f} MB)")
    print(f"index: {index_dir}")
    return 1 if failed else 0


def _store(args):
    from codesearch.service.launcher import default_data_dir
    from codesearch.store import Store

    return Store.open(os.path.abspath(args.data_dir or default_data_dir()))


def _user(store, email: str):
    user = store.find_user_by_email(email)
    if user is None:
        raise SystemExit(f"codesearch: no user {email!r} (create one with: codesearch users create {email})")
    return user


def _read_password(args, *, required: bool) -> str | None:
    """The new password: one line of stdin with --password-stdin, else (when `required` or
    --password) typed twice at a prompt. Never from the command line."""
    from codesearch.web.sessions import password_problem

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif required or args.password:
        import getpass

        if not sys.stdin.isatty():
            raise SystemExit("codesearch: no terminal to ask for the password; pipe it with --password-stdin")
        password = getpass.getpass("New password: ")
        if getpass.getpass("Again: ") != password:
            raise SystemExit("codesearch: the passwords do not match")
    else:
        return None
    problem = password_problem(password)
    if problem:
        raise SystemExit(f"codesearch: {problem}")
    return password


def cmd_users(args) -> int:
    from codesearch.web.sessions import hash_password

    if args.action in ("create", "set-password"):
        password = _read_password(args, required=args.action == "set-password")
    with _store(args) as store:
        if args.action == "create":
            user = store.create_user(args.email, args.name or "",
                                     password_hash=hash_password(password) if password else None)
            _audit(store, "user.create", user.email, role=user.role)
            print(f"created user {user.email} ({user.role}), id {user.id}")
            if not password:
                print(f"to sign in to the web UI, set a password: codesearch users set-password {user.email}",
                      file=sys.stderr)
        elif args.action == "set-password":
            user = _user(store, args.email)
            store.set_user_password(user.id, hash_password(password))
            ended = store.delete_user_web_sessions(user.id)
            print(f"password set for {user.email}" + (f"; {plural(ended, 'web session')} signed out" if ended else ""))
        else:
            for u in store.list_users():
                print(f"{u.id}\t{u.email}\t{u.role}\t{u.name}")
    return 0


def _audit(store, action: str, target: str, **details) -> None:
    """The operator's account changes, in the audit log (actor ``cli``; never the key or password)."""
    store.add_audit_events([{"actor": "cli", "action": action, "target": target, "details": details}])


def cmd_keys(args) -> int:
    with _store(args) as store:
        user = _user(store, args.user)
        if args.action == "create":
            key_id, secret = store.create_api_key(user.id, args.name)
            _audit(store, "apikey.create", str(key_id), user=user.email, name=args.name)
            print(f"API key {key_id} for {user.email} (shown once, keep it safe):", file=sys.stderr)
            print(secret)
        elif args.action == "list":
            for k in store.list_api_keys(user.id, include_revoked=args.all):
                used = k.last_used_at.strftime("%Y-%m-%d %H:%M") if k.last_used_at else "never"
                revoked = "\trevoked" if k.revoked_at else ""
                print(f"{k.id}\t{k.name}\tcreated {k.created_at:%Y-%m-%d %H:%M}\tlast used {used}{revoked}")
        else:
            if not store.revoke_api_key(user.id, args.key_id):
                print(f"codesearch: {user.email} has no active key {args.key_id}", file=sys.stderr)
                return 1
            _audit(store, "apikey.revoke", str(args.key_id), user=user.email)
            print(f"revoked key {args.key_id}")
    return 0


def cmd_serve(args) -> int:
    from codesearch.service.launcher import main_serve

    return main_serve(args)


def build_parser() -> argparse.ArgumentParser:
    from codesearch import DISTRIBUTION, version

    p = argparse.ArgumentParser(prog="codesearch", description="Index and search code.")
    p.add_argument("--version", action="version", version=f"codesearch {version()} ({DISTRIBUTION})")
    sub = p.add_subparsers(dest="command", required=True)

    ix = sub.add_parser("index", help="index directories or git repositories into shards")
    ix.add_argument("paths", nargs="+", metavar="PATH", help="a git repository or a directory (one repository each)")
    ix.add_argument("--out", required=True, metavar="DIR", help="index directory (created if missing)")
    ix.add_argument("--branches", metavar="GLOB,...", help="also index branches matching these globs")
    ix.add_argument("--tags", metavar="GLOB,...", help="also index tags matching these globs")
    ix.add_argument("--max-file-size", type=int, metavar="BYTES", help="skip larger files (default 2097152)")
    ix.add_argument("--no-ctags", action="store_true", help="do not extract symbols")
    ix.add_argument("--jobs", "-j", type=int, metavar="N", help="processes to build with (default: every core)")
    ix.add_argument("--no-compact", action="store_true",
                    help="keep one set of shards per repository (by default small shards are merged into compound ones)")
    ix.set_defaults(func=cmd_index)

    s = sub.add_parser("search", help="search an index")
    s.add_argument("query", help="query (see README: query language)")
    s.add_argument("--index", required=True, metavar="DIR", help="index directory")
    s.add_argument("--regex", action="store_true", help="bare terms are regular expressions")
    s.add_argument("--case-sensitive", action="store_true", help="match case exactly")
    s.add_argument("--context", type=int, default=0, metavar="N", help="lines of context around matches")
    s.add_argument("--matches", type=int, default=100, metavar="N", help="cap on match ranges returned (default 100)")
    s.add_argument("--whole", action="store_true", help="include whole file contents (with --json)")
    s.add_argument("--json", action="store_true", help="print the POST /api/search JSON response")
    s.set_defaults(func=cmd_search)

    sv = sub.add_parser("serve", help="run the service: sync, index, serve the HTTP API (foreground)")
    sv.add_argument("--config", metavar="FILE", help="config file (default: $CONFIG_PATH, else an offline demo)")
    sv.add_argument("--port", type=int, default=3000, help="HTTP port (default 3000)")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 for all)")
    sv.add_argument("--data-dir", metavar="DIR",
                    help="data directory (default: $DATA_CACHE_DIR, $DATA_DIR/.codesearch or ~/.codesearch)")
    sv.add_argument("--searchers", type=int, default=2,
                    help="shard searchers: the index is split over this many partitions (default 2)")
    sv.add_argument("--searcher-copies", type=int, default=1,
                    help="copies of every partition; each search goes to one copy (default 1)")
    sv.add_argument("--replicas", type=int, default=1, help="Serve replicas of the HTTP API (default 1)")
    sv.add_argument("--no-dashboard", action="store_true",
                    help="start Ray without its dashboard (by default the Ray instance codesearch starts has one)")
    sv.set_defaults(func=cmd_serve)

    us = sub.add_parser("users", help="manage users (the first one becomes OWNER)")
    us.add_argument("action", choices=["create", "list", "set-password"])
    us.add_argument("email", nargs="?", help="with create and set-password: the user's e-mail")
    us.add_argument("--name", help="with create: display name")
    pw = us.add_mutually_exclusive_group()
    pw.add_argument("--password", action="store_true",
                    help="with create: ask for a web sign-in password (set-password always asks)")
    pw.add_argument("--password-stdin", action="store_true",
                    help="with create and set-password: read the password from the first line of stdin")
    us.add_argument("--data-dir", metavar="DIR",
                    help="data directory (default: $DATA_CACHE_DIR, $DATA_DIR/.codesearch or ~/.codesearch)")
    us.set_defaults(func=cmd_users)

    ks = sub.add_parser("keys", help="manage API keys")
    ks.add_argument("action", choices=["create", "list", "revoke"])
    ks.add_argument("key_id", nargs="?", type=int, help="with revoke: the key's id (from list)")
    ks.add_argument("--user", required=True, metavar="EMAIL", help="the key owner")
    ks.add_argument("--name", default="cli", help="with create: a name for the key")
    ks.add_argument("--all", action="store_true", help="with list: include revoked keys")
    ks.add_argument("--data-dir", metavar="DIR",
                    help="data directory (default: $DATA_CACHE_DIR, $DATA_DIR/.codesearch or ~/.codesearch)")
    ks.set_defaults(func=cmd_keys)

    y = sub.add_parser("sync", help="list, mirror and index the repositories of a config file's connections")
    y.add_argument("config", metavar="CONFIG", help="config file (Sourcebot v3 format)")
    y.add_argument("--data-dir", required=True, metavar="DIR", help="where mirrors (repos/) and the index (index/) go")
    y.add_argument("--connection", action="append", metavar="NAME", help="only this connection (repeatable)")
    y.set_defaults(func=cmd_sync)

    c = sub.add_parser("config", help="check a config file or print the config schema")
    csub = c.add_subparsers(dest="config_command", required=True)
    cv = csub.add_parser("validate", help="validate a config file: every problem at once (exit 2), or a summary")
    cv.add_argument("file", metavar="FILE", help="the config file (JSON, comments allowed)")
    cv.add_argument("--check-env", action="store_true",
                    help="also check that the environment variables named by {\"env\": …} tokens are set")
    cv.set_defaults(func=cmd_config_validate)
    cs = csub.add_parser("schema", help="print the JSON schema (index.json, or another file of it)")
    cs.add_argument("--file", default="index.json", metavar="NAME", help="schema file, e.g. github.json (default index.json)")
    cs.set_defaults(func=cmd_config_schema)
    return p


def main(argv: list[str] | None = None) -> int:
    from codesearch import environment

    try:
        environment.configure_logging()  # SOURCEBOT_LOG_LEVEL
    except environment.InvalidEnvironmentVariable as e:
        print(f"codesearch: {e}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    if getattr(args, "command", "") == "users" and args.action in ("create", "set-password") and not args.email:
        print(f"codesearch: users {args.action} needs an e-mail", file=sys.stderr)
        return 2
    if getattr(args, "command", "") == "keys" and args.action == "revoke" and args.key_id is None:
        print("codesearch: keys revoke needs a key id (see: codesearch keys list)", file=sys.stderr)
        return 2
    if getattr(args, "matches", 1) < 1 or getattr(args, "context", 0) < 0:
        print("codesearch: --matches must be at least 1 and --context at least 0", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except CodesearchError as e:
        print(f"codesearch: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `codesearch search … | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
