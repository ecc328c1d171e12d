"""The search tools the engine is measured beside: `csearch` (over `cindex`'s index) and `rg`.

Queries mean the same thing in every tool. `csearch` takes one RE2 regular expression (Go's
regexp, the syntax the engine uses): a literal is escaped, ``-i`` makes it case-insensitive, and
a ``file:`` filter becomes ``-f REGEXP``, which csearch matches against the file's full path
(the engine's against the path inside the repository: the same files for a filter anchored at the
end, like ``\\.h$``). Every run is a new process whose whole output is read from a pipe; "capped"
pipes it into ``head -n 100`` (the tool stops on SIGPIPE), the counterpart of the engine's cap
of 100 matches.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import re2

from builds import cindex_env


def csearch_args(q) -> list[str]:
    args = [] if q.case_sensitive else ["-i"]
    if q.file_regex:
        args += ["-f", q.file_regex]
    return args + [q.pattern if q.is_regex else re2.escape(q.pattern)]


def _pipe_head(cmd: list[str], env: dict | None, cwd: Path | None) -> int:
    """Lines of ``cmd | head -n 100``."""
    first = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    head = subprocess.Popen(["head", "-n", "100"], stdin=first.stdout, stdout=subprocess.PIPE)
    first.stdout.close()  # head owns the read end: the tool gets SIGPIPE when head exits
    out = head.communicate()[0]
    first.wait()
    return out.count(b"\n")


def make_csearch_runner(index_file: Path, corpus_root: Path):
    """run(q, mode): mode "full" (lines), "capped" (lines of `| head -n 100`) or "files" (the
    set of matching files, relative to `corpus_root`)."""
    env = cindex_env(index_file)
    prefix = str(corpus_root).rstrip("/") + "/"

    def run(q, mode: str):
        cmd = ["csearch"] + (["-l"] if mode == "files" else ["-n"]) + csearch_args(q)
        if mode == "capped":
            return _pipe_head(cmd, env, None)
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if mode == "files":
            lines = p.stdout.decode("utf-8", "surrogateescape").splitlines()
            return {line.removeprefix(prefix) for line in lines}
        return p.stdout.count(b"\n")

    return run


def csearch_version() -> str:
    """csearch has no --version: the Debian package's."""
    try:
        v = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "codesearch"], capture_output=True,
                           text=True).stdout.strip()
    except OSError:
        v = ""
    return f"codesearch (Debian package) {v}" if v else "csearch (version unknown)"
