"""The shard file format: one immutable file per shard, tagged sections, a version, checksums.

Layout of format version 4 (all integers little-endian)::

    offset  size        field
    0       8           magic  b"CSSHARD\\n"
    8       4           format version (u32) = 4
    12      4           section count N (u32)
    16      32 * N      table of contents, one entry per section:
                          tag      8 bytes, ASCII, right-padded with spaces
                          offset   u64, from the start of the file, a multiple of 8
                          length   u64, bytes
                          crc32    u32 of the section's bytes (zlib.crc32)
                          reserved u32 = 0
    ...                 the sections, each starting on an 8-byte boundary (zero padding)

Sections written by `codesearch.index.builder` (D = documents, S = symbols, T = trigrams). A
shard holds the documents of one or more repositories (a compound shard, `compact.py`):

    meta      JSON: format, repos (id, name, displayName, codeHostType, webUrl, fileUrl
              template, branches, archived, fork, public), languages, symbol kinds, counts,
              branchWords (W: the u64 words of each document's branch mask, at least 1)
    doc.repo  u32[D]   index into meta.repos
    doc.lang  u16[D]   index into meta.languages
    doc.skip  u8[D]    0 indexed, 1 too large, 2 too many trigrams, 3 binary
    doc.rank  u8[D]    rank class (language.rank_class); optional: older shards lack it
    doc.oid   20 bytes per document: the git blob id (SHA-1) of its content, zeros when unknown
              (recency.py); optional: older shards lack it (no duplicate is folded with them)
    doc.time  i64[D]   Unix time of the last commit that touched the file, 0 when unknown
              (recency.py); optional: older shards lack it (their files rank as unknown)
    doc.size  u64[D]   size of the file in bytes (also for skipped files)
    doc.brch  u64[D*W] each document's branch mask, W words (word k holds bits 64k..64k+63): bit i
              set: the blob is on branch i of its repo (meta.repos[r].branches). W is the
              width the shard's repository with the most branches needs (`branch_words`): 1,
              as in version 3, up to 64 branches; 16 for 1,000
    doc.path  u64[D+1] offsets into `paths`
    doc.cont  u64[D+1] offsets into `content` (skipped files have none)
    doc.line  u64[D+1] offsets (in entries) into `lines`
    doc.syms  u64[D+1] offsets (in entries) into the sym.* arrays
    paths     UTF-8 paths, concatenated
    content   file contents, concatenated, as stored in git (any bytes)
    lines     u32[]    start offset of every line, relative to its document
    ctg.keys  u32[T]   content trigram ids (exact case, normalized: see trigrams.py), sorted
    ctg.card  u32[T]   posting list sizes (documents per trigram)
    ctg.offs  u64[T+1] offsets into ctg.post
    ctg.post  serialized pyroaring BitMaps of document ids, concatenated
    ntg.*     the same four sections for file-name trigrams
    doc.qflt  u64[D+1] offsets into `qfilter`
    qfilter   per document, a Bloom filter of its folded quadgrams (`quadgrams.py`; empty for a
              document without indexed content)
    sym.name  UTF-8 symbol names, concatenated; sym.noff u64[S+1] offsets into it
    sym.line  u32[S]   1-based line of the definition
    sym.kind  u16[S]   index into meta.symbolKinds
    sym.pnam  UTF-8 parent names; sym.poff u64[S+1] offsets; sym.pknd u16[S] parent kind
    sym.lkey  u64[S]   8-byte BLAKE2b of each lower-cased symbol name, sorted; sym.lidx u32[S]
              the symbol each key belongs to: the definitions of a name are found by binary
              search, without a table built at load time (`Shard.definitions`)

Writers write to a temporary file in the target directory, fsync it, and rename it into place,
so a reader never sees a partial shard. Readers map the file read-only and check the magic,
version, table of contents and every section's CRC before use; any mismatch raises
`IndexFormatError` naming the file and the problem.

Version log:

* 1: first version (case-folded trigrams, one repository per shard).
* 2: exact-case trigrams (case-sensitive queries look up exactly what they need); the symbol
  name keys ``sym.lkey``/``sym.lidx``; shards of several repositories. A version-1 shard is
  refused (`IndexFormatError`), never misread: the service re-indexes the repositories whose
  shards are older (`manifest.stale_repos`), a directory index is built again.
* 3: a quadgram filter per document (``doc.qflt``, ``qfilter``) that narrows the candidates of
  literals, case-insensitive ones above all. Older shards are refused and re-indexed as above.
* 4: branch masks of variable length (``meta.branchWords`` words per document in ``doc.brch``),
  so a repository may have more than 64 indexed revisions (``CODESEARCH_MAX_INDEXED_REVISIONS``).
  A version-3 shard's masks are one word with no width recorded: it is refused and re-indexed
  as above, never read as if its width were known.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import struct
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from codesearch.errors import DiskFull, IndexFormatError, is_disk_full

MAGIC = b"CSSHARD\n"
FORMAT_VERSION = 4
SUFFIX = ".shard"
_HEADER = struct.Struct("<8sII")
_ENTRY = struct.Struct("<8sQQII")


#: What a section is written from: bytes, a numpy array (little-endian on disk) or JSON.
Section = bytes | np.ndarray | dict[str, Any] | list[Any]


def _as_bytes(value: Section) -> bytes | memoryview:
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<"), copy=False).data.cast("B")
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":")).encode()
    return value


@contextlib.contextmanager
def disk_full_as_error(path: str, what: str) -> Iterator[None]:
    """Turn an ``ENOSPC``/``EDQUOT`` `OSError` of the block into a `DiskFull` naming `path` and
    `what` was being written (an `OSError` of a write names no file)."""
    try:
        yield
    except OSError as e:
        if is_disk_full(e):
            raise DiskFull(path, what) from e
        raise


def write_shard(path: str, sections: Mapping[str, Section]) -> int:
    """Write `sections` (tag → bytes, numpy array or JSON-able dict) atomically to `path`.

    Returns the size of the file in bytes.
    """
    blobs = [(tag, _as_bytes(v)) for tag, v in sections.items()]
    for tag, _ in blobs:
        if len(tag) > 8 or not tag.isascii():
            raise ValueError(f"bad section tag {tag!r}")
    offset = _HEADER.size + _ENTRY.size * len(blobs)
    toc = []
    for tag, data in blobs:
        offset = (offset + 7) & ~7
        toc.append(_ENTRY.pack(tag.ljust(8).encode(), offset, len(data), zlib.crc32(data), 0))
        offset += len(data)
    directory = os.path.dirname(os.path.abspath(path))
    with disk_full_as_error(path, "writing the shard"):
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_HEADER.pack(MAGIC, FORMAT_VERSION, len(blobs)))
                f.write(b"".join(toc))
                for _, data in blobs:
                    f.write(b"\0" * (-f.tell() % 8))
                    f.write(data)
                f.flush()
                os.fsync(f.fileno())
                size = f.tell()
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return size


def format_version(path: str) -> int | None:
    """The format version in a shard file's header (None when it is not a readable shard)."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEADER.size)
    except OSError:
        return None
    if len(head) < _HEADER.size:
        return None
    magic, version, _ = _HEADER.unpack(head)
    return version if magic == MAGIC else None


class ShardFile:
    """A shard file mapped read-only, with its sections checked and addressable by tag."""

    def __init__(self, path: str, verify: bool = True):
        self.path = path
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < _HEADER.size:
                    raise IndexFormatError(path, f"file is {size} bytes, too short to be a shard")
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise IndexFormatError(path, f"cannot open: {e.strerror}") from None
        self.size = size
        magic, version, count = _HEADER.unpack_from(self._mm, 0)
        if magic != MAGIC:
            raise IndexFormatError(path, "not a codesearch shard (bad magic)")
        if version != FORMAT_VERSION:
            older = " (built by an older codesearch: index it again)" if version < FORMAT_VERSION else ""
            raise IndexFormatError(
                path, f"shard format version {version}; this codesearch reads {FORMAT_VERSION}{older}"
            )
        if _HEADER.size + count * _ENTRY.size > size:
            raise IndexFormatError(path, f"truncated: table of contents for {count} sections does not fit")
        self._sections: dict[str, tuple[int, int]] = {}
        for i in range(count):
            tag, off, length, crc, _ = _ENTRY.unpack_from(self._mm, _HEADER.size + i * _ENTRY.size)
            name = tag.decode("ascii", "replace").rstrip()
            if off + length > size:
                raise IndexFormatError(
                    path, f"truncated: section {name!r} ends at {off + length}, file is {size} bytes"
                )
            if verify and zlib.crc32(memoryview(self._mm)[off : off + length]) != crc:
                raise IndexFormatError(path, f"corrupt: checksum mismatch in section {name!r}")
            self._sections[name] = (off, length)

    def has(self, tag: str) -> bool:
        return tag in self._sections

    def raw(self, tag: str) -> memoryview:
        """The bytes of a section, without copying."""
        try:
            off, length = self._sections[tag]
        except KeyError:
            raise IndexFormatError(self.path, f"missing section {tag!r}") from None
        return memoryview(self._mm)[off : off + length]

    def array(self, tag: str, dtype: npt.DTypeLike) -> np.ndarray:
        """A section as a read-only numpy array, without copying."""
        data = self.raw(tag)
        dt = np.dtype(dtype).newbyteorder("<")
        if len(data) % dt.itemsize:
            raise IndexFormatError(self.path, f"section {tag!r} is not a whole number of {dt} items")
        return np.frombuffer(data, dtype=dt)

    def json(self, tag: str) -> Any:
        """A JSON section, parsed."""
        try:
            return json.loads(bytes(self.raw(tag)))
        except ValueError as e:
            raise IndexFormatError(self.path, f"section {tag!r} is not valid JSON: {e}") from None

    def close(self) -> None:
        # numpy views may still point into the map (BufferError); it is released when they go.
        with contextlib.suppress(BufferError):
            self._mm.close()


def offsets(lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    """The offsets section of items of these `lengths`, one after the other (uint64, from 0, one
    more than there are items): item i is ``data[offsets[i]:offsets[i + 1]]``."""
    out = np.zeros(len(lengths) + 1, dtype=np.uint64)
    np.cumsum(np.asarray(lengths, dtype=np.uint64), out=out[1:])
    return out


def branch_words(branch_counts: Iterable[int]) -> int:
    """The width (u64 words per document) of ``doc.brch`` for repositories with these numbers of
    indexed branches: enough for the largest, at least one word."""
    return max([1, *((n + 63) // 64 for n in branch_counts)])


def pack_masks(masks: Sequence[int], words: int) -> np.ndarray:
    """Branch masks (Python ints, any width) as ``doc.brch``: u64[len(masks), words], word k
    holding bits 64k..64k+63. ValueError when a mask does not fit."""
    if words == 1:  # the common case, as cheap as before variable widths
        if any(m >> 64 for m in masks):
            raise ValueError("a branch mask does not fit in 1 word")
        return np.array(masks, dtype=np.uint64).reshape(len(masks), 1)
    try:
        raw = b"".join(m.to_bytes(8 * words, "little") for m in masks)
    except OverflowError:
        raise ValueError(f"a branch mask does not fit in {words} words") from None
    return np.frombuffer(raw, dtype="<u8").reshape(len(masks), words)


def mask_of(row: np.ndarray) -> int:
    """One document's branch mask (a row of ``doc.brch``) as a Python int."""
    return int(row[0]) if row.size == 1 else int.from_bytes(row.astype("<u8", copy=False).tobytes(), "little")


def mask_names(names: Sequence[str], mask: int) -> list[str]:
    """The `names` whose bits are set in `mask` (bit i: ``names[i]``), in order: one step per set
    bit, not per name (a file on 3 of 1,000 branches costs 3)."""
    out = []
    while mask:
        low = mask & -mask
        i = low.bit_length() - 1
        if i >= len(names):
            break
        out.append(names[i])
        mask ^= low
    return out


def symbol_key(name: bytes) -> int:
    """The ``sym.lkey`` of a symbol name: an 8-byte BLAKE2b of its ASCII-lower-cased bytes."""
    return int.from_bytes(hashlib.blake2b(name.lower(), digest_size=8).digest(), "little")
