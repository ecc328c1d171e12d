"""Index builds timed as whole processes: ours (with and without ctags) and Google's `cindex`.

Each build is one child process started and waited for here, so its wall time includes start-up
(Python and imports for ours, next to nothing for `cindex`) and its CPU time is that of the
child and every process under it (our worker processes and ctags), sampled from /proc
(`TreeCPU`). The two tools then compare as a user runs them.

Our build runs `index_paths` with the default `IndexSettings` (``ctags`` switched as asked), on
every core and compacted as ``codesearch index`` does by default, in a child Python (the codesearch of this tree first on its PYTHONPATH) and prints its `IndexStats` as JSON: the same work as ``codesearch index``, plus the
exact postings size the command line rounds to two decimals.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ENGINE_BUILD = """
import json, sys
from codesearch.index.parallel import default_jobs
from codesearch.index.builder import IndexSettings
from codesearch.index.paths import index_paths
out, ctags, paths = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
settings = IndexSettings()
settings.ctags = ctags
st = index_paths(paths, out, settings, compact=True, jobs=default_jobs())
print(json.dumps({"input_bytes": st.input_bytes, "files": st.files, "skipped": st.skipped,
                  "shards": len(st.shards), "postings_bytes": st.postings_bytes,
                  "total_bytes": st.total_bytes, "seconds": st.seconds, "warnings": len(st.warnings)}))
"""


@dataclass
class Build:
    what: str
    wall: float  # seconds
    cpu: float  # user + system seconds of the process and its waited-for children
    size: int  # bytes on disk of what it wrote
    stats: dict = field(default_factory=dict)  # ours: IndexStats as JSON

    def mb_per_s(self, corpus_bytes: int) -> float:
        return corpus_bytes / 1e6 / self.wall


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid → (parent pid, own user + system CPU seconds) of every process now alive."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        out[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK)
    return out


class TreeCPU:
    """The CPU time of a process and all its descendants, however they are reaped.

    ``getrusage(RUSAGE_CHILDREN)`` only counts descendants whose every ancestor up to us waited
    for them: the workers of a ``forkserver`` pool are children of the fork server, which the
    build's process never waits for, so their CPU would be lost. Instead a thread samples
    /proc every `interval` seconds and keeps, per process of the tree, the last own
    user + system time it saw; a process that ends between two samples loses at most one
    interval of its time. A sample reads every /proc/PID/stat: about 1 ms, 2% of a core.
    """

    def __init__(self, pid: int, interval: float = 0.05):
        import threading

        self.root, self.interval = pid, interval
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        table = _proc_table()
        tree = {self.root}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, _cpu) in table.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree:
            if pid in table:
                self.seen[pid] = table[pid][1]

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return sum(self.seen.values())


def timed(cmd: list[str], *, env: dict | None = None, cwd: Path | None = None) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process tree (`TreeCPU`), stdout) of one process;
    stderr is shown on failure."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cpu_of = TreeCPU(p.pid)
    stdout, stderr = p.communicate()
    wall = time.perf_counter() - t0
    cpu = cpu_of.stop()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} … exited {p.returncode}: {stderr[-2000:]}")
    return wall, cpu, stdout


def dir_bytes(path: Path) -> int:
    total = 0
    for dirpath, _d, filenames in os.walk(path):
        for fn in filenames:
            total += os.path.getsize(os.path.join(dirpath, fn))
    return total


def build_engine(paths: list[Path], out: Path, ctags: bool) -> Build:
    """Our index of `paths` (one repository each) in `out`, wiped first."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    wall, cpu, stdout = timed([sys.executable, "-c", ENGINE_BUILD, str(out), "1" if ctags else "0",
                               *map(str, paths)], cwd=ROOT, env=env)
    stats = json.loads(stdout.strip().splitlines()[-1])
    return Build(f"codesearch {'with' if ctags else 'without'} ctags", wall, cpu, dir_bytes(out), stats)


def cindex_env(index_file: Path) -> dict:
    return {**os.environ, "CSEARCHINDEX": str(index_file)}


def build_cindex(paths: list[Path], index_file: Path) -> Build:
    """`cindex -reset` then `cindex PATHS` (the index file named by $CSEARCHINDEX). The reset is
    not timed: it only removes the old file."""
    index_file.parent.mkdir(parents=True, exist_ok=True)
    env = cindex_env(index_file)
    subprocess.run(["cindex", "-reset"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    index_file.unlink(missing_ok=True)
    wall, cpu, _ = timed(["cindex", *map(str, paths)], env=env)
    return Build("cindex", wall, cpu, index_file.stat().st_size)
