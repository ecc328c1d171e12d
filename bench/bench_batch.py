#!/usr/bin/env python3
"""Batch search (issue 27): a batch of capped queries over the 1 GB corpus index, as one Ray Dataset
(`codesearch.data.search`, `codesearch batch`) beside the same queries one at a time (`Client.local`
in this process, `Client.http` against the service) and a shell loop of ``rg -m``.

Usage:
    python bench/corpus.py                                 # once: the corpus in bench/.corpus/
    python bench/bench_engine.py                           # once: its index in bench/.work/index
    nice -n 10 python bench/bench_batch.py                 # 1,000 queries, rg on a sample of 40
    python bench/bench_batch.py --queries 200 --rg-sample 10    # a shorter run
    nice -n 19 python bench/bench_batch.py --in-process 3  # one read task's work and the local loop, CPU s

One run, one process (see bench/README.md):
  * the queries: identifiers taken from the index itself (symbol names of every shard, sampled with
    a fixed seed: rare and common ones as they come) and, for one query in ten, a regex made of one
    (``NAME\\s*\\(``: its calls); each capped at ``--matches`` (100) match ranges;
  * a local Ray instance (2 CPUs), 2 shard searchers (`SearcherPool`) and the Serve application
    (`search_application`, one replica, anonymous access) on 127.0.0.1, as bench_service.py;
  * timed, one after the other, each over all the queries: `Client.local` (the engine in this
    process, one query after the other), `Client.http` (the service, one request after the other),
    `codesearch.data.search` over the index directory (read tasks that open the shards, two per
    CPU; every row read out with ``iter_batches``), the same with one read task (one CPU: the
    batch's shared work alone, beside the `Client.local` loop), ``codesearch batch --index`` (the command in
    this process: the queries file in, a Parquet file out), `codesearch.data.search` over the
    service's URL and over its searchers on Ray;
  * ``rg -m N -i [-F] -- QUERY . | head -n N`` in a bash ``while read`` loop over a sample of the
    queries (every k-th), extrapolated to all of them, and labelled so;
  * a check: the batch's rows over the index directory equal the `Client.local` loop's matches,
    query by query;
  * a table of queries per second and the ratios, all measured in this run.
The machine is shared: the table says so, with the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # codesearch

WORK = HERE / ".work"
PREFIX = "bench-batch-searcher"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_queries(index: str, n: int, regex_every: int, matches: int, seed: int) -> list[dict]:
    """`n` search bodies: identifiers from the index's symbol tables, every `regex_every`-th a regex."""
    from codesearch.search.engine import Searcher

    searcher = Searcher(index, verify=False)
    rng = random.Random(seed)
    names: list[str] = []
    seen: set[str] = set()
    per_shard = -(-n * 3 // max(len(searcher.shards), 1))
    for shard in searcher.shards:
        count = len(shard.sym_noff) - 1
        for k in rng.sample(range(count), min(count, per_shard * 4)):
            name = bytes(shard.sym_name[int(shard.sym_noff[k]) : int(shard.sym_noff[k + 1])]).decode("utf-8", "replace")
            if len(name) >= 5 and name.isidentifier() and name.isascii() and name.lower() not in seen:
                seen.add(name.lower())
                names.append(name)
    searcher.close()
    rng.shuffle(names)
    if len(names) < n:
        raise SystemExit(f"only {len(names)} distinct identifiers found in {index}")
    out = []
    for i, name in enumerate(names[:n]):
        if regex_every and i % regex_every == regex_every - 1:
            out.append({"query": name + r"\s*\(", "isRegexEnabled": True, "matches": matches})
        else:
            out.append({"query": name, "matches": matches})
    return out


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def local_loop(index: str, queries: list[dict]) -> tuple[int, dict[int, list[tuple]]]:
    from codesearch import Client

    rows: dict[int, list[tuple]] = {}
    with Client.local(index) as cs:
        for i, q in enumerate(queries):
            res = cs.search(q["query"], regex=q.get("isRegexEnabled", False), matches=q["matches"])
            rows[i] = sorted((m.repo, m.path, m.line, m.column, m.text) for m in res)
    return sum(len(r) for r in rows.values()), rows


def http_loop(url: str, queries: list[dict]) -> int:
    from codesearch import Client

    n = 0
    with Client.http(url) as cs:
        for q in queries:
            n += len(cs.search(q["query"], regex=q.get("isRegexEnabled", False), matches=q["matches"]))
    return n


def consume(ds) -> int:
    return sum(b.num_rows for b in ds.iter_batches(batch_format="pyarrow", batch_size=None))


def batch_rows(ds) -> dict[int, list[tuple]]:
    df = ds.to_pandas()
    out: dict[int, list[tuple]] = {}
    for qid, group in df.groupby("query_id"):
        out[int(qid)] = sorted(group[["repository", "path", "line_number", "column", "line"]]
                               .itertuples(index=False, name=None))
    return out


def rg_loop(corpus: Path, queries: list[dict], matches: int) -> float:
    """Seconds for a bash `while read` loop of rg over `queries` (literals with -F, regexes without)."""
    with tempfile.TemporaryDirectory() as tmp:
        literal = Path(tmp, "literal.txt")
        regex = Path(tmp, "regex.txt")
        literal.write_text("".join(q["query"] + "\n" for q in queries if not q.get("isRegexEnabled")))
        regex.write_text("".join(q["query"] + "\n" for q in queries if q.get("isRegexEnabled")))
        rg = "rg --no-config --no-heading -n --no-ignore --hidden --no-messages -i -m {m}".format(m=matches)
        script = (
            f'while IFS= read -r q; do {rg} -F -- "$q" . | head -n {matches} > /dev/null; done < "$1"; '
            f'while IFS= read -r q; do {rg} -- "$q" . | head -n {matches} > /dev/null; done < "$2"'
        )
        env = {k: v for k, v in os.environ.items() if k != "RIPGREP_CONFIG_PATH"}
        t0 = time.perf_counter()
        subprocess.run(["bash", "-c", script, "rg-loop", str(literal), str(regex)], cwd=corpus, check=True, env=env)
        return time.perf_counter() - t0


def one_read_task(index: str, queries: list[dict]) -> int:
    """The rows of one read task over all the queries (`datasource.read_part`, blocks of 32), in this process."""
    from codesearch.data.datasource import QUERIES_PER_BLOCK, read_part
    from codesearch.data.queries import Defaults, spec_of
    from codesearch.data.sources import IndexSource

    specs = [spec_of(i, q, Defaults()) for i, q in enumerate(queries)]
    return sum(t.num_rows for t in read_part(specs, IndexSource(index), False, False, QUERIES_PER_BLOCK, None))


def in_process(args) -> int:
    """`--in-process`: CPU seconds are what compare on a loaded machine (wall time is the load's)."""
    queries = make_queries(args.index, args.queries, args.regex_every, args.matches, args.seed)
    ways = {"one read task (`read_part`)": lambda: one_read_task(args.index, queries),
            "`Client.local` loop": lambda: local_loop(args.index, queries)[0]}
    one_read_task(args.index, queries[:16])  # (warm: the page cache, the imports)
    print("| way | round | CPU s | wall s | rows | load (1 min) |\n|---|---:|---:|---:|---:|---:|")
    for r in range(args.in_process):
        for way, fn in ways.items():
            c0, w0 = time.process_time(), time.perf_counter()
            rows = fn()
            print(f"| {way} | {r + 1} | {time.process_time() - c0:.2f} | {time.perf_counter() - w0:.1f} | {rows:,} | "
                  f"{os.getloadavg()[0]:.1f} |", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default=str(WORK / "index"), help="the 1 GB corpus index (bench_engine.py builds it)")
    ap.add_argument("--corpus", default=str(HERE / ".corpus"), help="the corpus itself, for rg")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--regex-every", type=int, default=10, help="every N-th query is a regex (0: none)")
    ap.add_argument("--matches", type=int, default=100, help="the cap of every query")
    ap.add_argument("--rg-sample", type=int, default=40, help="queries rg runs (every k-th), extrapolated")
    ap.add_argument("--searchers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--in-process", type=int, metavar="ROUNDS", default=0,
                    help="only the in-process part, ROUNDS times in turn: one read task's work (no Ray) and the "
                         "`Client.local` loop, in CPU seconds and wall (for a loaded machine)")
    args = ap.parse_args()
    if not Path(args.index, "manifest.json").is_file():
        raise SystemExit(f"no index at {args.index}: build it with bench/bench_engine.py (or pass --index)")
    if args.in_process:
        return in_process(args)
    load_start = os.getloadavg()

    import ray
    from ray import serve
    from ray.data import DataContext

    import codesearch.data as csd
    from codesearch import permissions
    from codesearch.cli import main as cli
    from codesearch.data.sources import IndexSource, RaySource
    from codesearch.runtime import registry
    from codesearch.runtime.searchers import SearcherPool, publish_deployment
    from codesearch.serving.deployment import search_application
    from codesearch.store import Store

    queries = make_queries(args.index, args.queries, args.regex_every, args.matches, args.seed)
    work = WORK / "batch"
    work.mkdir(parents=True, exist_ok=True)
    qfile = work / "queries.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in queries))
    service_dir = work / "service"
    shutil.rmtree(service_dir, ignore_errors=True)
    store = Store.open(str(service_dir))
    permissions.write_settings(store, permissions.PermissionSettings(enabled=False))  # (as a service does)

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    context = DataContext.get_current()
    context.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    results: list[tuple[str, float, int, str]] = []  # (way, seconds, rows, note)
    try:
        pool = SearcherPool.create(args.index, args.searchers, name_prefix=PREFIX)
        publish_deployment(PREFIX, data_dir=str(service_dir), searchers=len(pool.actors),
                           instance=store.instance_id(), database=store.database)
        registry.put_permissions_enabled(PREFIX, False)
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(search_application(PREFIX, len(pool.actors), replicas=1, data_dir=str(service_dir),
                                     anonymous_access=True), name="bench-batch", route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        index_source = IndexSource(args.index)

        # warm up: the page cache, Ray Data's workers, the service's replica and searchers
        print("warming up", file=sys.stderr)
        consume(csd.search(queries[:16], index_source, tasks=2))
        http_loop(url, queries[:16])
        consume(csd.search(queries[:16], url, tasks=2))

        print("Client.local loop", file=sys.stderr)
        seconds, (n_local, local_rows) = timed(lambda: local_loop(args.index, queries))
        results.append(("`Client.local` loop (in-process engine, one query after the other)", seconds, n_local, ""))

        print("Client.http loop", file=sys.stderr)
        seconds, n = timed(lambda: http_loop(url, queries))
        results.append(("`Client.http` loop (the service, one request after the other)", seconds, n, "baseline"))

        print("codesearch.data.search, index directory", file=sys.stderr)
        seconds, n = timed(lambda: consume(csd.search(queries, index_source)))
        results.append(("`codesearch.data.search`, index directory (read tasks open the shards)", seconds, n, ""))

        print("codesearch.data.search, index directory, one read task", file=sys.stderr)
        seconds, n = timed(lambda: consume(csd.search(queries, index_source, tasks=1)))
        results.append(("the same, one read task (one CPU: what sharing the work gives over the loop above)",
                        seconds, n, ""))

        print("codesearch batch --index", file=sys.stderr)
        out = work / "hits.parquet"
        seconds, code = timed(lambda: cli(["batch", str(qfile), "--index", args.index, "--out", str(out)]))
        assert code == 0, code
        import pyarrow.parquet as pq

        results.append(("`codesearch batch --index … --out hits.parquet` (in this process)", seconds,
                        pq.read_metadata(out).num_rows, ""))

        print("codesearch.data.search over HTTP", file=sys.stderr)
        seconds, n = timed(lambda: consume(csd.search(queries, url)))
        results.append(("`codesearch.data.search`, the service's URL (HTTP)", seconds, n, ""))

        print("codesearch.data.search over the searchers on Ray", file=sys.stderr)
        seconds, n = timed(lambda: consume(csd.search(queries, RaySource(PREFIX))))
        results.append(("`codesearch.data.search`, the service's searchers (Ray)", seconds, n, ""))

        print("checking the batch's rows against the Client.local loop", file=sys.stderr)
        got = batch_rows(csd.search(queries, index_source))
        differ = [i for i in range(len(queries)) if got.get(i, []) != local_rows[i]]
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
            store.close()

    k = max(1, len(queries) // max(args.rg_sample, 1))
    sample = queries[::k][: args.rg_sample]
    rg_note = "rg not found"
    rg_qps = None
    if shutil.which("rg") and Path(args.corpus).is_dir():
        print(f"rg loop over {len(sample)} queries", file=sys.stderr)
        seconds = rg_loop(Path(args.corpus), sample, args.matches)
        rg_qps = len(sample) / seconds
        rg_note = f"{len(sample)} of the queries (every {k}-th) in {seconds:.1f} s, extrapolated"
    load_end = os.getloadavg()

    base = results[1][1]
    print(f"\n## Batch search: {len(queries):,} capped queries (`matches` {args.matches}) over the 1 GB corpus index\n")
    print(f"Measured on a loaded machine: {os.cpu_count()} cores shared with other work, load average "
          f"{' '.join(f'{x:.1f}' for x in load_start)} at the start, {' '.join(f'{x:.1f}' for x in load_end)} at the "
          f"end; every number of the table is from this one run. Ray: 2 CPUs; the service: {args.searchers} "
          f"searchers, one API replica. Queries: {len(queries) - sum(1 for q in queries if q.get('isRegexEnabled')):,} "
          f"identifiers from the index's symbol tables, {sum(1 for q in queries if q.get('isRegexEnabled')):,} regexes "
          f"(`NAME\\s*\\(`).\n")
    print("| way | seconds | queries/s | rows | ÷ `Client.http` loop | ÷ rg loop |")
    print("|---|---:|---:|---:|---:|---:|")
    for way, seconds, rows, _note in results:
        qps = len(queries) / seconds
        vs_rg = f"{qps / rg_qps:.1f}×" if rg_qps else "–"
        print(f"| {way} | {seconds:.1f} | {qps:.1f} | {rows:,} | {base / seconds:.2f}× | {vs_rg} |")
    if rg_qps:
        print(f"| `rg -m {args.matches} -i [-F] \\| head -n {args.matches}` in a bash loop (**{rg_note}**) | "
              f"{len(queries) / rg_qps:.1f} (extrapolated) | {rg_qps:.2f} | – | {base * rg_qps / len(queries):.2f}× | 1× |")
    print(f"\nRows of the batch over the index directory equal the `Client.local` loop's matches for "
          f"{len(queries) - len(differ):,} of {len(queries):,} queries"
          + (f" (differ: query ids {differ[:20]})" if differ else "") + ".")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
