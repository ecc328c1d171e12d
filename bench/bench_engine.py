#!/usr/bin/env python3
"""End-to-end benchmark of the codesearch engine against ripgrep and a brute-force scan.

Usage:
    python bench/corpus.py                  # once: the corpus in bench/.corpus/
    python bench/bench_engine.py            # build the index, time the query classes
    python bench/bench_engine.py --quick    # smoke run on one project

What one run measures (see bench/README.md):
  * index build of the corpus (one repository per project directory): MB/s of wall time,
    MB per CPU-second (per core), postings and total index size as a fraction of the corpus;
  * per query class: median and p95 latency over --runs runs, after one warm-up run, of
    (a) `Searcher.search(..., matches=100)` in this process,
    (b) `rg` over the corpus directory with its whole output read from a pipe,
    (c) `rg ... | head -n 100` (ripgrep with a cap of 100 lines, like the engine's cap),
    (d) a brute-force scan in Python (read every file, google-re2 search), --brute-runs runs;
  * per query class a correctness check: the engine's set of matching files with an
    unlimited match cap equals `rg -l`'s (minus the files the engine does not content-index
    by SPEC §3: larger than maxFileSize, more distinct trigrams than maxTrigramCount, NUL byte).
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import resource
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

CORPUS = HERE / ".corpus"
WORK = HERE / ".work"
QUICK_PROJECT = "numpy"

# SPEC §3 defaults (used when IndexSettings does not say otherwise).
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
#   case-insensitive      select\s+\*\s+from (-i)         959 lines in 182 files
#   regex with literals   grpc_\w+_create                  866 lines in 192 files
#   regex, weak trigrams  [a-z]+_id\b                      11k lines in 1.8k files (no usable trigram)
#   file-filtered         file:\.h$ Py_INCREF             21 lines in 14 .h files (Py_INCREF is in many .c)
#   no match              get_subchannel_refcount_lock    (its trigrams are common, the string is not)
QUERIES = [
    QueryCase("rare literal", "ErrAbortHandler", False, True, selective=True),
    QueryCase("common literal", "static_cast", False, True),
    QueryCase("case-insensitive regex", r"select\s+\*\s+from", True, False),
    QueryCase("regex with literals", r"grpc_\w+_create", True, True, selective=True),
    QueryCase("regex, weak trigrams", r"[a-z]+_id\b", True, True),
    QueryCase("file-filtered literal", "Py_INCREF", False, True, file_regex=r"\.h$", rg_glob="*.h",
              selective=True),
    QueryCase("no-match literal", "get_subchannel_refcount_lock", False, True, selective=True),
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
    skipped: dict[str, str] = field(default_factory=dict)  # rel path -> reason (by SPEC rule)

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
    if x is None:
        return "–"
    ms = x * 1000
    return f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "–"
    r = a / b
    return f"{r:.1f}×" if r < 100 else f"{r:.0f}×"


def dir_bytes(path: Path) -> int:
    total = 0
    for dirpath, _d, filenames in os.walk(path):
        for fn in filenames:
            total += os.path.getsize(os.path.join(dirpath, fn))
    return total


def cpu_seconds() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"smoke run on one project ({QUICK_PROJECT})")
    ap.add_argument("--projects", nargs="*", help="project directory name prefixes to use (default: all)")
    ap.add_argument("--runs", type=int, default=15, help="timed runs per query for engine and rg (default 15)")
    ap.add_argument("--brute-runs", type=int, default=3, help="timed runs of the brute-force scan (default 3)")
    ap.add_argument("--index-dir", default=str(WORK / "index"), help="where the index is built (wiped first)")
    ap.add_argument("--reuse-index", action="store_true", help="do not rebuild when the index directory exists")
    ap.add_argument("--no-brute", action="store_true", help="skip the brute-force scan")
    ap.add_argument("--no-ctags", action="store_true", help="build with IndexSettings(ctags=False) (symbols off)")
    ap.add_argument("--show", type=int, default=3, help="print this many engine results of the first query")
    args = ap.parse_args()
    if args.quick:
        args.projects = args.projects or [QUICK_PROJECT]
        args.runs = min(args.runs, 5)
        args.brute_runs = min(args.brute_runs, 1)
        if args.index_dir == str(WORK / "index"):
            args.index_dir = str(WORK / "index-quick")

    if not CORPUS.is_dir():
        print(f"no corpus at {CORPUS}: run python bench/corpus.py first", file=sys.stderr)
        return 2
    if shutil.which("rg") is None:
        print("rg (ripgrep) not found on PATH", file=sys.stderr)
        return 2
    projects = sorted(p for p in CORPUS.iterdir() if p.is_dir() and not p.name.endswith(".partial"))
    if args.projects:
        projects = [p for p in projects if any(p.name.lower().startswith(x.lower()) for x in args.projects)]
    if not projects:
        print("no project directory selected", file=sys.stderr)
        return 2
    # rg runs in CORPUS, over "." or (with a subset) over the project directories.
    rg_root = CORPUS

    print("## Machine\n")
    print("\n".join(machine_info()))
    print()

    # Engine import (the API may still be under construction).
    engine_error = None
    search_error = None
    try:
        from codesearch.index.builder import IndexSettings, index_paths
    except Exception as e:  # noqa: BLE001 - reported, the rest still runs
        engine_error = f"{type(e).__name__}: {e}"
        IndexSettings = index_paths = None  # type: ignore[assignment]
    try:
        from codesearch.search.engine import Searcher
    except Exception as e:  # noqa: BLE001 - reported, the rest still runs
        search_error = f"{type(e).__name__}: {e}"
        Searcher = None  # type: ignore[assignment]
    if os.environ.get("ALWAYS_INDEX_FILE_PATTERNS"):
        print("WARNING: ALWAYS_INDEX_FILE_PATTERNS is set; the correctness check assumes the SPEC defaults\n")

    settings = IndexSettings() if IndexSettings is not None else None
    if settings is not None and args.no_ctags:
        settings.ctags = False
    max_size = getattr(settings, "max_file_size", DEFAULT_MAX_FILE_SIZE) or DEFAULT_MAX_FILE_SIZE
    max_tri = getattr(settings, "max_trigram_count", DEFAULT_MAX_TRIGRAM_COUNT) or DEFAULT_MAX_TRIGRAM_COUNT

    t0 = time.perf_counter()
    corpus = scan_corpus(CORPUS, projects, max_size, max_tri)
    scan_s = time.perf_counter() - t0
    reasons: dict[str, int] = {}
    for r in corpus.skipped.values():
        reasons[r] = reasons.get(r, 0) + 1
    print(f"Corpus: {len(projects)} projects ({', '.join(p.name for p in projects)}), "
          f"{corpus.bytes / 1e6:.1f} MB in {len(corpus.files)} files; "
          f"not content-indexable by SPEC §3 (maxFileSize {max_size}, maxTrigramCount {max_tri}, NUL): "
          f"{len(corpus.skipped)} files ({', '.join(f'{k} {v}' for k, v in sorted(reasons.items()))}); "
          f"scan {scan_s:.1f}s")
    print()

    rel_projects = [p.name for p in projects]

    # ---------------------------------------------------------------- build
    build_rows: list[tuple[str, str]] = []
    searcher = None
    mapper = RepoMapper(projects)
    index_dir = Path(args.index_dir)
    if engine_error is None:
        try:
            if args.reuse_index and index_dir.is_dir() and any(index_dir.iterdir()):
                build_rows.append(("index build", f"reused {index_dir} (not timed)"))
                stats = None
            else:
                if index_dir.exists():
                    shutil.rmtree(index_dir)
                index_dir.mkdir(parents=True)
                c0 = cpu_seconds()
                t0 = time.perf_counter()
                stats = index_paths([str(p) for p in projects], str(index_dir), settings)
                wall = time.perf_counter() - t0
                cpu = cpu_seconds() - c0
                mb = corpus.bytes / 1e6
                build_rows += [
                    ("corpus", f"{mb:.1f} MB, {len(corpus.files)} files, {len(projects)} repositories"),
                    ("engine's input_bytes / files", f"{stats.input_bytes / 1e6:.1f} MB / {stats.files}"),
                    ("build wall time", f"{wall:.1f} s (engine's own: {stats.seconds:.1f} s)"),
                    ("build throughput", f"**{mb / wall:.1f} MB/s** wall; {mb / cpu:.1f} MB per CPU-second "
                                         f"(CPU {cpu:.1f} s incl. child processes)"),
                    ("shards", f"{len(stats.shards)} (settings: ctags={getattr(settings, 'ctags', '?')}, "
                               f"shard_max_bytes={getattr(settings, 'shard_max_bytes', '?')}; "
                               f"skipped {getattr(stats, 'skipped', '?')} files, {len(getattr(stats, 'warnings', []))} warnings)"),
                    ("postings size", f"{stats.postings_bytes / 1e6:.1f} MB = "
                                      f"**{stats.postings_bytes / corpus.bytes:.3f}× corpus**"),
                    ("index size (total)", f"{stats.total_bytes / 1e6:.1f} MB = "
                                           f"**{stats.total_bytes / corpus.bytes:.3f}× corpus**"),
                ]
                on_disk = dir_bytes(index_dir)
                if abs(on_disk - stats.total_bytes) > 0.01 * max(on_disk, 1):
                    build_rows.append(("index dir on disk", f"{on_disk / 1e6:.1f} MB (differs from total_bytes)"))
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

    print("## Index build\n")
    print("| measure | value |\n|---|---|")
    for k, v in build_rows:
        print(f"| {k} | {v} |")
    print()
    sys.stdout.flush()

    # Skipped files as the engine reports them (lang:skipped), compared with the SPEC rule.
    if searcher is not None:
        try:
            resp = searcher.search("lang:skipped", matches=UNLIMITED, context_lines=0)
            eng_skipped = cs_files(resp, mapper)
            rule = set(corpus.skipped)
            print(f"Engine `lang:skipped`: {len(eng_skipped)} files; SPEC rule: {len(rule)}; "
                  f"only engine: {len(eng_skipped - rule)}; only rule: {len(rule - eng_skipped)}"
                  + (f" (e.g. only engine: {sorted(eng_skipped - rule)[:3]}, only rule: {sorted(rule - eng_skipped)[:3]})"
                     if eng_skipped != rule else ""))
        except Exception as e:  # noqa: BLE001
            print(f"Engine `lang:skipped` failed: {type(e).__name__}: {e}")
        print()

    # ---------------------------------------------------------------- queries
    # Warm the page cache for everyone: one pass of rg over everything.
    warm_q = QueryCase("warm", "zzqqxxwarmup", False, True)
    run_rg_full_scoped = make_rg_runner(rel_projects if args.projects else None)
    run_rg_full_scoped(warm_q, rg_root, "full")

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
                row["cs_capped_matches"] = capped.get("stats", {}).get("actualMatchCount")
                row["cs_capped_exhaustive"] = capped.get("isSearchExhaustive")
                ts = time_runs(lambda: cs_search(searcher, q, 100), args.runs)
                row["cs"] = (statistics.median(ts), percentile(ts, 95))
            except Exception as e:  # noqa: BLE001
                row["cs_error"] = f"{type(e).__name__}: {e}"
        ts = time_runs(lambda: run_rg_full_scoped(q, rg_root, "full"), args.runs)
        row["rg"] = (statistics.median(ts), percentile(ts, 95))
        row["rg_lines"] = run_rg_full_scoped(q, rg_root, "full")
        ts = time_runs(lambda: run_rg_full_scoped(q, rg_root, "capped"), args.runs)
        row["rgcap"] = (statistics.median(ts), percentile(ts, 95))
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
        print(f"  measured: {q.cls}", file=sys.stderr, flush=True)

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
    return 0


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
