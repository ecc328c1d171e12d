"""How long `codesearch serve` takes to start and to stop, phase by phase, on the offline demo.

    python bench/bench_serve_start.py [--runs 5] [--against DIR]

Each run starts ``codesearch serve --no-dashboard --port <free>`` on a fresh data directory (the
offline demo: no config given), as a process of its own session, and notes when, counted from the
command's start:

* ``ray``: its log says Ray started (``ray: started``);
* ``serve``: Serve's controller is up (``Started Serve``);
* ``http``: ``GET /api/health`` first answers 200 (the application's replicas are ready: the
  runtime replica has started the scheduler, the workers, the compactor and the searchers);
* ``synced``: the log says every connection synced and every repository indexed;

then sends SIGTERM and times the exit (``stop``). With ``--against DIR`` (a checkout of another
commit, e.g. ``git worktree add DIR COMMIT``) the runs alternate between that tree and this one
(the tree goes first on ``PYTHONPATH``), so both see the same machine; the table gives medians per
tree and this tree's ratio. Run it on an otherwise idle machine: process starts are CPU work.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "bench"))

from bench_service import free_port  # noqa: E402  (as bench_scale.py takes it)

PHASES = ("ray", "serve", "http", "synced", "stop")
MARKS = {
    "ray": re.compile(r"^ray: started", re.M),
    "serve": re.compile(r"Started Serve in namespace"),
    "synced": re.compile(r"first sync: (\d+)/\1 connections synced, (\d+)/\2 repositories indexed"),
}
POLL_S = 0.05
TIMEOUT_S = 300.0


def one_start(tree: Path) -> dict[str, float]:
    """One start and stop of `codesearch serve` from `tree`: seconds per phase (see the module)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="serve-start-") as data:
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "DATA_DIR": data,
               "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        for name in ("RAY_ADDRESS", "FORCE_ENABLE_ANONYMOUS_ACCESS"):
            env.pop(name, None)
        log_path = Path(data) / "serve.log"
        with open(log_path, "w") as log:
            t0 = time.monotonic()
            argv = [sys.executable, "-m", "codesearch.cli", "serve", "--port", str(port), "--no-dashboard"]
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=data, start_new_session=True
            )
            got: dict[str, float] = {}
            try:
                while len(got) < 4:
                    if proc.poll() is not None:
                        raise RuntimeError(f"codesearch serve exited early:\n{log_path.read_text()[-2000:]}")
                    if time.monotonic() - t0 > TIMEOUT_S:
                        raise RuntimeError(f"not started in {TIMEOUT_S:.0f} s:\n{log_path.read_text()[-2000:]}")
                    now, text = time.monotonic() - t0, log_path.read_text()
                    for phase, pattern in MARKS.items():
                        if phase not in got and pattern.search(text):
                            got[phase] = now
                    if "http" not in got:
                        try:
                            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                                got["http"] = time.monotonic() - t0
                        except httpx.TransportError:
                            pass
                    time.sleep(POLL_S)
                t1 = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=120)
                got["stop"] = time.monotonic() - t1
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="starts per tree (default 5)")
    ap.add_argument("--against", type=Path, help="another tree (checkout) to run alternately with this one")
    args = ap.parse_args()
    trees = [("this tree", HERE)] + ([(f"against {args.against}", args.against.resolve())] if args.against else [])
    times: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    for run in range(args.runs):
        for name, tree in trees if run % 2 == 0 else list(reversed(trees)):
            got = one_start(tree)
            times[name].append(got)
            print(f"  run {run + 1} {name}: " + ", ".join(f"{p} {got[p]:.1f}" for p in PHASES), flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}\n")
    print("| tree | " + " | ".join(f"{p} s" for p in PHASES) + " |")
    print("|---|" + "---:|" * len(PHASES))
    medians = {name: {p: statistics.median(g[p] for g in runs) for p in PHASES} for name, runs in times.items()}
    for name, m in medians.items():
        print(f"| {name} | " + " | ".join(f"{m[p]:.1f}" for p in PHASES) + " |")
    if args.against:
        mine, other = medians["this tree"], medians[f"against {args.against}"]
        print("| this ÷ against | " + " | ".join(f"{mine[p] / other[p]:.2f}" for p in PHASES) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
