"""Where documents come from: a directory tree, or revisions of a git repository.

A source describes its repository (`RepoInfo`) and yields `SourceFile`s: a path, a size, the
set of branches the blob occurs on (a bit mask over `RepoInfo.branches`) and a way to read the
bytes, called only when the builder decides the content is wanted (a file over the size limit
is never read). Git sources read blobs straight from the object store through one persistent
``git cat-file --batch`` (`codesearch.git.objects.ObjectBatch`: GitPython's, started and bounded
like every git process by `codesearch.git.process`): no checkout, and a blob that occurs on
several branches at the same path is one document.
"""

from __future__ import annotations

import functools
import gc
import math
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from codesearch.errors import IndexBuildError
from codesearch.git.blob_stream import BlobStream
from codesearch.git.objects import ObjectBatch
from codesearch.git.paths import git_dir_of
from codesearch.git.process import Git, GitFailed, first_line
from codesearch.git.revisions import MAX_REVISIONS, select_revisions
from codesearch.index.attributes import ATTRIBUTES_FILE, MAX_FILE_BYTES, NONE, Attributes, Linguist
from codesearch.index.recency import oid_bytes, walk_changes

#: listing every file of one revision (``git ls-tree -r``) of a very large repository may take this long
LIST_TIMEOUT_S = 600.0


@dataclass
class RepoInfo:
    """What the index keeps about a repository (the `meta` section of a shard)."""

    name: str
    id: int = 0
    display_name: str = ""
    code_host_type: str = "genericGitHost"
    web_url: str = ""
    #: External link to a file, with ``{branch}`` and ``{path}`` placeholders ("" for none).
    file_url_template: str = ""
    branches: list[str] = field(default_factory=lambda: ["HEAD"])
    archived: bool = False
    fork: bool = False
    public: bool = True

    def __post_init__(self) -> None:
        if not self.id:
            self.id = zlib.crc32(self.name.encode()) & 0x7FFFFFFF or 1
        if not self.display_name:
            self.display_name = self.name.split("/", 1)[1] if "/" in self.name else self.name

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "displayName": self.display_name,
            "codeHostType": self.code_host_type,
            "webUrl": self.web_url,
            "fileUrlTemplate": self.file_url_template,
            "branches": self.branches,
            "archived": self.archived,
            "fork": self.fork,
            "public": self.public,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RepoInfo:
        return cls(
            name=d["name"],
            id=d["id"],
            display_name=d.get("displayName", ""),
            code_host_type=d.get("codeHostType", "genericGitHost"),
            web_url=d.get("webUrl", ""),
            file_url_template=d.get("fileUrlTemplate", ""),
            branches=list(d.get("branches") or ["HEAD"]),
            archived=bool(d.get("archived")),
            fork=bool(d.get("fork")),
            public=bool(d.get("public", True)),
        )


@dataclass(slots=True)
class SourceFile:
    path: str
    size: int
    branch_mask: int
    read: Callable[[], bytes]
    #: Where the content is, for a process that reads it again: a file's full path, a blob's sha.
    locator: str = ""
    #: The file's ``.gitattributes`` linguist overrides (git sources: of the first revision it is on)
    linguist: Linguist = NONE
    #: The git blob id of the content (20 bytes; `recency.oid_bytes`), when the source knows it without
    #: reading the content (a git source); empty otherwise: the builder computes it from what it reads
    content_id: bytes = b""
    #: Unix time of the last commit that touched the file on the first revision it is on (`recency`); 0: unknown
    time: int = 0


def listed(files: Iterable[SourceFile]) -> list[SourceFile]:
    """`files` as a list, made with the cyclic garbage collector paused: a listing keeps one
    object per file (a million for 10 GB), and as they pile up the collector would walk all of
    them again and again (a tenth of listing a tree); they hold no reference cycles."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return list(files)
    finally:
        if paused:
            gc.enable()


def repo_name_from_url(url: str) -> str:
    """``host[:port]/path`` from a clone URL (https, ssh, scp-like), without ``.git``."""
    url = url.strip()
    m = re.match(r"^[a-zA-Z][\w+.-]*://(?:[^@/]*@)?([^/]+)(/.*)?$", url)
    if m:
        host, path = m.group(1), m.group(2) or ""
    else:
        m = re.match(r"^(?:[^@/]+@)?([^:/]+):(.*)$", url)  # git@host:owner/repo.git
        if not m:
            return url.rstrip("/")
        host, path = m.group(1), "/" + m.group(2)
    path = re.sub(r"\.git/?$", "", path.rstrip("/"))
    return host + path


def local_repo_name(path: str) -> str:
    """A local repository's name: from ``remote.origin.url`` when set, else from its path."""
    git_dir = repo_git_dir(path)
    if git_dir is not None:
        res = Git.at(git_dir).run(["config", "--get", "remote.origin.url"])
        url = res.stdout.decode("utf-8", "replace").strip()
        if res.returncode == 0 and url and not url.startswith(("/", "file:")):
            return repo_name_from_url(url)
    return os.path.abspath(path).strip("/")


def repo_git_dir(path: str) -> str | None:
    """The git directory of the repository at `path` (a work tree, whose ``.git`` may be a
    ``gitdir:`` file, or a bare repository), None when `path` is not one."""
    dot_git = os.path.join(path, ".git")
    git_dir = git_dir_of(path)
    if os.path.isfile(dot_git):  # a linked work tree or a submodule: ".git" names the git directory
        try:
            with open(dot_git, encoding="utf-8") as f:
                line = f.readline().strip()
        except (OSError, UnicodeDecodeError):
            return None
        if not line.startswith("gitdir:"):
            return None
        git_dir = os.path.join(path, line[len("gitdir:") :].strip())
    return git_dir if is_git_dir(git_dir) else None


def is_git_dir(path: str) -> bool:
    """True when `path` is a git directory by git's own test (``is_git_directory``): a ``HEAD``
    file, and ``objects/`` and ``refs/`` directories, in it or in the common directory its
    ``commondir`` file names (a linked work tree). Read from the file system: a re-index of
    thousands of repositories opens each, and a git process would cost ~3 ms each."""
    if not os.path.isfile(os.path.join(path, "HEAD")):
        return False
    common = path
    try:
        with open(os.path.join(path, "commondir"), encoding="utf-8") as f:
            common = os.path.join(path, f.read().strip())
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        return False
    return os.path.isdir(os.path.join(common, "objects")) and os.path.isdir(os.path.join(common, "refs"))


class DirectorySource:
    """Every regular file below a directory (not following links, skipping ``.git``)."""

    def __init__(self, root: str, repo: RepoInfo | None = None):
        if not os.path.isdir(root):
            raise IndexBuildError(f"{root}: not a directory")
        self.root = os.path.abspath(root)
        self.repo = repo or RepoInfo(name=self.root.strip("/"), branches=["HEAD"])
        self.warnings: list[str] = []

    def files(self) -> Iterator[SourceFile]:
        """Each folder's files in name order, then its folders one after the other (the order of a
        top-down `os.walk` with sorted names), from one `os.scandir` per folder: its entries know
        their type without a `stat`, and a file's size costs one (`os.walk` with `lstat`,
        `isfile`, `islink` and `relpath` cost ~35 µs a file, a tenth of a build's CPU)."""
        stack = [(self.root, "")]
        while stack:
            folder, prefix = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as e:
                self._warn(e)
                continue
            folders = []
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != ".git":
                            folders.append((entry.path, f"{prefix}{entry.name}/"))
                    elif entry.is_file(follow_symlinks=False):  # not a link, a device, a socket
                        size = entry.stat(follow_symlinks=False).st_size
                        path = entry.path
                        yield SourceFile(prefix + entry.name, size, 1, functools.partial(read_file, path, size), path)
                except OSError as e:
                    self._warn(e)
            stack.extend(reversed(folders))

    def _warn(self, e: OSError) -> None:
        self.warnings.append(f"{getattr(e, 'filename', '')}: {e.strerror}")


def read_file(path: str, size: int) -> bytes:
    """The bytes of the file at `path`, listed with `size` bytes: one read of that size and one
    more byte (Python's buffered ``open().read()`` adds a stat, a seek and a buffer: a third of
    the time of reading a small file). A file whose size changed since it was listed, or a read
    cut short, is read on to its end."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, size + 1)
        if len(data) == size:
            return data
        parts = [data]
        while more := os.read(fd, 1 << 20):
            parts.append(more)
        return b"".join(parts)
    finally:
        os.close(fd)


class GitSource:
    """The files of one or more revisions of a git repository, from its object store."""

    def __init__(
        self,
        path: str,
        repo: RepoInfo | None = None,
        branch_globs: Iterable[str] = (),
        tag_globs: Iterable[str] = (),
        max_revisions: int = MAX_REVISIONS,
        stream_up_to: int = 0,
    ) -> None:
        """`max_revisions`: the most revisions indexed (``CODESEARCH_MAX_INDEXED_REVISIONS``).
        `stream_up_to`: the listed blobs of at most this many bytes are read through one
        `BlobStream`, in listing order (an index build reads them so: pass the largest file it
        reads); the others, and all of them when 0, one request at a time."""
        git_dir = repo_git_dir(path)
        if git_dir is None:
            raise IndexBuildError(f"{path}: not a git repository")
        self.git_dir = git_dir
        self._objects: ObjectBatch | None = None
        self._stream_up_to = stream_up_to
        self._streamed: list[str] = []  # the names the stream will carry, once listed
        self._stream: BlobStream | None = None
        try:
            self.revisions, self.warnings = select_revisions(git_dir, branch_globs, tag_globs, max_revisions)
        except ValueError as e:
            raise IndexBuildError(f"{path}: {e}") from None
        refs = [r.ref for r in self.revisions]
        if repo is None:
            repo = RepoInfo(name=local_repo_name(path), branches=refs)
        else:
            repo.branches = refs
        self.repo = repo

    def files(self) -> Iterator[SourceFile]:
        entries: dict[tuple[str, str], list[int]] = {}
        attribute_files: list[list[tuple[str, str, int]]] = [[] for _ in self.revisions]  # (path, sha, size)
        git = Git.at(self.git_dir, timeout_s=LIST_TIMEOUT_S)
        for bit, rev in enumerate(self.revisions):
            res = git.run(["ls-tree", "-r", "-l", "-z", "--full-tree", "--end-of-options", rev.commit])
            if res.returncode != 0:
                raise IndexBuildError(f"{self.git_dir}: cannot list {rev.ref}: {first_line(res.stderr)}")
            for rec in res.stdout.split(b"\0"):
                if not rec:
                    continue
                meta, _, raw_path = rec.partition(b"\t")
                mode, kind, sha, size = meta.split()
                if kind != b"blob" or mode == b"120000":  # submodules and symlinks have no content
                    continue
                path = raw_path.decode("utf-8", "replace")
                if not size.isdigit():  # git lists the size of a blob it cannot read as "BAD"
                    raise IndexBuildError(
                        f"{self.git_dir}: cannot read {path!r} at {rev.ref}: its blob "
                        f"{sha.decode()} is damaged in the object store"
                    )
                key = (path, sha.decode())
                if path == ATTRIBUTES_FILE or path.endswith("/" + ATTRIBUTES_FILE):
                    attribute_files[bit].append((path, key[1], int(size)))
                if key in entries:
                    entries[key][1] |= 1 << bit
                else:
                    entries[key] = [int(size), 1 << bit]
        attributes = self._attributes(attribute_files)
        times = self._change_times(git, {(mask & -mask).bit_length() - 1 for _, mask in entries.values()})
        if self._stream_up_to > 0:
            self._streamed = [oid for (_, oid), (length, _) in entries.items() if length <= self._stream_up_to]
        for (name, oid), (length, mask) in entries.items():
            first = (mask & -mask).bit_length() - 1  # the first revision it is on: the default branch when there
            linguist = attributes[first].of(name) if attributes[first] else NONE
            read = functools.partial(self._read_listed, oid)
            yield SourceFile(name, length, mask, read, oid, linguist, oid_bytes(oid), times[first].get(name, 0))

    def _change_times(self, git: Git, revisions: set[int]) -> dict[int, dict[str, int]]:
        """Per revision (a bit of the branch masks) that is the first of some file, when each path was last
        changed on it (`recency.walk_changes`: one bounded walk per distinct commit). A revision read
        from the ref files, without its commit date, gets it from its walk."""
        walked: dict[str, dict[str, int]] = {}
        out: dict[int, dict[str, int]] = {}
        for bit in sorted(revisions):
            rev = self.revisions[bit]
            if rev.commit not in walked:
                walk = walk_changes(git, rev.commit)
                walked[rev.commit] = walk.times
                if rev.committed_at is None and walk.head_time:  # read from the ref files, without a date
                    self.revisions[bit] = replace(rev, committed_at=datetime.fromtimestamp(walk.head_time, UTC))
            out[bit] = walked[rev.commit]
        return out

    def _attributes(self, files_by_revision: list[list[tuple[str, str, int]]]) -> list[Attributes]:
        """Each revision's linguist rules, from the ``.gitattributes`` blobs of its tree (revisions
        with the same files share one `Attributes`); their warnings join the source's."""
        out: list[Attributes] = []
        made: dict[tuple[tuple[str, str, int], ...], Attributes] = {}
        for files in files_by_revision:
            key = tuple(sorted(files))
            if key not in made:
                attrs = Attributes()
                for path, sha, size in key:
                    if size > MAX_FILE_BYTES:
                        attrs.warnings.append(f"{path}: larger than {MAX_FILE_BYTES} bytes, not read")
                        continue
                    try:
                        attrs.add_file(path, self.read_blob(sha))
                    except Exception as e:  # an unreadable attributes file: its rules are missing, nothing more
                        attrs.warnings.append(f"{path}: cannot read: {e}")
                self.warnings.extend(f"{self.repo.name}: {w}" for w in attrs.warnings)
                made[key] = attrs
            out.append(made[key])
        return out

    def _read_listed(self, sha: str) -> bytes:
        """A listed file's blob: from the stream when it carries it (started at the first read),
        else on its own (`read_blob`). A stream whose git stopped answering is dropped: the rest
        are read one at a time, by a git process of their own."""
        if self._stream is None and self._streamed:
            self._stream = BlobStream(self.git_dir, self._streamed)
            self._streamed = []
        data = None
        if self._stream is not None:
            try:
                data = self._stream.read(sha)
            except GitFailed:
                self._stream.close()
                self._stream = None
        return data if data is not None else self.read_blob(sha)

    def read_blob(self, sha: str) -> bytes:
        """The content of the blob `sha` (one ``cat-file --batch`` process for the source's life)."""
        if self._objects is None:
            self._objects = ObjectBatch(self.git_dir, timeout_s=math.inf)  # bounded by the index job's limit
        return self._objects.blob(sha)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._objects is not None:
            self._objects.close()
            self._objects = None


def open_source(
    path: str, branch_globs: Iterable[str] = (), tag_globs: Iterable[str] = (), max_revisions: int = MAX_REVISIONS
) -> DirectorySource | GitSource:
    """A git source when `path` is a git repository (bare or not), else a directory source."""
    if os.path.isdir(os.path.join(path, ".git")) or (
        os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(os.path.join(path, "objects"))
    ):
        return GitSource(path, branch_globs=branch_globs, tag_globs=tag_globs, max_revisions=max_revisions)
    return DirectorySource(path)
