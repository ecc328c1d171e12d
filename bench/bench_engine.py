#!/usr/bin/env python3
"""End-to-end benchmark of the codesearch engine beside csearch/cindex, ripgrep and a brute-force scan.

Usage:
    python bench/corpus.py                  # once: the corpus in bench/.corpus/
    python bench/bench_engine.py            # build the indexes, time the query classes
    python bench/bench_engine.py --quick    # smoke run on one project

What one run measures (see bench/README.md), the page cache warm for every tool:
  * the index builds, each a whole process, one after the other: Google's `cindex`, ours without
    ctags, ours with ctags (the one searched): wall and CPU seconds, MB/s, size on disk, postings
    size as a fraction of the corpus, and the ratio of our wall time to cindex's;
  * per query class: median and p95 latency over --runs runs, after one warm-up run, of
    (a) `Searcher.search(..., matches=100)` in this process,
    (b) `csearch` over cindex's index, whole output and `| head -n 100`,
    (c) `rg` over the corpus directory with its whole output read from a pipe,
    (d) `rg ... | head -n 100` (ripgrep with a cap of 100 lines, like the engine's cap),
    (e) a brute-force scan in Python (read every file, google-re2 search), --brute-runs runs;
    and the engine's candidate files, files loaded and bytes verified (its `stats`);
  * per query class a correctness check: the engine's set of matching files with an
    unlimited match cap equals `rg -l`'s (minus the files the engine does not content-index
    by the indexing rules of docs/indexing.md#what-gets-indexed: larger than maxFileSize, more distinct trigrams than maxTrigramCount, NUL byte);
  * issue 12's engine targets, ✓/✗.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import re2

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))  # builds, peers

from builds import Build, build_cindex, build_engine  # noqa: E402
from peers import csearch_version, make_csearch_runner  # noqa: E402

CORPUS = HERE / ".corpus"
WORK = HERE / ".work"
QUICK_PROJECT = "numpy"

# The indexing rules' defaults (docs/indexing.md#what-gets-indexed; used when IndexSettings does not say otherwise).
DEFAULT_MAX_FILE_SIZE = 2097152
DEFAULT_MAX_TRIGRAM_COUNT = 20000

UNLIMITED = 10**9


@dataclass
class QueryCase:
    cls: str  # query class, as printed
    pattern: str  # the content pattern (literal text or RE2 regex)
    is_regex: bool
    case_sensitive: bool
    file_regex: str | None = None  # codesearch `file:` filter
    rg_glob: str | None = None  # the same filter for rg
    selective: bool = False
    note: str = ""

    @property
    def cs_query(self) -> str:
        q = self.pattern
        if self.file_regex:
            q = f"file:{self.file_regex} {q}"
        return q

    def rg_args(self) -> list[str]:
        a = ["-s" if self.case_sensitive else "-i"]
        if self.is_regex:
            # RE2's \w \d \b are ASCII; ripgrep's are Unicode unless told otherwise.
            a.append("--no-unicode")
        else:
            a.append("-F")
        if self.rg_glob:
            a += ["--glob", self.rg_glob]
        a += ["-e", self.pattern]
        return a


# Chosen by grepping the full corpus (bench/corpus.py's pinned list, ~974 MB) with rg; the rare
# literal, the case-insensitive and the weak-trigram regexes are the ones issue 12 measured:
#   rare literal          ErrAbortHandler                 18 lines in 7 files (Go's net/http)
#   common literal        static_cast                     37k lines in 2.7k files
#   case-insensitive      select[\t\x20]+\*[\t\x20]+from (-i)   ~950 lines in ~180 files (issue 12 wrote \s+: see below)
#   regex with literals   grpc_\w+_create                  866 lines in 192 files
#   regex, weak trigrams  [a-z]+_id\b                      11k lines in 1.8k files (no usable trigram)
#   file-filtered         file:\.h$ Py_INCREF             21 lines in 14 .h files (Py_INCREF is in many .c)
#   no match              get_subchannel_refcount_lock    (its trigrams are common, the string is not)
# A query must mean the same thing to every tool: the engine (like Zoekt) matches a regex against
# the whole file, so `\s` also matches a newline, while csearch and rg match line by line; with
# `\s+` the engine rightly finds `SELECT\n  * FROM` in 3 files the others cannot. `[\t\x20]+`
# keeps the query (same trigrams, same cost) without the multi-line matches (no literal
# space: in the query language a space separates terms).
QUERIES = [
    QueryCase("rare literal", "ErrAbortHandler", False, True, selective=True),
    QueryCase("common literal", "static_cast", False, True),
    QueryCase("case-insensitive regex", r"select[\t\x20]+\*[\t\x20]+from", True, False),
    QueryCase("regex with literals", r"grpc_\w+_create", True, True, selective=True),
    QueryCase("regex, weak trigrams", r"[a-z]+_id\b", True, True),
    QueryCase("file-filtered literal", "Py_INCREF", False, True, file_regex=r"\.h$", rg_glob="*.h",
              selective=True),
    QueryCase("no-match literal", "get_subchannel_refcount_lock", False, True, selective=True),
    # Issue 25's classes: Sourcebot's default (no case), and capped searches that must stop early.
    QueryCase("rare literal, any case", "ErrAbortHandler", False, False, selective=True),
    QueryCase("common word, capped", "return", False, True),
    QueryCase("alternation, capped", r"(TODO|FIXME|XXX):", True, True),
    QueryCase("any-case regex, weak trigrams, \\s gaps", r"for\s+\w+\s+in\s+range\s*\(\s*len", True, False),
]


# ----------------------------------------------------------------------------- machine


def machine_info() -> list[str]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    try:
        rgv = subprocess.run(["rg", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        rgv = "rg not found"
    return [
        f"- nproc: {os.cpu_count()} (affinity {len(os.sched_getaffinity(0))})",
        f"- CPU: {cpu}",
        f"- RAM: {ram}",
        f"- Python: {platform.python_version()} ({sys.executable})",
        f"- ripgrep: {rgv}",
        f"- csearch/cindex: {csearch_version()}",
        f"- OS: {platform.platform()}",
        f"- load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (other work on the machine skews the numbers)",
    ]


# ----------------------------------------------------------------------------- corpus


@dataclass
class Corpus:
    root: Path
    projects: list[Path]
    files: list[str]  # corpus-relative paths, "project/dir/file"
    sizes: dict[str, int]
    skipped: dict[str, str] = field(default_factory=dict)  # rel path -> reason (by the indexing rule)

    @property
    def bytes(self) -> int:
        return sum(self.sizes.values())

    def indexable(self) -> list[str]:
        return [f for f in self.files if f not in self.skipped]


def scan_corpus(root: Path, projects: list[Path], max_size: int, max_trigrams: int) -> Corpus:
    from codesearch.index.trigrams import fold, unique_trigrams

    files: list[str] = []
    sizes: dict[str, int] = {}
    skipped: dict[str, str] = {}
    for proj in projects:
        for dirpath, dirnames, filenames in os.walk(proj):
            dirnames.sort()
            for fn in sorted(filenames):
                full = os.path.join(dirpath, fn)
                if not os.path.isfile(full) or os.path.islink(full):
                    continue
                rel = os.path.relpath(full, root)
                size = os.path.getsize(full)
                files.append(rel)
                sizes[rel] = size
                if size > max_size:
                    skipped[rel] = "too large"
                    continue
                with open(full, "rb") as f:
                    data = f.read()
                if b"\0" in data:
                    skipped[rel] = "binary"
                elif len(unique_trigrams(fold(data))) > max_trigrams:
                    skipped[rel] = "too many trigrams"
    return Corpus(root, projects, files, sizes, skipped)


# ----------------------------------------------------------------------------- timing


def exit_after(seconds: float) -> None:
    """End the process (exit code 3) if it is still running `seconds` from now: bounds a shutdown
    of Ray or Serve that hangs."""
    import threading

    def watchdog():
        time.sleep(seconds)
        print(f"shutdown took more than {seconds:.0f} s: exiting", file=sys.stderr, flush=True)
        os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()


def percentile(samples: list[float], p: float) -> float:
    s = sorted(samples)
    k = max(0, math.ceil(p / 100 * len(s)) - 1)
    return s[k]


def time_runs(fn, runs: int, warmup: int = 1) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


RG_BASE = ["rg", "--no-config", "--no-heading", "-n", "--no-ignore", "--hidden", "--no-messages"]


def rg_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RIPGREP_CONFIG_PATH", None)
    return env


def compile_brute(q: QueryCase):
    o = re2.Options()
    o.case_sensitive = q.case_sensitive
    o.log_errors = False
    pat = q.pattern if q.is_regex else re2.escape(q.pattern)
    content = re2.compile("(?m)" + pat, o)
    path_re = None
    if q.file_regex:
        po = re2.Options()
        po.case_sensitive = q.case_sensitive
        po.log_errors = False
        path_re = re2.compile(q.file_regex, po)
    return content, path_re


def run_brute(q: QueryCase, corpus: Corpus, files: list[str]) -> set[str]:
    """Read every content-indexable file from disk and search it with RE2."""
    content, path_re = compile_brute(q)
    root = str(corpus.root)
    hits = set()
    for rel in files:
        if path_re is not None:
            in_repo = rel.split("/", 1)[1] if "/" in rel else rel
            if path_re.search(in_repo) is None:
                continue
        with open(os.path.join(root, rel), "rb") as f:
            data = f.read()
        if content.search(data) is not None:
            hits.add(rel)
    return hits


def count_matches(q: QueryCase, corpus: Corpus, files: set[str]) -> int:
    """Non-overlapping RE2 matches in the given files (the engine's chunk match ranges)."""
    content, _ = compile_brute(q)
    n = 0
    for rel in files:
        with open(os.path.join(corpus.root, rel), "rb") as f:
            data = f.read()
        n += sum(1 for _ in content.finditer(data))
    return n


# ----------------------------------------------------------------------------- engine


def cs_search(searcher, q: QueryCase, matches: int):
    return searcher.search(q.cs_query, matches=matches, context_lines=0, is_regex=q.is_regex,
                           case_sensitive=q.case_sensitive)


class RepoMapper:
    """Maps the engine's `repository` names to corpus project directories."""

    def __init__(self, projects: list[Path]):
        self.dirs = [p.name for p in projects]
        self.cache: dict[str, str] = {}
        self.unknown: set[str] = set()

    def __call__(self, repo: str) -> str:
        if repo in self.cache:
            return self.cache[repo]
        hit = None
        for d in self.dirs:
            if repo == d or repo.rstrip("/").endswith("/" + d):
                hit = d
                break
        if hit is None:
            for d in self.dirs:
                if d in repo:
                    hit = d
                    break
        if hit is None:
            self.unknown.add(repo)
            hit = repo
        self.cache[repo] = hit
        return hit


def cs_files(resp: dict, mapper: RepoMapper) -> set[str]:
    out = set()
    for f in resp.get("files", []):
        name = f["fileName"]["text"] if isinstance(f.get("fileName"), dict) else f.get("fileName")
        out.add(f"{mapper(f['repository'])}/{name}")
    return out


# ----------------------------------------------------------------------------- main


def fmt_ms(x: float | None) -> str:
    if x is None or math.isnan(x):  # (nan: not measured, `--capped-peers-only`)
        return "–"
    ms = x * 1000
    return f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0 or math.isnan(a):
        return "–"
    r = a / b
    return f"{r:.1f}×" if r < 100 else f"{r:.0f}×"


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"smoke run on one project ({QUICK_PROJECT})")
    ap.add_argument("--corpus", default=str(CORPUS),
                    help="the corpus: a directory of project directories (default bench/.corpus; the 10 GB one: "
                         "bench/corpus_large.py's src directory)")
    ap.add_argument("--projects", nargs="*", help="project directory name prefixes to use (default: all)")
    ap.add_argument("--runs", type=int, default=15, help="timed runs per query for engine and rg (default 15)")
    ap.add_argument("--brute-runs", type=int, default=3, help="timed runs of the brute-force scan (default 3)")
    ap.add_argument("--index-dir", default=str(WORK / "index"), help="where the index is built (wiped first)")
    ap.add_argument("--reuse-index", action="store_true", help="do not rebuild when the index directory exists")
    ap.add_argument("--no-brute", action="store_true", help="skip the brute-force scan")
    ap.add_argument("--capped-peers-only", action="store_true",
                    help="time the peers capped only (`| head -n 100`), not their whole output: the 10 GB corpus "
                         "does not fit the page cache beside the indexes (each uncapped rg reads it from disk); the "
                         "`rg -l` correctness check still runs once per class")
    ap.add_argument("--no-ctags", action="store_true",
                    help="build and search only the index without symbols (IndexSettings(ctags=False))")
    ap.add_argument("--no-csearch", action="store_true", help="leave out cindex/csearch")
    ap.add_argument("--csearch-index", default=str(WORK / "csearch" / "index"),
                    help="cindex's index file ($CSEARCHINDEX; default bench/.work/csearch/index)")
    ap.add_argument("--show", type=int, default=3, help="print this many engine results of the first query")
    args = ap.parse_args()
    corpus_dir = Path(args.corpus)
    if args.quick:
        args.projects = args.projects or [QUICK_PROJECT]
        args.runs = min(args.runs, 5)
        args.brute_runs = min(args.brute_runs, 1)
        if args.index_dir == str(WORK / "index"):
            args.index_dir = str(WORK / "index-quick")
        if args.csearch_index == str(WORK / "csearch" / "index"):
            args.csearch_index = str(WORK / "csearch" / "index-quick")

    if not corpus_dir.is_dir():
        print(f"no corpus at {corpus_dir}: run python bench/corpus.py first", file=sys.stderr)
        return 2
    if shutil.which("rg") is None:
        print("rg (ripgrep) not found on PATH", file=sys.stderr)
        return 2
    projects = sorted(p for p in corpus_dir.iterdir() if p.is_dir() and not p.name.endswith(".partial"))
    if args.projects:
        projects = [p for p in projects if any(p.name.lower().startswith(x.lower()) for x in args.projects)]
    if not projects:
        print("no project directory selected", file=sys.stderr)
        return 2
    # rg runs in corpus_dir, over "." or (with a subset) over the project directories.
    rg_root = corpus_dir

    print("## Machine\n")
    print("\n".join(machine_info()))
    print()

    # Engine import (the API may still be under construction).
    engine_error = None
    search_error = None
    try:
        from codesearch.index.builder import IndexSettings
    except Exception as e:  # noqa: BLE001 - reported, the rest still runs
        engine_error = f"{type(e).__name__}: {e}"
        IndexSettings = None  # type: ignore[assignment]
    try:
        from codesearch.search.engine import Searcher
    except Exception as e:  # noqa: BLE001 - reported, the rest still runs
        search_error = f"{type(e).__name__}: {e}"
        Searcher = None  # type: ignore[assignment]
    if os.environ.get("ALWAYS_INDEX_FILE_PATTERNS"):
        print("WARNING: ALWAYS_INDEX_FILE_PATTERNS is set; the correctness check assumes the default indexing rules\n")

    settings = IndexSettings() if IndexSettings is not None else None
    if settings is not None and args.no_ctags:
        settings.ctags = False
    max_size = getattr(settings, "max_file_size", DEFAULT_MAX_FILE_SIZE) or DEFAULT_MAX_FILE_SIZE
    max_tri = getattr(settings, "max_trigram_count", DEFAULT_MAX_TRIGRAM_COUNT) or DEFAULT_MAX_TRIGRAM_COUNT

    t0 = time.perf_counter()
    corpus = scan_corpus(corpus_dir, projects, max_size, max_tri)
    scan_s = time.perf_counter() - t0
    reasons: dict[str, int] = {}
    for r in corpus.skipped.values():
        reasons[r] = reasons.get(r, 0) + 1
    print(f"Corpus: {len(projects)} projects ({', '.join(p.name for p in projects)}), "
          f"{corpus.bytes / 1e6:.1f} MB in {len(corpus.files)} files; "
          f"not content-indexable by the indexing rules (maxFileSize {max_size}, maxTrigramCount {max_tri}, NUL): "
          f"{len(corpus.skipped)} files ({', '.join(f'{k} {v}' for k, v in sorted(reasons.items()))}); "
          f"scan {scan_s:.1f}s")
    print()

    rel_projects = [p.name for p in projects]

    # ---------------------------------------------------------------- builds
    # Warm the page cache for everyone first: one pass of rg reads every file.
    warm_q = QueryCase("warm", "zzqqxxwarmup", False, True)
    run_rg_full_scoped = make_rg_runner(rel_projects if args.projects else None)
    run_rg_full_scoped(warm_q, rg_root, "full")

    build_rows: list[tuple[str, str]] = []
    builds: dict[str, Build] = {}
    csearch_index = Path(args.csearch_index)
    use_csearch = not args.no_csearch and bool(shutil.which("cindex")) and bool(shutil.which("csearch"))
    if not args.no_csearch and not use_csearch:
        print("cindex/csearch not found (Debian package codesearch: `make bench-deps`): csearch left out\n")
    if use_csearch:
        if args.reuse_index and csearch_index.is_file():
            build_rows.append(("cindex", f"reused {csearch_index} (not timed)"))
        else:
            say("building: cindex")
            builds["cindex"] = build_cindex(projects, csearch_index)
    searcher = None
    mapper = RepoMapper(projects)
    index_dir = Path(args.index_dir)
    if engine_error is None:
        try:
            if args.reuse_index and index_dir.is_dir() and any(index_dir.iterdir()):
                build_rows.append(("codesearch", f"reused {index_dir} (not timed)"))
            else:
                if not args.no_ctags:  # the build without symbols, timed and thrown away
                    scratch = index_dir.with_name(index_dir.name + "-nosymbols")
                    say("building: codesearch without ctags")
                    builds["without ctags"] = build_engine(projects, scratch, ctags=False)
                    shutil.rmtree(scratch)
                key = "without ctags" if args.no_ctags else "with ctags"
                say(f"building: codesearch {key}")
                builds[key] = build_engine(projects, index_dir, ctags=not args.no_ctags)
            if Searcher is not None:
                t0 = time.perf_counter()
                searcher = Searcher(str(index_dir))
                build_rows.append(("Searcher open", f"{(time.perf_counter() - t0) * 1000:.0f} ms"))
            else:
                build_rows.append(("search", f"unavailable: {search_error}"))
        except Exception as e:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            engine_error = f"{type(e).__name__}: {e}"
    if engine_error is not None:
        build_rows.append(("engine", f"unavailable: {engine_error}"))

    print("## Index build (each a whole process, one run; page cache warm)\n")
    print_builds(builds, corpus, build_rows)
    sys.stdout.flush()

    # Skipped files as the engine reports them (lang:skipped), compared with the indexing rule.
    if searcher is not None:
        try:
            resp = searcher.search("lang:skipped", matches=UNLIMITED, context_lines=0)
            eng_skipped = cs_files(resp, mapper)
            rule = set(corpus.skipped)
            print(f"Engine `lang:skipped`: {len(eng_skipped)} files; indexing rule: {len(rule)}; "
                  f"only engine: {len(eng_skipped - rule)}; only rule: {len(rule - eng_skipped)}"
                  + (f" (e.g. only engine: {sorted(eng_skipped - rule)[:3]}, only rule: {sorted(rule - eng_skipped)[:3]})"
                     if eng_skipped != rule else ""))
        except Exception as e:  # noqa: BLE001
            print(f"Engine `lang:skipped` failed: {type(e).__name__}: {e}")
        print()

    # ---------------------------------------------------------------- queries
    run_csearch = make_csearch_runner(csearch_index, corpus_dir) if use_csearch else None
    indexable = corpus.indexable()
    rows = []
    for qi, q in enumerate(QUERIES):
        row: dict[str, object] = {"q": q}
        # correctness: file sets
        rg_set = run_rg_full_scoped(q, rg_root, "files")
        rg_set_indexable = {f for f in rg_set if f not in corpus.skipped}
        row["rg_files"] = len(rg_set_indexable)
        row["rg_files_skipped"] = len(rg_set) - len(rg_set_indexable)
        if searcher is not None:
            try:
                full = cs_search(searcher, q, UNLIMITED)
                if qi == 0 and args.show:
                    print(f"First engine results for {q.cs_query!r} (repository → corpus dir):")
                    for f in full.get("files", [])[: args.show]:
                        print(f"  repository={f.get('repository')!r} fileName={f['fileName']['text']!r} "
                              f"→ {mapper(f['repository'])}/{f['fileName']['text']}")
                    print(f"  stats: { {k: full.get('stats', {}).get(k) for k in ('actualMatchCount', 'totalMatchCount')} }, "
                          f"isSearchExhaustive={full.get('isSearchExhaustive')}")
                    print()
                cs_set = cs_files(full, mapper)
                row["cs_ranges"] = sum(len(c.get("matchRanges", [])) for f in full.get("files", [])
                                       for c in f.get("chunks", []))
                row["cs_files"] = len(cs_set)
                row["ok"] = cs_set == rg_set_indexable
                if not row["ok"]:
                    row["diff"] = (sorted(cs_set - rg_set_indexable)[:5], sorted(rg_set_indexable - cs_set)[:5],
                                   len(cs_set - rg_set_indexable), len(rg_set_indexable - cs_set))
                row["exhaustive_full"] = full.get("isSearchExhaustive")
                capped = cs_search(searcher, q, 100)
                row["cs_stats"] = capped.get("stats", {})
                row["cs_capped_files"] = len(capped.get("files", []))
                row["cs_capped_matches"] = capped.get("stats", {}).get("actualMatchCount")
                row["cs_capped_exhaustive"] = capped.get("isSearchExhaustive")
                ts = time_runs(lambda: cs_search(searcher, q, 100), args.runs)
                row["cs"] = (statistics.median(ts), percentile(ts, 95))
            except Exception as e:  # noqa: BLE001
                row["cs_error"] = f"{type(e).__name__}: {e}"
        if args.capped_peers_only:  # (at 10 GB each uncapped rg run reads the whole corpus from disk)
            row["rg"] = (math.nan, math.nan)
        else:
            ts = time_runs(lambda: run_rg_full_scoped(q, rg_root, "full"), args.runs)
            row["rg"] = (statistics.median(ts), percentile(ts, 95))
            row["rg_lines"] = run_rg_full_scoped(q, rg_root, "full")
        ts = time_runs(lambda: run_rg_full_scoped(q, rg_root, "capped"), args.runs)
        row["rgcap"] = (statistics.median(ts), percentile(ts, 95))
        if run_csearch is not None:
            row["gcs_files"] = len(run_csearch(q, "files"))
            if not args.capped_peers_only:
                ts = time_runs(lambda: run_csearch(q, "full"), args.runs)
                row["gcs"] = (statistics.median(ts), percentile(ts, 95))
            ts = time_runs(lambda: run_csearch(q, "capped"), args.runs)
            row["gcscap"] = (statistics.median(ts), percentile(ts, 95))
        if not args.no_brute and args.brute_runs > 0:
            hits: set[str] = set()

            def brute():
                hits.clear()
                hits.update(run_brute(q, corpus, indexable))

            ts = time_runs(brute, args.brute_runs, warmup=0)
            row["brute"] = (statistics.median(ts), percentile(ts, 95))
            row["brute_ok"] = hits == rg_set_indexable
            row["brute_files"] = len(hits)
            row["brute_ranges"] = count_matches(q, corpus, hits)
        rows.append(row)
        # each class as it is measured (the 10 GB run takes an hour: what was measured survives a cut)
        cells = {k: row[k][0] * 1000 for k in ("cs", "gcscap", "rgcap") if isinstance(row.get(k), tuple)}
        print(f"  measured: {q.cls}: " + ", ".join(f"{k} p50 {v:.1f} ms" for k, v in cells.items())
              + f"; files engine {row.get('cs_files', '–')} / rg {row['rg_files']}, same: {row.get('ok', '–')}"
              + (f"; {row['cs_error']}" if "cs_error" in row else ""), file=sys.stderr, flush=True)

    # ---------------------------------------------------------------- table
    print(f"## Queries ({args.runs} timed runs after 1 warm-up; brute force {args.brute_runs} runs; "
          f"times in ms, median / p95 (nearest rank))\n")
    print("| class | query | files (engine / rg) | matches (engine) | ✓ | engine, matches=100 | rg (all output) | rg \\| head -n 100 "
          "| brute force (Python+RE2) | rg / engine | rg\\|head / engine | brute / engine |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        q: QueryCase = row["q"]  # type: ignore[assignment]
        qtext = q.cs_query + ("" if q.case_sensitive else "  (case-insensitive)")
        if q.is_regex:
            qtext += "  (regex)"
        cs = row.get("cs")
        rg = row["rg"]
        rgc = row["rgcap"]
        br = row.get("brute")
        files = f"{row.get('cs_files', '–')} / {row['rg_files']}"
        if row["rg_files_skipped"]:
            files += f" (+{row['rg_files_skipped']} not indexable)"
        ok = "✓" if row.get("ok") else ("✗" if "ok" in row else "–")
        if "brute_ok" in row and not row["brute_ok"]:
            ok += " (brute ✗)"
        if "cs_ranges" in row and "brute_ranges" in row and row["cs_ranges"] != row["brute_ranges"]:
            ok += f" (matches {row['cs_ranges']} ≠ brute {row['brute_ranges']})"
        cs_cell = f"{fmt_ms(cs[0])} / {fmt_ms(cs[1])}" if cs else f"error: {row.get('cs_error', 'engine unavailable')}"
        print(f"| {q.cls} | `{qtext}` | {files} | {row.get('cs_ranges', '–')} | {ok} | {cs_cell} | {fmt_ms(rg[0])} / {fmt_ms(rg[1])} | "
              f"{fmt_ms(rgc[0])} / {fmt_ms(rgc[1])} | "
              f"{(fmt_ms(br[0]) + ' / ' + fmt_ms(br[1])) if br else '–'} | "
              f"{fmt_ratio(rg[0], cs[0] if cs else None)} | {fmt_ratio(rgc[0], cs[0] if cs else None)} | "
              f"{fmt_ratio(br[0] if br else None, cs[0] if cs else None)} |")
    print()
    print("Ratios are of medians; above 1× the engine is faster. `rg / engine` compares with ripgrep "
          "printing every match; `rg|head / engine` with ripgrep stopped after 100 lines (the same cap "
          "as the engine's matches=100). rg uses all cores (`-j` default), the engine one thread in this "
          "process; rg times include process start. rg: `--no-ignore --hidden`, `-F` for literals, "
          "`--no-unicode` for regexes (RE2's \\w \\d \\b are ASCII), `-i`/`-s` as the class says. "
          "Files = matching files with an unlimited cap vs `rg -l` on the content-indexable files; "
          "brute force scans the content-indexable files only. Matches = the engine's chunk match ranges "
          "with an unlimited cap; ✓ also requires them to equal the brute-force count of RE2 matches.")
    for row in rows:
        if "diff" in row:
            only_cs, only_rg, n_cs, n_rg = row["diff"]  # type: ignore[misc]
            print(f"\n✗ {row['q'].cls}: {n_cs} files only in engine (e.g. {only_cs}), "  # type: ignore[union-attr]
                  f"{n_rg} only in rg (e.g. {only_rg})")
        if row.get("cs_capped_exhaustive") is False and row.get("exhaustive_full") is False:
            print(f"\nnote {row['q'].cls}: isSearchExhaustive is false even with an unlimited cap")  # type: ignore[union-attr]
    if mapper.unknown:
        print(f"\nrepository names not mapped to a corpus directory: {sorted(mapper.unknown)[:5]}")
    print()
    print_peers(rows, args.runs)
    print_targets(rows, builds, corpus)
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


# ----------------------------------------------------------------------------- issue 12 tables

#: issue 12's engine targets: engine p50 ÷ peer p50 at most this.
RARE_VS_CSEARCH = 0.5
EVERY_VS_PEER = 1.0
BUILD_VS_CINDEX_SYMBOLS = 1.5
BUILD_VS_CINDEX_PLAIN = 1.0
POSTINGS_MAX = 0.35

#: Engine stats shown per class, by the first name the engine reports (newer names first).
STAT_COLUMNS = [
    ("candidate files", ("candidateFiles", "ngramMatches")),
    ("files loaded", ("filesLoaded",)),
    ("bytes verified", ("bytesVerified", "contentBytesLoaded")),
]


def stat(st: dict, names: tuple[str, ...]):
    for n in names:
        if n in st:
            return st[n], n
    return None, None


def div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def fmt_x(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}×"


def mark(ok: bool | None) -> str:
    return "–" if ok is None else ("✓" if ok else "✗")


def print_builds(builds: dict, corpus: Corpus, notes: list[tuple[str, str]]) -> None:
    """One row per build, with throughput, size and the ratio to cindex's wall time."""
    mb = corpus.bytes / 1e6
    ref = builds.get("cindex")
    print(f"Corpus {mb:.1f} MB in {len(corpus.files)} files.\n")
    print("| build | wall s | CPU s | MB/s wall | MB per CPU-s | ÷ cindex wall | on disk MB (× corpus) | postings MB (× corpus) | shards |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key, b in builds.items():
        post = b.stats.get("postings_bytes")
        print(f"| {b.what} | {b.wall:.1f} | {b.cpu:.1f} | {mb / b.wall:.1f} | {mb / max(b.cpu, 1e-9):.1f} | "
              f"{fmt_x(div(b.wall, ref.wall if ref else None))} | {b.size / 1e6:.1f} ({b.size / corpus.bytes:.3f}×) | "
              + (f"{post / 1e6:.1f} ({post / corpus.bytes:.3f}×)" if post is not None else "–")
              + f" | {b.stats.get('shards', '–')} |")
    for key, b in builds.items():
        if b.stats:
            print(f"\n{b.what}: input {b.stats['input_bytes'] / 1e6:.1f} MB in {b.stats['files']} files, "
                  f"{b.stats['skipped']} not content-indexed, {b.stats['warnings']} warnings; the engine's own "
                  f"timer {b.stats['seconds']:.1f} s (the rest of the wall time is process start and imports).")
    if "cindex" in builds:
        print("\ncindex's index holds postings and file names only (no contents): its size is its postings size.")
    for k, v in notes:
        print(f"\n{k}: {v}")
    print()


def print_peers(rows: list[dict], runs: int) -> None:
    """Engine vs csearch vs rg | head -n 100, per class (issue 12), with the engine's stats."""
    print(f"## Engine beside csearch and rg (p50 of {runs} runs, ms; engine ÷ peer below 1× = the engine is faster)\n")
    print("| class | engine | csearch | csearch \\| head -n 100 | rg \\| head -n 100 | engine ÷ csearch | "
          "engine ÷ csearch\\|head | engine ÷ rg\\|head | files: engine / csearch / rg | "
          + " | ".join(name for name, _ in STAT_COLUMNS) + " | matching files in the answer |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|" + "---:|" * len(STAT_COLUMNS) + "---:|")
    used = set()
    for row in rows:
        q = row["q"]
        e = row["cs"][0] if row.get("cs") else None
        g = row["gcs"][0] if row.get("gcs") else None
        gc = row["gcscap"][0] if row.get("gcscap") else None
        rc = row["rgcap"][0]
        st = row.get("cs_stats", {})
        cells = []
        for _, names in STAT_COLUMNS:
            v, n = stat(st, names)
            if n:
                used.add(n)
            cells.append("–" if v is None else f"{v:,}")
        print(f"| {q.cls} | {fmt_ms(e)} | {fmt_ms(g)} | {fmt_ms(gc)} | {fmt_ms(rc)} | {fmt_x(div(e, g))} | "
              f"{fmt_x(div(e, gc))} | {fmt_x(div(e, rc))} | {row.get('cs_files', '–')} / {row.get('gcs_files', '–')} / "
              f"{row['rg_files']} | " + " | ".join(cells) + f" | {row.get('cs_capped_files', '–')} |")
    print(f"\nEngine stats of one `matches=100` search ({', '.join(sorted(used)) or 'none reported'}). "
          "Files: matching files with no cap (engine: content-indexable files only; csearch: `csearch -l`, which "
          "skips what cindex does not index, e.g. files with very long lines or invalid UTF-8; rg: `rg -l` on the "
          "content-indexable files). csearch and rg are new processes each run (their start-up included); "
          "the engine is a `Searcher` in this process, one thread.\n")


def print_targets(rows: list[dict], builds: dict, corpus: Corpus) -> None:
    print("## Targets of issue 12 (engine in-process)\n")
    print(f"Per class: engine p50 ÷ csearch p50 ≤ 1× (rare literal ≤ {RARE_VS_CSEARCH}×) and ÷ `rg | head -n 100` "
          f"≤ 1×; the last column, not a target of the issue, is the stricter ÷ `csearch | head -n 100` "
          f"(csearch printing no more than the engine's 100 matches).\n")
    print("| class | engine ÷ csearch | | engine ÷ rg \\| head -n 100 | | engine ÷ csearch \\| head -n 100 | |")
    print("|---|---:|---|---:|---|---:|---|")
    for row in rows:
        q = row["q"]
        e = row["cs"][0] if row.get("cs") else None
        bound = RARE_VS_CSEARCH if q.cls == "rare literal" else EVERY_VS_PEER
        cells = []
        for key, b in (("gcs", bound), ("rgcap", EVERY_VS_PEER), ("gcscap", EVERY_VS_PEER)):
            r = div(e, row[key][0] if row.get(key) else None)
            cells.append(f"{fmt_x(r)} | {mark(None if r is None else r <= b)}")
        print(f"| {q.cls} | " + " | ".join(cells) + " |")
    print("\n| target | result | |\n|---|---|---|")
    ref = builds.get("cindex")
    for key, bound in (("with ctags", BUILD_VS_CINDEX_SYMBOLS), ("without ctags", BUILD_VS_CINDEX_PLAIN)):
        b = builds.get(key)
        r = div(b.wall if b else None, ref.wall if ref else None)
        print(f"| build {key} ≤ {bound:g}× cindex (wall) | {fmt_x(r)}"
              + (f" ({b.wall:.1f} s vs {ref.wall:.1f} s)" if r is not None else "")
              + f" | {mark(None if r is None else r <= bound)} |")
    for key in ("with ctags", "without ctags"):
        b = builds.get(key)
        if b and "postings_bytes" in b.stats:
            r = b.stats["postings_bytes"] / corpus.bytes
            print(f"| postings ≤ {POSTINGS_MAX}× corpus ({key}) | {r:.3f}× | {mark(r <= POSTINGS_MAX)} |")
            break


def make_rg_runner(projects: list[str] | None):
    """rg over the corpus root, or over the given project directories only."""
    targets = ["."] if not projects else [f"./{p}" for p in projects]

    def run(q: QueryCase, cwd: Path, mode: str):
        cmd = RG_BASE + (["-l"] if mode == "files" else []) + q.rg_args() + targets
        if mode == "capped":
            rg = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=rg_env())
            head = subprocess.Popen(["head", "-n", "100"], stdin=rg.stdout, stdout=subprocess.PIPE)
            rg.stdout.close()  # head owns the read end: rg gets SIGPIPE when head exits
            out = head.communicate()[0]
            rg.wait()
            return out.count(b"\n")
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=rg_env())
        if mode == "files":
            out = set()
            for line in p.stdout.decode("utf-8", "surrogateescape").splitlines():
                out.add(line[2:] if line.startswith("./") else line)
            return out
        return p.stdout.count(b"\n")

    return run


if __name__ == "__main__":
    sys.exit(main())
