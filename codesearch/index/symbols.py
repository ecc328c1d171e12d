"""Symbol definitions from universal-ctags, for `sym:` queries and ranking.

Two ways to run ctags, the fast one first:

* Batch (`ctags_batch`): a few megabytes of files are written to a scratch directory (tmpfs
  when the machine has one) and one ``ctags -x`` run tags them all, printing one tab-separated
  line per tag. One process start and one pass per batch: about half the CPU of the
  per-file protocol, and lines cheaper to read than JSON.
* Per file (`CtagsProcess`): one long-lived ``ctags --_interactive`` process (the protocol
  Zoekt uses); each file is sent as ``{"command":"generate-tags","filename":…,"size":N}``
  followed by its bytes and ctags answers with JSON tag lines and a ``completed`` line. Each
  file has a time budget (`timeout_s`); a file that takes longer, crashes ctags or produces
  garbage is logged and gets no symbols, and the process is restarted for the next file.

A batch that fails (ctags crashes, or runs past its time budget) is redone file by file, so a
single pathological file costs only its own symbols. Symbols are a bonus: nothing here can
fail an index build. Without universal-ctags on the machine, every file simply has no symbols
(one warning).

`SymbolExtractor` runs batches on a background thread so that ctags (another process, another
core) works while the builder computes trigrams.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import selectors
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any, NamedTuple

log = logging.getLogger(__name__)

#: Files larger than this are not sent to ctags (generated tables, minified code).
MAX_CTAGS_FILE = 1 << 20


class Symbol(NamedTuple):
    """One definition ctags found. A named tuple: a build makes one per tag (1.5 million for
    1 GB), and a frozen dataclass took twice as long to make (0.90 against 0.42 µs)."""

    name: str
    kind: str
    line: int  # 1-based
    parent: str = ""
    parent_kind: str = ""


class CtagsError(RuntimeError):
    pass


class BatchTimedOut(CtagsError):
    """A batch ran past its time budget. `done` holds the symbols of the files ctags finished
    before it was stopped (it tags them in list order, smallest first); `rest` the files still
    to tag, the one it was stopped on first."""

    def __init__(self, message: str, done: dict[int, list[Symbol]], rest: list[tuple[int, str, bytes]]):
        super().__init__(message)
        self.done, self.rest = done, rest


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
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self._sel: selectors.BaseSelector  # with the process (`_start`)

    def _start(self) -> subprocess.Popen[bytes]:
        proc = self._proc = subprocess.Popen(
            [self.exe, "--_interactive=default", "--fields=NnKsZ", "--output-format=json", "--extras=-{anonymous}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None and proc.stdout is not None  # both are pipes
        self._buf = b""
        os.set_blocking(proc.stdin.fileno(), False)
        os.set_blocking(proc.stdout.fileno(), False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(proc.stdout, selectors.EVENT_READ)
        first = self._exchange(proc, b"", deadline=time.monotonic() + 10)
        if not first or first[0].get("_type") != "program":
            raise CtagsError("ctags did not start in interactive mode")
        return proc

    def close(self) -> None:
        if self._proc is not None:
            self._sel.close()
            self._proc.kill()
            self._proc.wait()
            for f in (self._proc.stdin, self._proc.stdout):
                with contextlib.suppress(OSError):
                    if f is not None:
                        f.close()
            self._proc = None

    def _exchange(self, proc: subprocess.Popen[bytes], payload: bytes, deadline: float) -> list[dict[str, Any]]:
        """Send `payload`, read JSON lines up to a ``completed`` (or the program banner)."""
        sel, stdin, stdout = self._sel, proc.stdin, proc.stdout
        assert stdin is not None and stdout is not None  # both are pipes (`_start`)
        out: list[dict[str, Any]] = []
        view = memoryview(payload)
        if view:
            sel.register(stdin, selectors.EVENT_WRITE)
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CtagsError(f"timed out after {self.timeout_s}s")
                for key, _ in sel.select(left):
                    if key.fileobj is stdin:
                        n = os.write(stdin.fileno(), view[:65536])
                        view = view[n:]
                        if not view:
                            sel.unregister(stdin)
                        continue
                    chunk = os.read(stdout.fileno(), 1 << 16)
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
                sel.unregister(stdin)

    def tags(self, path: str, data: bytes) -> list[Symbol]:
        """The symbol definitions of one file; raises `CtagsError` (and restarts) on failure."""
        proc = self._start() if self._proc is None else self._proc
        header = json.dumps({"command": "generate-tags", "filename": path, "size": len(data)}).encode()
        try:
            msgs = self._exchange(proc, header + b"\n" + data, time.monotonic() + self.timeout_s)
        except CtagsError:
            self.close()
            raise
        syms = []
        for m in msgs:
            if m.get("_type") != "tag" or not m.get("name") or not isinstance(m.get("line"), int):
                continue
            scope = m.get("scope") or ""
            syms.append(
                Symbol(
                    m["name"],
                    m.get("kind") or "",
                    m["line"],
                    scope.rsplit(".", 1)[-1] if scope else "",
                    m.get("scopeKind") or "",
                )
            )
        return syms


#: Fields of one tag line of the batch run: file, line, kind, name, scope, scope kind.
_XFORMAT = "%F\t%n\t%K\t%N\t%s\t%{scopeKind}"
#: Seconds a batch may take beyond this many bytes per second of input.
_BATCH_MIN_RATE = 2e6


def _scratch_root() -> str | None:
    """tmpfs when there is one: batch files are written, read once and removed."""
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def ctags_batch(exe: str, files: list[tuple[int, str, bytes]], timeout_s: float) -> dict[int, list[Symbol]]:
    """Tag many files with one ctags run: {key: [Symbol, ...]}; raises `CtagsError` on failure,
    `BatchTimedOut` (with what was finished) when the run takes longer than its budget.

    Each file is written under its own name (ctags picks a parser by it) in folder ``0``, or in
    folder ``n`` when n files of the batch had that name before it: a folder per file cost as
    much again as writing the file. ctags writes each file's tags to a tag file as it goes
    (``--sort=no``; to standard output it writes only at the end), in the list's order, so the
    output of a run stopped on a slow file still holds every file before it (a Pascal file of 1 MB
    takes ctags 25 s: redoing the whole batch file by file cost more than the batch). Files go
    smallest first, so that what is left after a slow one is a few big files. The output is
    decoded once, then split."""
    # smallest first: ctags's slow cases are big files, so a run stopped on one has finished the rest
    files = sorted(files, key=lambda f: len(f[2]))
    tmp = tempfile.mkdtemp(prefix="codesearch-ctags-", dir=_scratch_root())
    try:
        names: list[str] = []
        seen: dict[str, int] = {}
        for _key, path, data in files:
            name = path.rsplit("/", 1)[-1]
            slot = seen.get(name, 0)
            seen[name] = slot + 1
            rel = f"{slot}/{name}"
            target = os.path.join(tmp, rel)
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileNotFoundError:  # the first file of this folder
                os.mkdir(os.path.join(tmp, str(slot)))
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            names.append(rel)
        with open(os.path.join(tmp, ".list"), "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write("\n".join(names) + "\n")
        budget = timeout_s + sum(len(d) for _, _, d in files) / _BATCH_MIN_RATE
        position = {rel: i for i, rel in enumerate(names)}
        try:
            proc = subprocess.run(
                [exe, "--output-format=xref", f"--_xformat={_XFORMAT}", "--sort=no", "--extras=-{anonymous}"]
                + ["-f", ".tags", "-L", ".list"],
                cwd=tmp,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=budget,
            )
        except subprocess.TimeoutExpired:
            out = _read(os.path.join(tmp, ".tags"))
            complete = out[: out.rfind(b"\n") + 1]  # the last line may be cut short
            tags = _parse_xref(complete, position)
            last = max(tags, default=-1)  # the last file with tags may be unfinished: it is redone
            done = {files[i][0]: syms for i, syms in tags.items() if i < last}
            rest = files[max(last, 0) :]
            raise BatchTimedOut(
                f"batch of {len(files)} files timed out after {budget:.0f}s ({len(rest)} left)", done, rest
            ) from None
        except OSError as e:
            raise CtagsError(f"cannot run ctags: {e.strerror}") from None
        if proc.returncode != 0:
            raise CtagsError(f"batch exited with status {proc.returncode}")
        out = _read(os.path.join(tmp, ".tags"))
        return {files[i][0]: syms for i, syms in _parse_xref(out, position).items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read(path: str) -> bytes:
    """The tag file of a batch run (nothing when ctags was stopped before it made one)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def _parse_xref(out: bytes, position: dict[str, int]) -> dict[int, list[Symbol]]:
    """The tag lines of a batch run, by the position of their file in the batch's list."""
    tags: dict[int, list[Symbol]] = {}
    # file names as the list spelled them (undecodable bytes as surrogates, as os.scandir
    # gives them); the tag's own fields as valid text (an undecodable byte as U+FFFD)
    for line in out.decode("utf-8", "surrogateescape").split("\n"):
        parts = line.split("\t")
        if len(parts) != 6 or parts[0] not in position or not (parts[1].isascii() and parts[1].isdigit()):
            continue  # a name with a tab, or noise: drop the tag, never the file
        kind, name, scope, scope_kind = parts[2:] if line.isascii() else map(_valid, parts[2:])
        tags.setdefault(position[parts[0]], []).append(
            Symbol(name, kind, int(parts[1]), scope.rsplit(".", 1)[-1], scope_kind)
        )
    return tags


def _valid(text: str) -> str:
    """`text` decoded with surrogates for undecodable bytes, with U+FFFD for them instead."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _batchable(path: str) -> bool:
    """File names the batch list can carry as they are (one per line, no surrounding space)."""
    name = path.rsplit("/", 1)[-1]
    return bool(name) and name == name.strip() and not any(c in name for c in "\n\r\t") and name not in (".", "..")


class SymbolExtractor:
    """Runs ctags on a background thread: `submit` files, then `collect` the symbols by key."""

    _warned_missing = False
    #: Bytes of content per ctags batch.
    BATCH_BYTES = 8 << 20

    def __init__(self, timeout_s: float = 5.0, enabled: bool = True):
        exe = find_ctags() if enabled else None
        if enabled and exe is None and not SymbolExtractor._warned_missing:
            log.warning("universal-ctags with JSON output not found: files get no symbols")
            SymbolExtractor._warned_missing = True
        self._exe, self._timeout_s = exe, timeout_s
        self._queue: queue.Queue[tuple[str, list[tuple[int, str, bytes]]] | None] = queue.Queue(maxsize=4)
        self._results: dict[int, list[Symbol]] = {}
        self._pending: list[tuple[int, str, bytes]] = []
        self._pending_bytes = 0
        self._per_file: CtagsProcess | None = None
        self.failures = 0
        self._thread: threading.Thread | None = None
        self._start()

    def _start(self) -> None:
        if self._exe is not None:
            self._thread = threading.Thread(target=self._run, name="ctags", daemon=True)
            self._thread.start()

    def _stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        assert self._exe is not None  # the thread runs only with ctags (`_start`)
        while True:
            item = self._queue.get()
            if item is None:
                return
            mode, batch = item
            if mode == "one":
                for one in batch:
                    self._one(*one)
                continue
            try:
                self._results.update(ctags_batch(self._exe, batch, self._timeout_s))
            except BatchTimedOut as e:  # keep what it finished; the rest one by one, each with its own budget
                log.warning("ctags %s; tagging those one by one", e)
                self._results.update(e.done)
                for one in e.rest:
                    self._one(*one)
            except CtagsError as e:
                log.warning("ctags %s; retrying its files one by one", e)
                for one in batch:
                    self._one(*one)
            except Exception as e:  # never let symbols fail a build
                self.failures += len(batch)
                log.warning("ctags batch failed: %s", type(e).__name__)

    def _one(self, key: int, path: str, data: bytes) -> None:
        """Tag one file with the per-file protocol and its timeout."""
        assert self._exe is not None  # called from the thread only (`_run`)
        if self._per_file is None:
            self._per_file = CtagsProcess(self._exe, self._timeout_s)
        try:
            syms = self._per_file.tags(path, data)
        except Exception as e:  # CtagsError, or anything unexpected: never fatal
            self.failures += 1
            log.warning("ctags failed on %s: %s", path, e if isinstance(e, CtagsError) else type(e).__name__)
            return
        if syms:
            self._results[key] = syms

    def _flush(self) -> None:
        if self._pending:
            self._queue.put(("batch", self._pending))
            self._pending, self._pending_bytes = [], 0

    def submit(self, key: int, path: str, data: bytes) -> None:
        if self._thread is None or not 0 < len(data) <= MAX_CTAGS_FILE:
            return
        if not _batchable(path):  # a name the batch list cannot carry: tag it on its own
            self._queue.put(("one", [(key, path, data)]))
            return
        self._pending.append((key, path, data))
        self._pending_bytes += len(data)
        if self._pending_bytes >= self.BATCH_BYTES:
            self._flush()

    def collect(self) -> dict[int, list[Symbol]]:
        """Wait for every submitted file and return {key: [Symbol, ...]}; then start afresh."""
        if self._thread is None:
            return {}
        self._flush()
        self._stop()
        results, self._results = self._results, {}
        self._start()
        return results

    def close(self) -> None:
        self._pending, self._pending_bytes = [], 0
        self._stop()
        if self._per_file is not None:
            self._per_file.close()
            self._per_file = None
