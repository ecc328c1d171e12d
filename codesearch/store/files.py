"""The data directory is private: the directory 0700, the files we create in it 0600.

The data directory holds the state database (users, password hashes, API key hashes, sessions)
and the server secret, so nobody but the service's own user may read it. Two rules:

* `private_dir` creates the data directory with mode 0700, and tightens an existing one whose
  group or others could read, write or enter it (made by an older release, or by hand);
* `private_file` creates a file with mode 0600 *before* anyone writes to it (so it is never
  readable for a moment), and tightens an existing one. SQLite creates its ``-wal`` and
  ``-shm`` files with the mode of the database file, so a 0600 database gets 0600 companions;
  `tighten_sqlite` fixes companions an older release left behind.

Mirrors and index files may keep the modes git and the index writer give them: the 0700
directory above them already keeps everyone else out. Neither function depends on the umask.
Tightening is logged as a warning (once per file, when it happens), naming the file for the
operator's log; nothing here ever reaches an API answer.
"""

from __future__ import annotations

import logging
import os
import stat

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def _tighten(path: str, mode: int) -> None:
    """chmod `path` to `mode` when its group/other bits allow more (no-op when absent)."""
    try:
        current = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    if current & 0o077:
        log.warning("%s was accessible to other users (mode %o): restricting it to %o", path, current, mode)
        os.chmod(path, mode)


def private_dir(path: str | os.PathLike[str]) -> str:
    """Create directory `path` (and missing parents) with the leaf 0700, or tighten it; its
    absolute path."""
    path = os.path.abspath(os.fspath(path))
    try:
        os.makedirs(path, mode=DIR_MODE)
        os.chmod(path, DIR_MODE)  # makedirs' mode went through the umask
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        _tighten(path, DIR_MODE)
    return path


def private_file(path: str | os.PathLike[str]) -> str:
    """Create empty file `path` with mode 0600 unless it exists, then make sure it is 0600."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        _tighten(path, FILE_MODE)
    else:
        try:
            os.fchmod(fd, FILE_MODE)  # O_CREAT's mode went through the umask
        finally:
            os.close(fd)
    return path


def tighten_sqlite(db_path: str | os.PathLike[str]) -> None:
    """A SQLite database file and its companions (``-wal``, ``-shm``, ``-journal``): 0600,
    the database created empty (SQLite takes an empty file as a new database) when missing."""
    db_path = os.fspath(db_path)
    private_file(db_path)
    for suffix in SQLITE_COMPANIONS:
        _tighten(db_path + suffix, FILE_MODE)
