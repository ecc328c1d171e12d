#!/usr/bin/env python3
"""What a searcher without the data directory pays to get its shards (issue 13).

Usage:
    python bench/bench_shard_copy.py                  # 3 files: 8 MB, 64 MB, 256 MB
    python bench/bench_shard_copy.py --sizes 100 400  # sizes in MB
    python bench/bench_shard_copy.py --index DIR      # the shard files of a real index

On a Ray instance of its own (2 CPUs): a `ShardSource` actor over the files and a searcher-like
actor that copies each into a directory of its own through Ray (`ShardCopies.local`: describe,
chunks through the object store, BLAKE2b check, rename), measured beside ``cp`` of the same file
on the same disk (the cost of a local copy) and ``b2sum`` (the cost of the checksum alone). Each
copy starts from a cold destination (the previous copy removed); the page cache is warm for all
(the same file was just read), as it is on the node that built the shard. Prints MB/s per size
and method, and the ratio to ``cp``.

A benchmark, not a test: it checks only that every copy is byte for byte the source.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Copier:
    """A searcher's side: copies through `ShardCopies` into `local_dir`."""

    def __init__(self, local_dir: str, source_name: str):
        import ray

        from codesearch.runtime import NAMESPACE
        from codesearch.runtime.shard_copy import ShardCopies

        self.copies = ShardCopies(local_dir, lambda: ray.get_actor(source_name, namespace=NAMESPACE))
        self.local_dir = local_dir

    def copy(self, path: str) -> tuple[float, str]:
        for name in os.listdir(self.local_dir):
            os.unlink(os.path.join(self.local_dir, name))
        started = time.perf_counter()
        dest = self.copies.local(path)
        return time.perf_counter() - started, dest


def _timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="*", default=[8, 64, 256], help="file sizes in MB")
    ap.add_argument("--index", help="copy the .shard files of this index directory instead")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from codesearch.runtime import NAMESPACE
    from codesearch.runtime.shard_copy import ShardSource

    work = tempfile.mkdtemp(prefix="bench-shard-copy-")
    try:
        src_dir = os.path.join(work, "index")
        os.makedirs(src_dir)
        files = []
        if a.index:
            for name in sorted(os.listdir(a.index)):
                if name.endswith(".shard"):
                    os.symlink(os.path.join(a.index, name), os.path.join(src_dir, name))
                    files.append(os.path.join(src_dir, name))
        else:
            for mb in a.sizes:
                path = os.path.join(src_dir, f"bench.{mb}mb.shard")
                with open(path, "wb") as f:
                    for _ in range(mb):
                        f.write(os.urandom(1 << 20))
                files.append(path)
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        source = ray.remote(ShardSource).options(name="bench-shard-source", namespace=NAMESPACE, num_cpus=0).remote(src_dir)
        ray.get(source.ping.remote())  # kept alive by this handle
        copier = ray.remote(Copier).options(num_cpus=0).remote(os.path.join(work, "far"), "bench-shard-source")
        rows = []
        for path in files:
            mb = os.path.getsize(os.path.realpath(path)) / 1e6
            through_ray, cp, b2 = [], [], []
            for _ in range(a.runs):
                seconds, dest = ray.get(copier.copy.remote(path))
                assert filecmp.cmp(os.path.realpath(path), dest, shallow=False), dest
                through_ray.append(seconds)
                target = os.path.join(work, "cp.out")
                cp.append(_timed(["cp", os.path.realpath(path), target]))
                os.unlink(target)
                b2.append(_timed(["b2sum", os.path.realpath(path)]))
            rows.append((os.path.basename(path), mb, statistics.median(through_ray), statistics.median(cp),
                         statistics.median(b2)))
        print(f"{'file':<28} {'MB':>8} {'via Ray MB/s':>13} {'cp MB/s':>9} {'b2sum MB/s':>11} {'Ray/cp time':>12}")
        for name, mb, t_ray, t_cp, t_b2 in rows:
            print(f"{name:<28} {mb:>8.1f} {mb / t_ray:>13.0f} {mb / t_cp:>9.0f} {mb / t_b2:>11.0f} {t_ray / t_cp:>11.1f}x")
        print(f"(median of {a.runs} runs each; {os.cpu_count()} cores; the first copy of a run also hashes the source once)")
        return 0
    finally:
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
