#!/usr/bin/env python3
"""Time to first result in the browser (issue 15): the search page over the benchmark corpus.

Usage:
    python bench/bench_scale.py --repos 1000        # once: the corpus as 1000 repositories, indexed
    python bench/bench_browser.py                   # that data directory, this tree's code
    python bench/bench_browser.py --repos 100 --rounds 10

One run:
  1. ``codesearch serve`` of this tree as a process of its own (`bench_http_path.Service`: its own
     Ray instance, 2 searchers, anonymous access on, a free port of 127.0.0.1) over
     bench/.work/scale/data-<repos> (the ~974 MB corpus of bench/corpus.py split into <repos>
     repositories by bench_scale.py, indexed already: nothing is synced or rebuilt here);
  2. Debian's Chromium, headless, driven by Playwright, opens ``/search?q=<query>`` for each
     selective query of bench_engine.py, round after round, the browser cache warm as it is for a
     user's second search: all in one tab (``--tab same``, the default: a user searching again
     from the results page) or each in a new tab (``--tab new``, which adds Chromium's cost of
     opening a tab: a new renderer process whose first layout loads the fonts, and, in this
     Chromium, its omnibox's own page loaded alongside). A script installed when the document
     is created records, with a MutationObserver, the moment the first result appears in
     ``#results`` (``performance.now()``: milliseconds since the navigation started), whoever
     puts it there (the HTML parser, as the server writes the results into the page, or a
     script): what a user waits for, HTML, CSS and JS included. ``--timeline`` also prints
     Chromium's timeline of each load (HTML, DOMContentLoaded, each file, the first result);
  3. in the same rounds, the peers: the first event of ``POST /api/stream_search`` read by a
     plain HTTP client (what the page waits for, without a browser), and ripgrep's first line
     over the corpus's files (``rg -m1 … | head -n1`` in bench/.corpus, the tool people would
     use instead);
  4. prints a markdown table (p50/p95 per query and tool, the ratio browser/rg and whether the
     issue's target, under 150 ms to the first result, holds) and stops the service by its PID.

Any other indexed data directory, any code tree, any queries (issue 29: the results page's
highlighting measured before and after, on the data directory bench_http_path.py builds):

    python bench/bench_browser.py --data-dir D --config C [--tree T] --query QuerySet --query 'def run' --no-peers

``--settle`` lets each page settle (its network idle for 500 ms: loaded, and what it fetches
after its load done) before the next search starts (a user reads the results first). Without it the next search starts the moment the first result shows, so a page that is
still being written when its first result shows (highlighted snippets drawn file after file) is
cut off, and what its server was still doing falls on the next page's time.

``--tree`` serves another checkout (an export of an older commit: before/after in one session);
``--query`` (repeatable) replaces the benchmark's queries by literals; ``--no-peers`` skips the API
and ripgrep columns (they need bench/.corpus).

A benchmark, not a test: it asserts only that every page showed a result.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_engine as be  # noqa: E402  (queries, corpus location, rg flags, machine info)
import bench_http_path as bhp  # noqa: E402  (the service as a process)

TARGET_MS = 150.0
SCALE = HERE / ".work" / "scale"

#: Installed before the page's own scripts, when the document is created: the moment the first
#: result appears in ``#results``, whoever puts it there (the HTML parser as the server writes the
#: results into the page, or a script), in ``performance.now()`` milliseconds since navigation start;
#: and (``--timeline``) the moment the empty ``#results`` list itself is parsed: how far the parser
#: had read before the first result's bytes.
OBSERVE = """
(() => {
  window.__bench = {first: null, container: null};
  const watch = new MutationObserver(() => {
    const results = document.getElementById("results");
    if (results && window.__bench.container === null) window.__bench.container = performance.now();
    if (results && results.children.length) {
      window.__bench.first = performance.now();
      watch.disconnect();
    }
  });
  watch.observe(document, {childList: true, subtree: true});
})();
"""


def rg_first_line(q: be.QueryCase, root: Path) -> float:
    """Seconds until ripgrep prints its first matching line (its pipe closed after it)."""
    cmd = " ".join(map(shlex_quote, [*be.RG_BASE, "-m1", *q.rg_args(), str(root)])) + " | head -n1"
    start = time.perf_counter()
    subprocess.run(["bash", "-c", cmd], env=be.rg_env(), stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def shlex_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def wait_first_result(page, query: str, timeout_s: float = 60.0) -> float:
    """The observer's time of the first result (polled: the page's CSP forbids the string
    evaluation `wait_for_function` needs; the poll does not change the recorded moment)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        first = page.evaluate("() => window.__bench && window.__bench.first")
        if first is not None:
            return float(first)
        time.sleep(0.005)
    raise SystemExit(f"{query!r}: no result on the page after {timeout_s:.0f} s")


#: Read after a load: Chromium's own timeline of it (navigation and resource timing, milliseconds
#: since the navigation started) and the observer's first result.
TIMELINE = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const out = {html_first_byte: nav.responseStart, html_end: nav.responseEnd,
               dom_interactive: nav.domInteractive, dcl_start: nav.domContentLoadedEventStart,
               dcl_end: nav.domContentLoadedEventEnd, results_list: window.__bench.container,
               first_result: window.__bench.first};
  for (const r of performance.getEntriesByType("resource")) {
    const name = r.name.replace(/^.*\\/(static\\/v-[^/]+\\/|api\\/)/, "");
    out[name] = [Math.round(r.startTime), Math.round(r.responseStart), Math.round(r.responseEnd),
                 r.transferSize ? "net" : "cache"];
  }
  for (const m of performance.getEntriesByType("mark")) out["mark " + m.name] = Math.round(m.startTime);
  return out;
}"""


#: Chromium's trace categories for ``--trace``: the renderer's tasks (parsing, script, style, layout).
TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "blink.user_timing",
                    "loading"]


def _trace_events(trace: bytes) -> tuple[list[dict], float, set]:
    """(events, the navigation's start in µs, the (pid, tid) of the page renderer's main thread)."""
    events = json.loads(trace)
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    # the first navigationStart is the page's (later ones, without a URL, are Chromium's own documents)
    nav = [e for e in events if e.get("name") == "navigationStart"]
    if not nav:
        raise SystemExit("no navigationStart in the trace")
    pid = nav[0]["pid"]
    main = {key for key, name in names.items() if name == "CrRendererMain" and key[0] == pid}
    return sorted(events, key=lambda e: e.get("ts", 0)), nav[0]["ts"], main


#: The steps of one load `trace_steps` times (ms since the navigation started, or a length in ms).
STEPS = ("commit", "teardown", "preloads", "first result")


def trace_steps(trace: bytes, first_ms: float) -> dict[str, float]:
    """One load's steps on the renderer's main thread: when the navigation's commit starts (the
    previous page's unload), how long the previous page's teardown takes (its frame deleted → the
    new one made), how long the head's subresources take to be fetched from the cache before the
    parser goes on (`MaybeFetchQueuedPreloads`), and the first result."""
    events, t0, main = _trace_events(trace)
    got: dict[str, float] = {"first result": first_ms}
    deleted = None
    for e in events:
        if (e.get("pid"), e.get("tid")) not in main:
            continue
        at = (e["ts"] - t0) / 1000
        if e["name"] == "unloadEventStart" and at > 5 and "commit" not in got:
            got["commit"] = at
        elif e["name"] == "FrameLoader:deleted" and at > 5 and deleted is None:
            deleted = at
        elif e["name"] == "markAsMainFrame" and deleted is not None and "teardown" not in got:
            got["teardown"] = at - deleted
        elif e["name"] == "HTMLDocumentParser::MaybeFetchQueuedPreloads" and at > 5 and e.get("dur", 0) \
                and "preloads" not in got:
            got["preloads"] = e["dur"] / 1000
    return got


def trace_summary(trace: bytes, first_ms: float, min_ms: float = 0.5) -> list[str]:
    """The main thread of the page's renderer during one load: each task of at least `min_ms` (its
    start in ms since the navigation started, its length, what it was), up to the first result
    (`first_ms`) and a little after; what the first result waited for is what ran before it."""
    events, t0, main = _trace_events(trace)
    out = []
    for e in events:
        if (e.get("pid"), e.get("tid")) not in main or e.get("ph") != "X":
            continue
        start, dur = (e["ts"] - t0) / 1000, e.get("dur", 0) / 1000
        if start < -5 or start > first_ms + 20 or dur < min_ms:
            continue
        out.append(f"  {start:7.1f} ms  {dur:6.1f} ms  {e['name']}")
    out.append(f"  {first_ms:7.1f} ms  first result")
    return out


def api_first_event(client, base: str, q: be.QueryCase) -> float:
    """Seconds until the first ``chunk`` event of ``/api/stream_search`` arrives (the page's request)."""
    query = q.cs_query
    body = {"query": query, "matches": 100, "contextLines": 1, "isRegexEnabled": q.is_regex,
            "isCaseSensitivityEnabled": q.case_sensitive}
    start = time.perf_counter()
    with client.stream("POST", f"{base}/api/stream_search", json=body, headers={"Accept": "text/event-stream"}) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("data:") and '"chunk"' in line:
                return time.perf_counter() - start
    raise SystemExit(f"{query!r}: the stream ended without a chunk")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repos", type=int, default=1000, help="which bench_scale.py data directory (default 1000)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--searchers", type=int, default=2)
    ap.add_argument("--tab", choices=("same", "new"), default="same",
                    help="same: every search in one tab, as a user searches again from the results page "
                         "(default); new: a fresh tab per search (adds Chromium's cost of opening a tab)")
    ap.add_argument("--timeline", action="store_true",
                    help="print Chromium's timeline of each load (navigation, each file, the first result)")
    ap.add_argument("--data-dir", type=Path, help="an indexed data directory (default: bench_scale.py's of --repos)")
    ap.add_argument("--config", type=Path, help="its config (with --data-dir)")
    ap.add_argument("--tree", type=Path, default=be.ROOT, help="the code tree to serve (default: this one)")
    ap.add_argument("--query", action="append", default=[], help="a literal query (repeatable) instead of the benchmark's")
    ap.add_argument("--no-peers", action="store_true", help="browser only: no API or ripgrep timings")
    ap.add_argument("--settle", action="store_true",
                    help="let each results page settle (network idle for 500 ms) before the next search (a user "
                         "who reads the results first); by default the next search starts at the first result")
    ap.add_argument("--trace", action="store_true",
                    help="trace every measured load in Chromium: print the first one's main-thread tasks up to "
                         "the first result, and the medians of each step (commit, the previous page's teardown, "
                         "the head's subresources, the first result) over all")
    args = ap.parse_args(argv)

    import httpx
    from playwright.sync_api import sync_playwright

    data_dir, config = SCALE / f"data-{args.repos}", SCALE / f"config-{args.repos}.json"
    if args.data_dir:
        data_dir, config = args.data_dir, args.config
    if not (data_dir / "index").is_dir():
        raise SystemExit(f"{data_dir} is not indexed: run python bench/bench_scale.py --repos {args.repos} first")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("chromium is missing: `make deps` installs it from Debian")
    queries = [q for q in be.QUERIES if q.selective and q.cls != "no-match literal"]  # a first result to wait for
    if args.query:
        queries = [be.QueryCase(f"literal {q!r}", q, False, False, selective=True) for q in args.query]

    service = bhp.Service("tree", args.tree, data_dir, config, args.searchers)
    times: dict[tuple[str, str], list[float]] = {}
    steps: dict[str, list[dict[str, float]]] = {}  # --trace: per query, each load's steps
    try:
        service.start()
        service.wait_serving(600)
        with httpx.Client(timeout=60) as client, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"])
            ctx = browser.new_context(viewport={"width": 1400, "height": 900})
            ctx.add_init_script(OBSERVE)
            tab = ctx.new_page() if args.tab == "same" else None
            for n in range(args.warmup + args.rounds):
                for q in queries:
                    page = tab or ctx.new_page()
                    params = {"q": q.cs_query, "regex": "true" if q.is_regex else "false",
                              "case": "true" if q.case_sensitive else "false"}
                    tracing = args.trace and n >= args.warmup
                    if tracing:
                        browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
                    page.goto(f"{service.base}/search?{urllib.parse.urlencode(params)}")
                    first = wait_first_result(page, q.cs_query)
                    if args.settle:  # the user reads the results before searching again
                        page.wait_for_load_state("networkidle")
                    if tracing:
                        time.sleep(0.3)
                        raw = browser.stop_tracing()
                        steps.setdefault(q.cls, []).append(trace_steps(raw, first))
                        if n == args.warmup:
                            saved = HERE / ".work" / f"trace-{len(steps)}.json"
                            saved.parent.mkdir(parents=True, exist_ok=True)
                            saved.write_bytes(raw)
                            lines = trace_summary(raw, first) + [f"  (the whole trace: {saved})"]
                            print(f"{q.cls}: the renderer's main thread\n" + "\n".join(lines), file=sys.stderr)
                    if args.timeline and n >= args.warmup:
                        time.sleep(0.3)  # the stream's end and late files land in the timeline
                        line = {k: (round(v) if isinstance(v, float) else v) for k, v in page.evaluate(TIMELINE).items()}
                        print(f"{q.cls}: {json.dumps(line)}", file=sys.stderr)
                    if tab is None:
                        page.close()
                    api = 0.0 if args.no_peers else api_first_event(client, service.base, q) * 1000
                    rg = 1.0 if args.no_peers else rg_first_line(q, be.CORPUS) * 1000
                    if n >= args.warmup:
                        for tool, value in (("browser", first), ("api", api), ("rg", rg)):
                            times.setdefault((q.cls, tool), []).append(value)
            browser.close()
    finally:
        service.stop(120)

    where = "one tab for every search" if args.tab == "same" else "a new tab per search"
    where += ", each page settled before the next search" if args.settle else ", the next search at the first result"
    print(f"\n### Time to first result in the browser ({args.repos} repositories, {args.rounds} rounds, {where})\n")
    print("\n".join(be.machine_info()))
    print()
    print("| query | browser p50 | browser p95 | API first event p50 | rg first line p50 | browser / rg | < 150 ms |")
    print("|---|---:|---:|---:|---:|---:|:---:|")
    for q in queries:
        b, a, r = (times[(q.cls, t)] for t in ("browser", "api", "rg"))
        b50, b95 = be.percentile(b, 50), be.percentile(b, 95)
        r50 = be.percentile(r, 50)
        print(f"| {q.cls} `{q.cs_query}` | {b50:.0f} ms | {b95:.0f} ms | {be.percentile(a, 50):.0f} ms | "
              f"{r50:.0f} ms | {b50 / r50:.2f} | {'yes' if b50 < TARGET_MS else 'NO'} |")
    if steps:
        print("\n| query (traced loads) | " + " | ".join(f"{s} p50 ms" for s in STEPS) + " |")
        print("|---|" + "---:|" * len(STEPS))
        for cls, loads in steps.items():
            cells = []
            for step in STEPS:
                values = [load[step] for load in loads if step in load]
                cells.append(f"{be.percentile(values, 50):.1f}" if values else "–")
            print(f"| {cls} ({len(loads)}) | " + " | ".join(cells) + " |")
    print(json.dumps({f"{k[0]}/{k[1]}": round(be.percentile(v, 50), 1) for k, v in times.items()}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
