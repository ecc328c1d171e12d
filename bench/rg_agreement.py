"""Does a big index answer what `rg -l` finds? The correctness column of `bench_engine.py`, for an
index too big to grep whole on every run (the 10 GB corpus: 13.8 GB, ~70 MB/s from disk here).

For each query class of `bench_engine.QUERIES`, the engine searches the whole index without a cap,
restricted to a sample of its repositories (a ``repo:`` filter), and `rg -l` greps the same sample's
directories; the two file sets must be equal once the files the index keeps as names only are set
aside (what the engine itself lists for ``lang:skipped``). The sample is deterministic: every
`--every`-th project directory in name order, plus the largest one (the monorepo) unless
`--no-largest`. The index must have been built from the project directories themselves (as
`bench/builds.py` and `codesearch index` build it: one repository per directory).

    python bench/rg_agreement.py --index /work/bench10g/engine-index --corpus /work/corpus-large/src

Meaning, both sides alike: rg runs with ``--no-ignore --hidden`` (every file, as the index reads a
directory) but not in ``.git``, ``-F`` for literals, ``-s``/``-i`` as the class says, and for a
regex ``--no-unicode`` (RE2's ``\\w \\d \\b`` are ASCII) and ``--multiline`` (the engine matches a
regex against the whole file, so ``\\s`` matches a newline too), or with `--line-mode` line by
line, the files only the engine finds then confirmed by RE2 over the whole file. Prints a table;
exits 1 when a class disagrees, naming the first files of each side.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_engine import QUERIES, RG_BASE, UNLIMITED, QueryCase, RepoMapper, compile_brute, cs_files, rg_env  # noqa: E402


def sample_projects(corpus: Path, every: int, largest: bool) -> list[Path]:
    """Every `every`-th project directory of `corpus` by name, and the largest one (by bytes)."""
    projects = sorted(p for p in corpus.iterdir() if p.is_dir())
    chosen = projects[::every]
    if largest:
        biggest = max(projects, key=tree_bytes)
        if biggest not in chosen:
            chosen.append(biggest)
    return chosen


def tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def repo_filter(mapper: RepoMapper, names: list[str], sample: list[Path]) -> tuple[str, int]:
    """A ``repo:`` regex naming exactly the index's repositories of the sample's directories."""
    dirs = {p.name for p in sample}
    repos = sorted(name for name in names if mapper(name) in dirs)
    prefix = os.path.commonprefix(repos)  # written once: a query may be at most 16 KiB
    prefix = prefix[: prefix.rfind("/") + 1]
    tails = "|".join(re.escape(name[len(prefix):]) for name in repos)
    return f"repo:^{re.escape(prefix)}({tails})$", len(repos)


def rg_files(q: QueryCase, corpus: Path, sample: list[Path], line_mode: bool) -> set[str]:
    """`rg -l` over the sample, corpus-relative paths ("project/dir/file")."""
    args = q.rg_args()
    if q.is_regex and not line_mode:
        args = ["--multiline", *args]
    cmd = [*RG_BASE, "-l", "--glob", "!.git", *args, *(str(p.relative_to(corpus)) for p in sample)]
    out = subprocess.run(cmd, cwd=corpus, capture_output=True, env=rg_env())
    if out.returncode not in (0, 1):
        raise SystemExit(f"rg failed ({out.returncode}): {out.stderr.decode(errors='replace')[:500]}")
    return {line for line in out.stdout.decode("utf-8", "surrogateescape").splitlines() if line}


def whole_file_matches(q: QueryCase, corpus: Path, files: set[str]) -> set[str]:
    """Those of `files` that RE2 (the brute-force side of `bench_engine.py`) matches as a whole
    file: what confirms a file the engine found and a line-by-line rg could not."""
    content, _ = compile_brute(q)
    return {rel for rel in files if content.search((corpus / rel).read_bytes())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="the index directory")
    ap.add_argument("--corpus", required=True, help="the directory of the project directories it was built from")
    ap.add_argument("--every", type=int, default=20, help="sample every N-th project directory (default 20)")
    ap.add_argument("--no-largest", action="store_true", help="leave the largest project out of the sample")
    ap.add_argument("--classes", nargs="*", help="query classes to check (default: all)")
    ap.add_argument("--line-mode", nargs="*", default=[], metavar="CLASS",
                    help="classes whose regex rg runs line by line (`rg --multiline` took over 4 CPU-minutes "
                         "on the 2.3 GB sample for the any-case regex with \\s gaps): the files only the engine "
                         "finds are then confirmed by RE2 over the whole file")
    args = ap.parse_args()

    from codesearch.search.engine import Searcher

    corpus = Path(args.corpus).resolve()
    sample = sample_projects(corpus, args.every, not args.no_largest)
    sample_mb = sum(tree_bytes(p) for p in sample) / 1e6
    t0 = time.perf_counter()
    searcher = Searcher(args.index)
    print(f"index {args.index}: opened in {time.perf_counter() - t0:.1f} s; sample: {len(sample)} of "
          f"{sum(1 for p in corpus.iterdir() if p.is_dir())} project directories, {sample_mb:,.0f} MB", flush=True)
    mapper = RepoMapper(sample)
    names = sorted({repo.name for shard in searcher.shards for repo in shard.live_repos})
    scope, n_repos = repo_filter(mapper, names, sample)
    if n_repos != len(sample):
        print(f"warning: {n_repos} repositories of the index match the {len(sample)} sampled directories")
    skipped = cs_files(searcher.search(f"{scope} lang:skipped", matches=UNLIMITED, context_lines=0), mapper)

    print("\n| class | query | engine files | rg -l files | of them kept as names only | agree | engine s | rg s |")
    print("|---|---|---:|---:|---:|---|---:|---:|")
    failures = []
    for q in QUERIES:
        if args.classes and q.cls not in args.classes:
            continue
        t0 = time.perf_counter()
        resp = searcher.search(f"{scope} {q.cs_query}", matches=UNLIMITED, context_lines=0, is_regex=q.is_regex,
                               case_sensitive=q.case_sensitive)
        engine_s = time.perf_counter() - t0
        engine = cs_files(resp, mapper)
        if not resp.get("isSearchExhaustive", True):
            print(f"warning: the engine's answer for {q.cls} is not exhaustive (a deadline?)")
        t0 = time.perf_counter()
        line_mode = q.cls in args.line_mode
        rg = rg_files(q, corpus, sample, line_mode)
        rg_s = time.perf_counter() - t0
        names_only = rg & skipped
        expected = rg - names_only
        if line_mode:  # a match across lines is the engine's alone: RE2 over the whole file says
            expected |= whole_file_matches(q, corpus, engine - expected)
        agree = engine == expected
        if not agree:
            failures.append((q, sorted(engine - expected)[:5], sorted(expected - engine)[:5]))
        shown = q.cs_query.replace("|", "\\|")  # (a Markdown table's cell)
        print(f"| {q.cls} | `{shown}` | {len(engine):,} | {len(rg):,} | {len(names_only):,} | "
              f"{'yes' if agree else '**no**'} | {engine_s:.1f} | {rg_s:.1f} |", flush=True)
    for q, only_engine, only_rg in failures:
        print(f"\n{q.cls}: only the engine: {only_engine}; only rg: {only_rg}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
