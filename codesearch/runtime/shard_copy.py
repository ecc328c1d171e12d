"""Shards for searchers on nodes that do not share the data directory.

A shard file is written once, by an indexer or the compactor, in the data directory of the node
that builds the index, and never changed (a new version is a new file under a new name, see
`codesearch.index.format`). A searcher on another node gets the shards it serves through Ray:

* `ShardSource`, an actor where the index is built (`codesearch.serving.bootstrap` starts it
  with the runtime, ``<prefix>-shard-source``), answers `describe` (size and BLAKE2b digest of
  a shard, computed once per file) and `read` (a chunk of it, through Ray's object store);
* `ShardCopies`, in the searcher, turns the path of a shard in the builder's data directory into
  the path of a verified copy in the searcher's own directory: an existing copy is used when its
  size and recorded digest match the source's, else the file is fetched in `CHUNK_BYTES` chunks
  (`IN_FLIGHT` at a time) into a temporary file, its digest checked, then renamed into place, so
  a searcher never opens a partial or corrupt copy. `prune` removes the copies no shard list
  names any more.

A copy that does not match its digest is an `IndexFormatError` for that shard (the searcher
serves its other shards and reports the error, like an unreadable shard on a shared disk); the
copy it had is left as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO, TypeAlias, cast

from codesearch.errors import IndexFormatError
from codesearch.index.format import SUFFIX as SHARD_SUFFIX

#: Bytes one `ShardSource.read` returns at most.
CHUNK_BYTES = 8 << 20
#: Chunks a searcher asks for at once.
IN_FLIGHT = 4
#: Suffix of the file next to a copy that records its verified digest.
DIGEST_SUFFIX = ".b2"


def file_digest(path: str) -> str:
    """BLAKE2b (32 bytes, hex) of the file at `path`."""
    h = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _shard_name(name: str) -> str:
    """`name` if it names a shard file of the index directory (no directory part, not hidden,
    the shard suffix: never the manifest or its lock), else an error."""
    if not name or name != os.path.basename(name) or name.startswith(".") or not name.endswith(SHARD_SUFFIX):
        raise IndexFormatError(name, "not the name of a shard of this index")
    return name


class ShardSource:
    """Serves the shard files of `index_dir` to searchers on other nodes."""

    def __init__(self, index_dir: str):
        self.index_dir = os.path.realpath(index_dir)
        self._digests: dict[str, tuple[int, int, str]] = {}  # name → (size, mtime_ns, digest)

    def _path(self, name: str) -> str:
        return os.path.join(self.index_dir, _shard_name(name))

    def describe(self, name: str) -> tuple[int, str]:
        """(size, digest) of the shard `name`."""
        path = self._path(name)
        try:
            st = os.stat(path)
        except OSError as e:
            raise IndexFormatError(path, f"not readable where the index is built ({e.strerror})") from None
        known = self._digests.get(name)
        if known is None or known[:2] != (st.st_size, st.st_mtime_ns):
            known = (st.st_size, st.st_mtime_ns, file_digest(path))
            self._digests[name] = known
        return known[0], known[2]

    def read(self, name: str, offset: int, size: int) -> bytes:
        """At most `size` (≤ `CHUNK_BYTES`) bytes of shard `name` from `offset`."""
        with open(self._path(name), "rb") as f:
            f.seek(offset)
            return f.read(min(size, CHUNK_BYTES))

    def ping(self) -> bool:
        return True

    def shutdown(self) -> bool:
        """Nothing to finish (reads are short): the runtime stops it like a worker."""
        return True


if TYPE_CHECKING:
    from codesearch.runtime.handles import Method, RuntimeHandle

    class ShardSourceHandle(RuntimeHandle[ShardSource]):
        """A handle to a `ShardSource` actor (`codesearch.runtime.handles`)."""

        describe: Method[tuple[int, str]]
        read: Method[bytes]
        ping: Method[bool]
        shutdown: Method[bool]

    #: A shard source: the object itself (tests, one process) or a handle to its actor.
    Source: TypeAlias = ShardSource | ShardSourceHandle


def start_shard_source(index_dir: str, name: str, actor_options: dict[str, Any] | None = None) -> ShardSourceHandle:
    """Start the `ShardSource` of `index_dir` as the named actor `name` (namespace ``codesearch``)
    and wait until it answers. Ray restarts it when its process dies, and its calls are retried
    on the restarted actor (``max_task_retries=-1``: `describe` and `read` only read a file that
    never changes), so a fetch under way when it died completes instead of failing."""
    import ray

    from codesearch.runtime import NAMESPACE

    opts: dict[str, Any] = {"num_cpus": 0, "max_restarts": -1, "max_task_retries": -1, "max_concurrency": 4}
    source = cast(
        "ShardSourceHandle",
        ray.remote(ShardSource)
        .options(name=name, namespace=NAMESPACE, **{**opts, **(actor_options or {})})
        .remote(index_dir),
    )
    ray.get(source.ping.remote())
    return source


def _describe(source: Source, name: str) -> tuple[int, str]:
    """`ShardSource.describe` on the object itself or, for an actor handle, through Ray."""
    if isinstance(source, ShardSource):
        return source.describe(name)
    import ray

    return ray.get(source.describe.remote(name))


def _fetch_all(source: Source, name: str, size: int, out: BinaryIO) -> hashlib.blake2b:
    """Write shard `name` (`size` bytes) from `source` to the file `out`; returns the digest object."""
    h = hashlib.blake2b(digest_size=32)
    offsets = list(range(0, size, CHUNK_BYTES))
    if not isinstance(source, ShardSource):
        import ray

        pending = [source.read.remote(name, off, CHUNK_BYTES) for off in offsets[:IN_FLIGHT]]
        nxt = IN_FLIGHT
        while pending:
            data = ray.get(pending.pop(0))
            if nxt < len(offsets):
                pending.append(source.read.remote(name, offsets[nxt], CHUNK_BYTES))
                nxt += 1
            out.write(data)
            h.update(data)
    else:
        for off in offsets:
            data = source.read(name, off, CHUNK_BYTES)
            out.write(data)
            h.update(data)
    return h


class ShardCopies:
    """A searcher's verified copies of the shards it serves, in `local_dir`, fetched from
    `source` (a `ShardSource`, its actor handle, or a function returning either: looked up when
    first needed)."""

    def __init__(self, local_dir: str, source: Source | Callable[[], Source]):
        self.local_dir = local_dir
        os.makedirs(local_dir, mode=0o700, exist_ok=True)
        self._source = source
        self.fetched = 0  # copies made by this process (for tests and logs)
        self._verified: set[str] = set()  # copies checked against the source by this process
        for entry in os.listdir(local_dir):  # fetches a dead process left half done
            if entry.startswith(".fetch-"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(local_dir, entry))

    def verified(self, path: str) -> str | None:
        """The local copy of `path` when this process verified it already (shard files never
        change: no need to ask the source again), else None."""
        dest = os.path.join(self.local_dir, os.path.basename(path))
        return dest if dest in self._verified else None

    @property
    def source(self) -> Source:
        """The source, looked up the first time when a function was given (neither a
        `ShardSource` nor an actor handle is callable)."""
        src = self._source
        if isinstance(src, ShardSource) or not callable(src):
            return src
        self._source = found = src()
        return found

    def local(self, path: str) -> str:
        """The path of a verified local copy of the shard the builder keeps at `path`."""
        name = _shard_name(os.path.basename(path))
        size, digest = _describe(self.source, name)
        dest = os.path.join(self.local_dir, name)
        if self._recorded(dest) == digest and _size(dest) == size:
            self._verified.add(dest)
            return dest
        fd, tmp_path = tempfile.mkstemp(prefix=".fetch-", dir=self.local_dir)
        tmp: str | None = tmp_path  # None once renamed into place
        try:
            with os.fdopen(fd, "wb") as out:
                got = _fetch_all(self.source, name, size, out)
                written = out.tell()
                out.flush()
                os.fsync(out.fileno())
            if written != size or got.hexdigest() != digest:
                raise IndexFormatError(
                    path,
                    f"the copy fetched for this node does not match the source ({written} of "
                    f"{size} bytes, digest {got.hexdigest()[:12]}… instead of {digest[:12]}…)",
                )
            os.replace(tmp_path, dest)
            tmp = None
            _write_atomically(dest + DIGEST_SUFFIX, digest)
            self.fetched += 1
            self._verified.add(dest)
            return dest
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    @staticmethod
    def _recorded(dest: str) -> str | None:
        try:
            with open(dest + DIGEST_SUFFIX) as f:
                return f.read().strip()
        except OSError:
            return None

    def prune(self, keep: set[str]) -> int:
        """Remove the copies (and their digest files) whose paths are not in `keep`; returns how
        many. A copy still mapped by a search that started before stays readable until it ends."""
        removed = 0
        for entry in os.listdir(self.local_dir):
            path = os.path.join(self.local_dir, entry)
            copy = path[: -len(DIGEST_SUFFIX)] if entry.endswith(DIGEST_SUFFIX) else path
            if copy in keep or entry.startswith(".fetch-"):
                continue
            self._verified.discard(copy)
            try:
                os.unlink(path)
                removed += not entry.endswith(DIGEST_SUFFIX)
            except OSError:
                pass
        return removed


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _write_atomically(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".fetch-", dir=os.path.dirname(path))
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
