"""Index builds against Google's `cindex`, alternated and repeated (issue 25: build ≤ 1× cindex
without symbols, ≤ 1.5× with them, at 1 GB and at 10 GB).

Each round builds the same projects with `cindex` and with ours (without ctags, and with them
unless ``--no-ctags``), one after the other, each a whole process (`builds.py`: wall time from
start to exit, CPU of the process tree). The machine's speed drifts by ±10 % over minutes, so
the table gives per-round ratios (ours ÷ cindex of the same round) and their median, next to the
median times. The page cache is warmed by one untimed read of the corpus first.

    .venv/bin/python bench/bench_build.py                      # the 1 GB corpus (bench/corpus.py)
    .venv/bin/python bench/bench_build.py --corpus /work/corpus-large/src --rounds 2 --no-ctags
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from builds import Build, build_cindex, build_engine  # noqa: E402

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "bench-build"


def warm(paths: list[Path]) -> int:
    """Read every file once (the page cache then holds the corpus, as for every build after the
    first); returns the bytes read."""
    total = 0
    for root in paths:
        for folder, _dirs, names in os.walk(root):
            for name in names:
                try:
                    with open(os.path.join(folder, name), "rb") as f:
                        while chunk := f.read(1 << 20):
                            total += len(chunk)
                except OSError:
                    pass
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(HERE / ".corpus"), help="a folder of project folders (one repository each)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-ctags", action="store_true", help="leave out our build with symbols")
    ap.add_argument("--work", default=str(WORK), help="where the indexes are written (wiped before each build)")
    args = ap.parse_args()

    paths = sorted(p for p in Path(args.corpus).iterdir() if p.is_dir())
    if not paths:
        print(f"{args.corpus}: no project folders (the 1 GB corpus: .venv/bin/python bench/corpus.py)")
        return 2
    work = Path(args.work)
    corpus_bytes = warm(paths)
    print(f"{len(paths)} projects, {corpus_bytes / 1e6:,.1f} MB read to warm the page cache; {args.rounds} rounds")
    kinds = ["cindex", "ours without ctags"] + ([] if args.no_ctags else ["ours with ctags"])
    runs: dict[str, list[Build]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        runs["cindex"].append(build_cindex(paths, work / "cindex" / "index"))
        runs["ours without ctags"].append(build_engine(paths, work / "ours", ctags=False))
        if not args.no_ctags:
            runs["ours with ctags"].append(build_engine(paths, work / "ours", ctags=True))
        print(f"round {r + 1}: " + ", ".join(f"{k} {runs[k][-1].wall:.2f} s" for k in kinds), flush=True)

    base = runs["cindex"]
    print()
    print("| build | wall s, median (min-max) | CPU s, median | MB per wall-s | wall ÷ cindex, median of rounds (min-max) | on disk |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in kinds:
        walls = [b.wall for b in runs[kind]]
        ratios = [b.wall / c.wall for b, c in zip(runs[kind], base, strict=True)]
        wall = statistics.median(walls)
        print(
            f"| {kind} | {wall:.2f} ({min(walls):.2f}-{max(walls):.2f}) | "
            f"{statistics.median(b.cpu for b in runs[kind]):.1f} | {corpus_bytes / 1e6 / wall:.0f} | "
            f"**{statistics.median(ratios):.2f}×** ({min(ratios):.2f}-{max(ratios):.2f}) | "
            f"{runs[kind][-1].size / 1e6:,.0f} MB |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
