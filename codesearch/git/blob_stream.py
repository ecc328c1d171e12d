"""Blobs in the order an index build reads them: one ``git cat-file --batch`` sent every name at once.

An index build reads a repository's blobs one after the other, in the order of its listing.
Asked one at a time (`objects.ObjectBatch`), each request waits for git's answer before the next
is written: a write, a flush and three reads per blob, and git and the reader woken up in turn
for each (a fifth of an indexer's wall time at 10 GB went to those waits). Here a thread writes
every name up front; git answers them one after another into the pipe, and the reader takes the
answers as they come.

`read(sha)` returns the next answer when it is for `sha`. Answers for blobs the caller passed
over (a file the build leaves out after all) are read and dropped. A name that is not among
those still ahead (asked out of order, or never sent) is None: the caller reads it another way
(an `ObjectBatch`). git runs as a `process.Stream`, under the same policy as every git process of
codesearch (sealed environment, its own session, stderr to a file); with no time limit of its
own, like the reader it replaces: the index job's limit bounds it.
"""

from __future__ import annotations

import collections
import contextlib
import math
import threading
from collections.abc import Sequence

from codesearch.errors import CodesearchError
from codesearch.git.process import Git, GitFailed

#: the Python buffer of git's stdout (one read for most blobs)
_BUFSIZE = 64 * 1024
#: the longest answer header: a SHA-256 name, a type and a size
_HEADER_MAX = 200


class BlobStream:
    """The blobs `shas` (hex names, in the order they will be read) of the repository at `git_dir`."""

    def __init__(self, git_dir: str, shas: Sequence[str]):
        self._ahead = collections.deque(shas)
        self._left = collections.Counter(shas)
        self._stream = Git.at(git_dir, timeout_s=math.inf).stream(
            ["cat-file", "--batch", "--buffer"], stdin=True, bufsize=_BUFSIZE
        )
        names = "".join(f"{sha}\n" for sha in shas).encode("ascii", "replace")
        self._writer = threading.Thread(target=self._send, args=(names,), name="cat-file-names", daemon=True)
        self._writer.start()

    def _send(self, names: bytes) -> None:
        """Write every name, then close git's stdin (git ends after its last answer)."""
        stdin = self._stream.proc.stdin
        assert stdin is not None  # started with stdin=True
        with contextlib.suppress(OSError, ValueError):  # git stopped reading (killed, or closed): the reader finds out
            for i in range(0, len(names), _BUFSIZE):
                stdin.write(names[i : i + _BUFSIZE])
            stdin.close()

    def read(self, sha: str) -> bytes | None:
        """The content of the blob `sha` when it is among the names still ahead (the answers
        before it are dropped), else None. A CodesearchError when git has no such blob; a
        `GitFailed` when git stopped answering."""
        if not self._left.get(sha):
            return None
        while True:
            name = self._ahead.popleft()
            self._left[name] -= 1
            data = self._answer(name)
            if name == sha:
                if data is None:
                    raise CodesearchError(f"blob {sha} is missing from the repository")
                return data

    def _answer(self, name: str) -> bytes | None:
        """git's next answer, for `name`: the blob's content, or None when git has no blob of that name."""
        out = self._stream.out
        got = out.until(b"\n", _HEADER_MAX)
        if got is None or got[1]:
            raise self._ended()
        fields = got[0].split()
        if len(fields) == 2 and fields[1] in (b"missing", b"ambiguous"):
            return None
        if len(fields) != 3 or fields[0] != name.encode() or not fields[2].isdigit():
            raise self._ended()
        size = int(fields[2])
        data = out.take(size + 1)  # the content and git's newline after it
        if len(data) != size + 1:
            raise self._ended()
        return data[:size] if fields[1] == b"blob" else None

    def _ended(self) -> GitFailed:
        """git's error, once it stopped answering where an answer was due (or answered out of turn)."""
        self._stream.finish(stop=True)
        return self._stream.failed()

    def close(self) -> None:
        """Stop git (it may have answers left that nobody asked for) and the writer."""
        with contextlib.suppress(GitFailed):
            self._stream.__exit__(None, None, None)
        self._writer.join()

    def __enter__(self) -> BlobStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
