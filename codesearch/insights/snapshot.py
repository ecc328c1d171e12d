"""The files of several commits of one repository as one temporary index, each file once.

Why one index of distinct files instead of an index per commit: from one month to the next
most files do not change, so their (path, blob) pairs repeat. Listing each commit's tree
(``git ls-tree -r``: paths and blob ids, no content) is cheap; the union of the distinct pairs
is what is read (once per blob, through one ``git cat-file --batch``) and indexed. Each
document carries a bit mask of the commits it occurs in: the index's branch mask, whose
"branches" here are the commits (at most `MAX_COMMITS` per index: one 64-bit word of mask per
document, the narrowest and fastest width of the shard format).
Counting a query on the index then gives, per matching document, its matches and the commits
they belong to (`codesearch.insights.counting`).

The index is written by the engine's own builder (`codesearch.index.builder.ShardBuilder`)
with the indexing rules the service uses (`IndexSettings`): a file the index would skip (too
large, binary, too many trigrams) is skipped here too, so a count is what a search of that
commit would find. Symbols (ctags) are extracted only when a query asks for them (``sym:``).
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from codesearch.errors import IndexBuildError
from codesearch.git.objects import ObjectBatch
from codesearch.git.process import Git
from codesearch.index.builder import IndexSettings, IndexStats, ShardBuilder
from codesearch.index.shard import Shard
from codesearch.index.sources import RepoInfo, SourceFile

__all__ = ["MAX_COMMITS", "Snapshot", "list_entries"]

#: Commits one index tells apart: one word of branch mask per document (wider masks cost size and time).
MAX_COMMITS = 64

_SYMLINK = b"120000"


def list_entries(git: Git, commits: Sequence[str]) -> dict[tuple[str, str], int]:
    """(path, blob id) → bit mask of the `commits` (bit i: ``commits[i]``) whose tree holds it.
    Symlinks and submodules have no content to search and are left out, as the indexer does."""
    if len(commits) > MAX_COMMITS:
        raise ValueError(f"{len(commits)} commits in one index; at most {MAX_COMMITS}")
    entries: dict[tuple[str, str], int] = {}
    for bit, commit in enumerate(commits):
        res = git.run(["ls-tree", "-r", "-z", "--full-tree", "--end-of-options", commit], check=True)
        for rec in res.stdout.split(b"\0"):
            meta, tab, raw_path = rec.partition(b"\t")
            if not tab:
                continue
            mode, kind, sha = meta.split(b" ")
            if kind != b"blob" or mode == _SYMLINK:
                continue
            key = (raw_path.decode("utf-8", "replace"), sha.decode("ascii"))
            entries[key] = entries.get(key, 0) | 1 << bit
    return entries


@dataclass
class Snapshot:
    """The temporary index of the distinct files of `commits` (see the module docstring): build
    it with `build`, read its `shards`, and `close` it (its folder is removed)."""

    git: Git
    repo: RepoInfo
    commits: list[str]
    settings: IndexSettings
    folder: str = ""
    shards: list[Shard] = field(default_factory=list)
    stats: IndexStats = field(default_factory=IndexStats)
    #: distinct (path, blob) pairs indexed
    documents: int = 0

    def build(self) -> Snapshot:
        """List the commits' trees, read each distinct blob once, write and open the index."""
        entries = list_entries(self.git, self.commits)
        self.documents = len(entries)
        repo = RepoInfo.from_json({**self.repo.to_json(), "branches": list(self.commits)})
        self.folder = tempfile.mkdtemp(prefix="codesearch-insight-")
        builder = ShardBuilder(self.folder, repo, self.settings, self.stats, name="insight")
        assert self.git.git_dir is not None
        # one reader for the whole build: bounded by the runner's deadline (`Git.limit`)
        reader = ObjectBatch(self.git.git_dir, timeout_s=self.git.limit())
        try:
            for f in _files(reader, entries):
                builder.add(f)
            written = builder.finish()
        except BaseException:
            builder.symbols.close()
            self.close()
            raise
        finally:
            reader.close()
        self.shards = [Shard(path) for path in written]
        return self

    def close(self) -> None:
        for s in self.shards:
            s.close()
        self.shards = []
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = ""

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _files(reader: ObjectBatch, entries: dict[tuple[str, str], int]) -> Iterator[SourceFile]:
    """Each distinct (path, blob) as a source file whose content is read now: the builder needs
    its size before it decides, and `ls-tree -l` would look every size up once per commit."""
    cache: dict[str, bytes] = {}  # a blob at several paths (a copied file) is read once
    counts: dict[str, int] = {}
    for _, sha in entries:
        counts[sha] = counts.get(sha, 0) + 1
    for (path, sha), mask in entries.items():
        data = cache.get(sha)
        if data is None:
            try:
                data = reader.blob(sha)
            except Exception as e:
                raise IndexBuildError(f"cannot read {path!r} (blob {sha}): {e}") from None
            if counts[sha] > 1:
                cache[sha] = data
        counts[sha] -= 1
        if counts[sha] == 0:
            cache.pop(sha, None)
        yield SourceFile(path, len(data), mask, functools.partial(_given, data), sha)


def _given(data: bytes) -> bytes:
    return data
