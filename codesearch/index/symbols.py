"""Symbol definitions from universal-ctags, for `sym:` queries and ranking.

One long-lived ``ctags --_interactive`` process per build (the protocol Zoekt uses): each file
is sent as ``{"command":"generate-tags","filename":…,"size":N}`` followed by its bytes, and
ctags answers with JSON tag lines and a ``completed`` line. Files never touch the disk.

Each file has a time budget (`timeout_s`). A file that takes longer, makes ctags crash or
produces garbage is logged and gets no symbols; the process is restarted for the next file.
Symbols are a bonus: nothing here can fail an index build. Without universal-ctags on the
machine, every file simply has no symbols (one warning).

`SymbolExtractor` runs ctags on a background thread so that ctags (another process, another
core) works while the builder computes trigrams.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import selectors
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: Files larger than this are not sent to ctags (generated tables, minified code).
MAX_CTAGS_FILE = 1 << 20


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str
    line: int  # 1-based
    parent: str = ""
    parent_kind: str = ""


class CtagsError(RuntimeError):
    pass


def find_ctags() -> str | None:
    """The path of a universal-ctags with JSON and interactive support, or None."""
    exe = shutil.which("universal-ctags") or shutil.which("ctags")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--list-features"], capture_output=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    features = out.decode("utf-8", "replace")
    return exe if "json" in features and "interactive" in features else None


class CtagsProcess:
    """One ``ctags --_interactive`` process; `tags()` parses one file."""

    def __init__(self, exe: str, timeout_s: float = 5.0):
        self.exe = exe
        self.timeout_s = timeout_s
        self._proc: subprocess.Popen | None = None
        self._buf = b""

    def _start(self) -> None:
        self._proc = subprocess.Popen(
            [self.exe, "--_interactive=default", "--fields=NnKsZ", "--output-format=json", "--extras=-{anonymous}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._buf = b""
        os.set_blocking(self._proc.stdin.fileno(), False)
        os.set_blocking(self._proc.stdout.fileno(), False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._proc.stdout, selectors.EVENT_READ)
        first = self._exchange(b"", deadline=time.monotonic() + 10)
        if not first or first[0].get("_type") != "program":
            raise CtagsError("ctags did not start in interactive mode")

    def close(self) -> None:
        if self._proc is not None:
            self._sel.close()
            self._proc.kill()
            self._proc.wait()
            for f in (self._proc.stdin, self._proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            self._proc = None

    def _exchange(self, payload: bytes, deadline: float) -> list[dict]:
        """Send `payload`, read JSON lines up to a ``completed`` (or the program banner)."""
        proc, sel = self._proc, self._sel
        out: list[dict] = []
        view = memoryview(payload)
        if view:
            sel.register(proc.stdin, selectors.EVENT_WRITE)
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CtagsError(f"timed out after {self.timeout_s}s")
                for key, _ in sel.select(left):
                    if key.fileobj is proc.stdin:
                        n = os.write(proc.stdin.fileno(), view[:65536])
                        view = view[n:]
                        if not view:
                            sel.unregister(proc.stdin)
                        continue
                    chunk = os.read(proc.stdout.fileno(), 1 << 16)
                    if not chunk:
                        raise CtagsError("ctags exited")
                    lines = (self._buf + chunk).split(b"\n")
                    self._buf = lines.pop()  # an incomplete last line waits for more
                    for i, line in enumerate(lines):
                        if not line.strip():
                            continue
                        try:
                            msg = json.loads(line)
                        except ValueError:
                            raise CtagsError("unreadable output") from None
                        if msg.get("_type") in ("completed", "program"):
                            rest = lines[i + 1 :]
                            if rest:  # output after the answer (not expected): keep it in order
                                self._buf = b"\n".join(rest) + b"\n" + self._buf
                            return out if msg.get("_type") == "completed" else [msg]
                        out.append(msg)
        except OSError as e:
            raise CtagsError(f"pipe error: {e.strerror}") from None
        finally:
            if view:
                sel.unregister(proc.stdin)

    def tags(self, path: str, data: bytes) -> list[Symbol]:
        """The symbol definitions of one file; raises `CtagsError` (and restarts) on failure."""
        if self._proc is None:
            self._start()
        header = json.dumps({"command": "generate-tags", "filename": path, "size": len(data)}).encode()
        try:
            msgs = self._exchange(header + b"\n" + data, time.monotonic() + self.timeout_s)
        except CtagsError:
            self.close()
            raise
        syms = []
        for m in msgs:
            if m.get("_type") != "tag" or not m.get("name") or not isinstance(m.get("line"), int):
                continue
            scope = m.get("scope") or ""
            syms.append(Symbol(m["name"], m.get("kind") or "", m["line"], scope.rsplit(".", 1)[-1] if scope else "", m.get("scopeKind") or ""))
        return syms


class SymbolExtractor:
    """Runs ctags on background threads: `submit` files, then `collect` the symbols by key.

    Each worker thread owns one ctags process and waits on its pipes with the GIL released, so
    `workers` processes overlap their round trips with each other and with the caller's work.
    """

    _warned_missing = False

    def __init__(self, timeout_s: float = 5.0, enabled: bool = True, workers: int = 2):
        exe = find_ctags() if enabled else None
        if enabled and exe is None and not SymbolExtractor._warned_missing:
            log.warning("universal-ctags with JSON output not found: files get no symbols")
            SymbolExtractor._warned_missing = True
        self._exe, self._timeout_s = exe, timeout_s
        self._queue: queue.Queue = queue.Queue(maxsize=512)
        self._results: dict = {}
        self.failures = 0
        self._threads: list[threading.Thread] = []
        self._procs = [CtagsProcess(exe, timeout_s) for _ in range(workers)] if exe else []
        self._start()

    def _start(self) -> None:
        self._threads = [threading.Thread(target=self._run, args=(p,), name="ctags", daemon=True) for p in self._procs]
        for t in self._threads:
            t.start()

    def _stop(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join()
        self._threads = []

    def _run(self, ctags: CtagsProcess) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            key, path, data = item
            try:
                syms = ctags.tags(path, data)
            except CtagsError as e:
                self.failures += 1
                log.warning("ctags failed on %s: %s", path, e)
                continue
            except Exception as e:  # never let symbols fail a build
                self.failures += 1
                log.warning("ctags failed on %s: %s", path, type(e).__name__)
                continue
            if syms:
                self._results[key] = syms

    def submit(self, key, path: str, data: bytes) -> None:
        if self._threads and 0 < len(data) <= MAX_CTAGS_FILE:
            self._queue.put((key, path, data))

    def collect(self) -> dict:
        """Wait for every submitted file and return {key: [Symbol, ...]}; then start afresh."""
        if not self._threads:
            return {}
        self._stop()
        results, self._results = self._results, {}
        self._start()
        return results

    def close(self) -> None:
        self._stop()
        for p in self._procs:
            p.close()
        self._procs = []
