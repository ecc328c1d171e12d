#!/usr/bin/env python3
"""The usage report (`codesearch.audit.usage`) over a year of audit rows for a 200-person team.

Usage:
    python bench/bench_usage.py                        # 200 users × 365 days × 60 events a workday
    python bench/bench_usage.py --events 20 --users 50 # a quick look

A fresh SQLite state database (the default store) gets a year of audit events ending today: every
user works on weekdays (and one in ten on a weekend day), leaving `--events` events on such a day,
drawn as a team's day is made of: file reads and directory listings, searches, history reads,
Ask questions, MCP tool calls; one user in five works through API keys (``via=apikey``), the
others through the web UI's session, MCP clients through API keys or OAuth. Then each range the
page offers (7, 30, 90, 365 days back from today) is reported once with nothing kept (every day
counted: wall clock and this process's CPU time, SQLite running in it), then `--repeat` times
again (the settled days kept: `codesearch.audit.usage.DayCache`), with the rows the range holds.
The load average is printed too: other work on the machine shows in the wall-clock numbers.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from codesearch.audit import usage  # noqa: E402
from codesearch.store import Store  # noqa: E402
from codesearch.store.secret import ENV_VAR  # noqa: E402

#: (action, weight) of one event of a working day.
MIX = [("source.read", 40), ("tree.read", 12), ("search", 25), ("commits.read", 5), ("blame.read", 2),
       ("chat.ask", 3), ("chat.read", 2), ("mcp.tool", 10), ("login", 1)]


def fill(store: Store, users: int, days: int, events: int, seed: int = 27) -> int:
    rnd = random.Random(seed)
    actions, weights = zip(*MIX, strict=True)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    total, batch = 0, []
    for d in range(days, -1, -1):
        day = today - timedelta(days=d)
        weekend = day.weekday() >= 5
        for u in range(1, users + 1):
            if weekend and rnd.random() > 0.1:
                continue
            scripted = u % 5 == 0
            for action in rnd.choices(actions, weights, k=rnd.randint(events // 2, events * 3 // 2)):
                via = "apikey" if scripted else ("oauth" if action == "mcp.tool" and u % 2 else "session")
                batch.append({"at": day + timedelta(seconds=rnd.randrange(86_400)), "actor_user_id": u,
                              "actor": f"user{u}@example.com", "action": action, "target": "q",
                              "details": {"via": via}})
            if len(batch) >= 20_000:
                total += store.add_audit_events(batch)
                batch = []
    total += store.add_audit_events(batch)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--events", type=int, default=60, help="events of one user on a working day, on average")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--db", metavar="DIR", help="keep the database in DIR (filled once, reused by later runs)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = a.db or tmp
        store = Store.open(where, environ={ENV_VAR: "bench-secret"})
        t = time.perf_counter()
        n = store.list_audit_events(per_page=1)[1] or fill(store, a.users, a.days, a.events)
        fill_s = time.perf_counter() - t
        size = sum(os.path.getsize(os.path.join(where, f)) for f in os.listdir(where) if ".db" in f)
        print(f"{n:,} audit rows ({a.users} users, {a.days} days) ready in {fill_s:.1f} s; "
              f"database {size / 2**20:,.0f} MiB; load average {os.getloadavg()[0]:.2f}")
        print()
        print("| range | rows in range | first report: wall (s) | first report: CPU (s) "
              f"| again, days kept: median of {a.repeat} (s) |")
        print("|---|---:|---:|---:|---:|")
        for days in usage.PRESETS:
            r = usage.parse_range(days)
            usage._caches.pop(store, None)  # nothing kept: the first report counts every day
            t, cpu = time.perf_counter(), time.process_time()
            report = usage.usage_report(store, r)
            cold, cold_cpu = time.perf_counter() - t, time.process_time() - cpu
            again = []
            for _ in range(a.repeat):
                t = time.perf_counter()
                assert usage.usage_report(store, r).days == report.days
                again.append(time.perf_counter() - t)
            rows = store.list_audit_events(since=r.since, until=r.until, per_page=1)[1]
            assert report.totals["searches"] + report.totals["mcpCalls"] <= rows
            print(f"| last {days} days | {rows:,} | {cold:.2f} | {cold_cpu:.2f} | {statistics.median(again):.3f} |")
        print(f"\nload average {os.getloadavg()[0]:.2f}")
        store.close()


if __name__ == "__main__":
    main()
