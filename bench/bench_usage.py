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
page offers (7, 30, 90, 365 days back from today) is reported `--repeat` times and the median
and the slowest are printed, with the rows the range holds. The load average is printed too:
other work on the machine shows in every number.
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
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(tmp, environ={ENV_VAR: "bench-secret"})
        t = time.perf_counter()
        n = fill(store, a.users, a.days, a.events)
        fill_s = time.perf_counter() - t
        size = os.path.getsize(os.path.join(tmp, next(f for f in os.listdir(tmp) if f.endswith(".db"))))
        print(f"{n:,} audit rows ({a.users} users, {a.days} days) written in {fill_s:.1f} s; "
              f"database {size / 2**20:,.0f} MiB; load average {os.getloadavg()[0]:.2f}")
        print()
        print(f"| range | rows in range | median (s) | slowest (s) | of {a.repeat} runs |")
        print("|---|---:|---:|---:|---|")
        for days in usage.PRESETS:
            r = usage.parse_range(days)
            times = []
            for _ in range(a.repeat):
                t = time.perf_counter()
                report = usage.usage_report(store, r)
                times.append(time.perf_counter() - t)
            rows = store.list_audit_events(since=r.since, until=r.until, per_page=1)[1]
            assert sum(report.totals[k] for k in ("searches", "mcpCalls")) <= rows
            print(f"| last {days} days | {rows:,} | {statistics.median(times):.3f} | {max(times):.3f} | |")
        store.close()


if __name__ == "__main__":
    main()
