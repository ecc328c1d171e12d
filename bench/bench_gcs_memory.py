#!/usr/bin/env python3
"""The GCS's memory under many actor calls, with and without `serve_settings.PROXY_ENV`'s caps (issue 30).

Usage:
    python bench/bench_gcs_memory.py                     # 200,000 calls, each setting in a Ray of its own
    python bench/bench_gcs_memory.py --calls 50000 --every 10000

Every search is an actor call to each searcher, and Ray's GCS keeps a record of every call for the
dashboard. `serve_settings` bounds what it keeps; this script shows what each bound is worth. For
each setting (Ray's defaults; the event cap alone; the event cap with the cap on tracked dropped
attempts) it starts a local Ray instance of its own (the GCS reads the settings from its
environment when it starts), makes one actor whose method does nothing, calls it `--calls` times
(in waves of 200, as concurrent searches would), and reads the GCS process's anonymous memory
(``RssAnon`` in /proc) every `--every` calls. It prints a markdown table: per setting, the
memory at each point and the growth per 10,000 calls over the second half of the run (after the
event cap has filled, what is left is what grows without bound).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: The settings compared: (label, environment of the Ray instance).
SETTINGS = [
    ("Ray's defaults", {}),
    ("event cap 10,000", {"RAY_task_events_max_num_task_in_gcs": "10000"}),
    ("event cap + dropped-attempt cap 10,000", {"RAY_task_events_max_num_task_in_gcs": "10000",
                                                "RAY_task_events_max_dropped_task_attempts_tracked_per_job_in_gcs": "10000"}),
]

#: One run, in a process of its own (a Ray instance per setting): prints [calls, RssAnon kB] pairs as JSON.
CHILD = r"""
import json, sys, time
import ray

calls, every = int(sys.argv[1]), int(sys.argv[2])
ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)

def gcs_rss_kb():
    node = ray._private.worker._global_node  # the instance this ray.init started: its own GCS
    pid = node.all_processes["gcs_server"][0].process.pid
    status = open(f"/proc/{pid}/status").read()
    return int(next(l.split()[1] for l in status.splitlines() if l.startswith("RssAnon:")))

@ray.remote(num_cpus=0)
class Nothing:
    def call(self):
        return None

actor = Nothing.remote()
ray.get(actor.call.remote())
points, done = [[0, gcs_rss_kb()]], 0
while done < calls:
    ray.get([actor.call.remote() for _ in range(200)])
    done += 200
    if done % every == 0:
        time.sleep(1.5)  # the workers' task events reach the GCS (they are sent every second)
        points.append([done, gcs_rss_kb()])
print(json.dumps(points))
ray.shutdown()
"""


def run(env: dict[str, str], calls: int, every: int) -> list[list[int]]:
    environ = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_task_events")}, **env,
               "RAY_AUTH_MODE": "disabled"}
    environ.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-c", CHILD, str(calls), str(every)], env=environ, capture_output=True,
                         text=True, timeout=3600, check=False)
    if out.returncode:
        raise SystemExit(f"the run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--every", type=int, default=20_000)
    args = ap.parse_args()
    if args.every % 200 or args.calls % args.every:
        ap.error("--every must be a multiple of 200 and divide --calls")
    results = []
    for label, env in SETTINGS:
        print(f"{label}: {args.calls} calls ...", file=sys.stderr)
        results.append((label, run(env, args.calls, args.every)))
    marks = [c for c, _ in results[0][1]]
    print(f"\n### The GCS's RssAnon (MB) after N actor calls, {args.calls:,} calls per setting\n")
    print("| setting | " + " | ".join(f"{c:,}" for c in marks) + " | growth per 10,000 calls, second half |")
    print("|---|" + "---:|" * len(marks) + "---:|")
    for label, points in results:
        half = [p for p in points if p[0] >= args.calls // 2]
        slope = (half[-1][1] - half[0][1]) / max(1, half[-1][0] - half[0][0]) * 10_000 / 1024
        print(f"| {label} | " + " | ".join(f"{kb / 1024:.0f}" for _, kb in points) + f" | {slope:+.2f} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
