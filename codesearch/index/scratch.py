"""Build folders: where a build writes its shard files until the manifest swap moves them in.

A build writes into ``<index dir>/.build-<generation>-<random>/`` (`open_build_dir`), never into
the index directory itself, so no reader and no garbage collection sees a half-written shard.
The folder holds a file ``.held`` on which the building process keeps an exclusive ``flock`` for
as long as the folder lives; the kernel drops the lock when the process dies, however it dies.
That is how `sweep` (run by the compactor on every pass) tells the folder of a build whose process
was killed from the folder of one still running: it deletes a folder only when it can take the
lock itself. ``.held`` appears already locked (it is locked under a temporary name, then renamed),
so a sweep never takes the lock of a build that is starting. A folder without ``.held`` (being
created, or left by a codesearch before this one) is deleted only once it is older than
`UNHELD_MAX_AGE_S`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import threading
import time

PREFIX = ".build-"
HELD = ".held"
#: Seconds after which a build folder without ``.held`` is taken for an abandoned one.
UNHELD_MAX_AGE_S = 24 * 3600.0

#: The lock of each folder this process opened: its path -> the locked descriptor.
_held: dict[str, int] = {}
_guard = threading.Lock()


def open_build_dir(index_dir: str, generation: int) -> str:
    """A new build folder in `index_dir`, held by this process until `remove_build_dir`."""
    path = tempfile.mkdtemp(prefix=f"{PREFIX}{generation}-", dir=index_dir)
    fd, tmp = tempfile.mkstemp(prefix=".holding-", dir=path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(tmp, os.path.join(path, HELD))
    except BaseException:
        os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        raise
    with _guard:
        _held[path] = fd
    return path


def remove_build_dir(path: str) -> None:
    """Delete a folder of `open_build_dir` (whatever is still in it) and let go of its lock."""
    shutil.rmtree(path, ignore_errors=True)
    with _guard:
        fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)


def sweep(index_dir: str, now: float | None = None) -> list[str]:
    """Delete the build folders of `index_dir` whose process is gone (their lock is free), and
    those without a lock file older than `UNHELD_MAX_AGE_S`; returns their names."""
    now = time.time() if now is None else now
    gone: list[str] = []
    for name in os.listdir(index_dir):
        path = os.path.join(index_dir, name)
        if not name.startswith(PREFIX) or not os.path.isdir(path):
            continue
        try:
            fd = os.open(os.path.join(path, HELD), os.O_RDWR)
        except FileNotFoundError:
            try:
                abandoned = now - os.stat(path).st_mtime > UNHELD_MAX_AGE_S
            except FileNotFoundError:
                continue
            if abandoned:
                shutil.rmtree(path, ignore_errors=True)
                gone.append(name)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # a build under way
        try:
            shutil.rmtree(path, ignore_errors=True)
            gone.append(name)
        finally:
            os.close(fd)
    return gone
