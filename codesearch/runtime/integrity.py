"""The scheduler's watch over the shard files of the index: a shard that cannot be read is
reported and rebuilt from the mirrors at once.

Every shard the manifest names is opened and verified (`codesearch.index.shard.Shard`: header,
table of contents, every section's CRC, the sections' shapes) once per version of its file (inode,
size and mtime: a file changed in place is verified again). A shard that fails, or that is
missing, is *refused*:

* its file is moved aside to ``<index>/refused/<name>.<unix time>`` (kept for a post-mortem,
  never deleted silently; a missing file has nothing to move);
* each repository whose live documents it holds (`manifest.shard_repos`) gets an index job that
  rebuilds it even if its commits did not move (`Store.enqueue_index_job(rebuild=True)`); the
  new shards replace it in the manifest (`manifest.swap_repo`), which drops it once none of its
  repositories is left alive in it;
* it is counted (`codesearch_index_shard_refusals`, by reason) and listed, until the manifest no
  longer names it, in ``<index>/refused.json``, which `/api/health` reads
  (`refusal_summary`) and the gauge ``codesearch_index_refused_shards`` counts.

Meanwhile the searchers answer without it and say so: every answer is marked not exhaustive and
names the repositories it missed (`codesearch.search.engine.Refusals`).

Reading a whole shard costs its size in I/O, so one check verifies at most `VERIFY_BYTES_PER_CHECK`
bytes (a large index is covered over a few ticks, the newest files first: a fresh build is
verified at the next tick).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from codesearch.errors import CodesearchError, IndexFormatError
from codesearch.index import manifest
from codesearch.index.shard import Shard
from codesearch.runtime import metrics

if TYPE_CHECKING:
    from codesearch.store import Store

log = logging.getLogger(__name__)

#: Bytes of shard files one `IndexIntegrity.check` reads at most (the rest waits for the next).
VERIFY_BYTES_PER_CHECK = 512 << 20
#: Where refused shard files go, under the index directory.
REFUSED_DIR = "refused"
#: What is refused now, for `/api/health` (written by the scheduler, read by the API replicas).
STATUS_FILE = "refused.json"
#: The reasons the refusal counter is tagged with (a bounded set).
REASONS = ("checksum", "truncated", "missing", "invalid")


@dataclass
class Refusal:
    """One shard the index cannot read now."""

    shard: str  # its file name
    reason: str  # one of `REASONS`
    error: str  # what the check said
    repositories: dict[int, str] = field(default_factory=dict)  # id → name, rebuilt from the mirrors
    since: float = 0.0  # unix time it was refused
    moved_to: str | None = None  # where its file went (None: it was missing)


def reason_of(error: str, missing: bool) -> str:
    """The counter's tag of a refusal."""
    if missing:
        return "missing"
    if "checksum" in error:
        return "checksum"
    if "truncated" in error or "too short" in error or "point past" in error:
        return "truncated"
    return "invalid"


class IndexIntegrity:
    """Verifies the index's shard files and has the refused ones rebuilt (see the module docstring)."""

    def __init__(self, index_dir: str, verify_bytes: int = VERIFY_BYTES_PER_CHECK):
        self.index_dir = index_dir
        self.verify_bytes = verify_bytes
        self._verified: dict[str, tuple[int, int, int]] = {}  # shard name → identity verified good
        self.refused: dict[str, Refusal] = {}
        self._write_status()  # a status left by an earlier service is not ours: start from what we find

    def check(self, store: Store) -> list[Refusal]:
        """Verify what changed since the last check; refuse and requeue what fails. Returns the new refusals."""
        try:
            man = manifest.read_shared(self.index_dir)  # (read-only here; parsed again only when it changed)
        except IndexFormatError as e:
            log.error("index integrity: %s", e)
            return []
        names = set(man["shards"]) if man is not None and manifest.is_current(man) else set()
        changed = self._forget_gone(names)
        todo: list[tuple[float, str, os.stat_result | None]] = []
        for name in names - set(self.refused):
            try:
                st: os.stat_result | None = os.stat(os.path.join(self.index_dir, name))
            except FileNotFoundError:
                st = None
            except OSError as e:
                log.error("index integrity: cannot stat %s: %s", name, e)
                continue
            if st is not None and self._verified.get(name) == _identity(st):
                continue
            todo.append((-(st.st_mtime if st else float("inf")), name, st))
        new: list[Refusal] = []
        budget = self.verify_bytes
        for _, name, st in sorted(todo, key=lambda t: (t[0], t[1])):
            if st is not None and budget <= 0:
                break
            path = os.path.join(self.index_dir, name)
            error = "the manifest names it, but there is no such file" if st is None else self._verify(path)
            if st is not None:
                budget -= st.st_size
            if error is None and st is not None:
                self._verified[name] = _identity(st)
                continue
            if not self._still_named(name):  # replaced meanwhile (a re-index, a compaction): not lost
                continue
            refusal = self._refuse(name, error or "", st is None, store)
            new.append(refusal)
            changed = True
        if changed:
            self._write_status()
        return new

    def _still_named(self, name: str) -> bool:
        """Whether the manifest names shard `name` now (read again: a swap may have replaced it
        and deleted its file after the check read the manifest)."""
        try:
            man = manifest.read_manifest(self.index_dir)
        except IndexFormatError:
            return False
        return man is not None and name in man.get("shards", {})

    def _verify(self, path: str) -> str | None:
        """None when the shard at `path` opens and every checksum holds; else why not."""
        try:
            Shard(path).close()
        except (IndexFormatError, OSError) as e:
            return str(e)
        return None

    def _refuse(self, name: str, error: str, missing: bool, store: Store) -> Refusal:
        path = os.path.join(self.index_dir, name)
        refusal = Refusal(name, reason_of(error, missing), error, manifest.shard_repos(path), time.time())
        if not missing:
            aside = os.path.join(self.index_dir, REFUSED_DIR)
            try:
                os.makedirs(aside, exist_ok=True)
                refusal.moved_to = os.path.join(aside, f"{name}.{int(refusal.since)}")
                os.replace(path, refusal.moved_to)
            except OSError as e:
                log.error("index integrity: %s could not be moved aside: %s", path, e)
                refusal.moved_to = None
        for repo_id in refusal.repositories:
            try:
                store.enqueue_index_job(repo_id, rebuild=True)
            except CodesearchError as e:  # garbage-collected meanwhile, or the store is down: said, not fatal
                log.error("index integrity: repository %d not queued for a rebuild: %s", repo_id, e)
        log.error(
            "index shard %s refused (%s): %s; moved to %s; rebuilding %s",
            name,
            refusal.reason,
            error,
            refusal.moved_to or "(no file)",
            ", ".join(refusal.repositories.values()) or "(no live repository)",
        )
        self.refused[name] = refusal
        metrics.inc("codesearch_index_shard_refusals", reason=refusal.reason)
        return refusal

    def _forget_gone(self, names: set[str]) -> bool:
        """Drop what the manifest no longer names: a refused shard that left it was rebuilt."""
        for name in set(self._verified) - names:
            del self._verified[name]
        gone = [n for n in self.refused if n not in names]
        for name in gone:
            r = self.refused.pop(name)
            log.warning(
                "index shard %s, refused %.0fs ago, is replaced: %s searchable again",
                name,
                time.time() - r.since,
                ", ".join(r.repositories.values()) or "nothing was",
            )
        return bool(gone)

    def _write_status(self) -> None:
        """`STATUS_FILE`, atomically; and the gauge of refused shards."""
        metrics.set_gauge("codesearch_index_refused_shards", len(self.refused))
        target = os.path.join(self.index_dir, STATUS_FILE)
        if not self.refused and not os.path.exists(target):
            return  # nothing refused, nothing to clear: an index without refusals has no such file
        status = {"refused": [asdict(r) for r in self.refused.values()]}
        try:
            fd, tmp = tempfile.mkstemp(prefix=".refused-", dir=self.index_dir)
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump(status, f)
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as e:  # a full disk: the log and the gauge still say it
            log.error("index integrity: %s not written: %s", STATUS_FILE, e)


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def refusal_summary(index_dir: str) -> dict[str, Any] | None:
    """What `/api/health` says of the index: None when no shard is refused (or nobody wrote the
    status), else the counts (never repository names: health answers anyone)."""
    try:
        with open(os.path.join(index_dir, STATUS_FILE), encoding="utf-8") as f:
            refused = json.load(f).get("refused") or []
    except (OSError, ValueError, AttributeError):
        return None
    if not refused:
        return None
    repos = {i for r in refused for i in (r.get("repositories") or {})}
    return {"refusedShards": len(refused), "missingRepositories": len(repos)}
