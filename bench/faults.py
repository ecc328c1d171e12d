"""The whole fault matrix (issue 30): every kind of process killed with SIGKILL at every moment
(during a first sync, a re-index, right after one when the compactor merges, under search load),
against one running ``codesearch serve``; prints the table for bench/RESULTS.md.

``make test`` runs `tests/runtime/test_process_deaths.py` with one moment per kind; this runs the
same test with ``CODESEARCH_FAULTS_FULL=1`` (every kind × every moment, the runtime replica last),
bounded: every wait in the test has its own limit, and the run as a whole gets `TIMEOUT_S`.

    python bench/faults.py            # about 40 kills; 20-40 minutes on 2 busy cores
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 3600
#: The whole pytest output of the last run (the table shows only the kills; a failure is read here).
LOG = Path(tempfile.gettempdir()) / "codesearch-faults.log"
LINE = re.compile(r"FAULT (.*)$", re.M)  # (pytest -s writes its progress dot before a line)


def main() -> int:
    env = {**os.environ, "CODESEARCH_FAULTS_FULL": "1", "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-s", "-q", "-p", "no:cacheprovider", "tests/runtime/test_process_deaths.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    LOG.write_text(out.stdout + "\n" + out.stderr)
    rows = LINE.findall(out.stdout)
    print("| process | moment | whole again after (s) | load clients' answers meanwhile | pid → new pid |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row} |")
    tail = out.stdout.strip().splitlines()[-1:] if out.stdout.strip() else []
    print(f"\n{len(rows)} kills in {time.monotonic() - started:.0f} s; pytest: {' '.join(tail)}")
    if out.returncode:
        print(out.stdout[-4000:], out.stderr[-2000:], f"\nthe whole output: {LOG}", file=sys.stderr)
    return out.returncode


if __name__ == "__main__":
    raise SystemExit(main())
