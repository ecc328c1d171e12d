"""The index manifest: which shard files make up the index, and which of their documents are dead.

``<index dir>/manifest.json`` (format 2)::

    {"format": 2, "generation": 7,
     "repos":  {"<repo id>": {"name": "github.com/acme/api", "generation": 7,
                              "shards": ["github.com_acme_api.123.g7.0.shard", ...]}},
     "shards": {"github.com_acme_api.123.g7.0.shard": {"repos": [123], "dead": []},
                "compound.g9.0.shard": {"repos": [5, 8, 123], "dead": [123]}}}

A repository's entry may also carry ``"builtFrom"``: the key of what its documents were built
from (`builder.build_key`: shard format, indexing rules, repository metadata, revisions and their
commits). A re-index with the same key writes nothing (`built_from`); compaction keeps the key,
since it moves documents without changing them. Manifests without the field are read as before.

A shard may hold the documents of several repositories (a compound shard, `compact.py`).
``repos[id].shards`` are the shards that hold the repository's live documents; a shard's
``dead`` lists the repositories whose documents in it are *tombstoned*: re-indexed since (their
new documents are in other shards) or removed. Searches skip tombstoned documents
(`Shard.with_dead`); `compact.py` rewrites shards to drop them and merges small shards.

Every change is one atomic manifest write (temporary file, fsync, rename), under
``manifest.lock`` (``flock``) so indexers and the compactor in several processes serialise:

* `swap_repo` (a re-index): the repository's new shards join the index and its documents in
  every older shard are tombstoned, in one write, so a reader sees the old version of the
  repository or the new one, never a mix and never nothing. Its neighbours in a compound shard
  are not rewritten. `swap_repos` does the same for several repositories built together into
  shared shards (a bulk build packing small repositories);
* `remove_repo` (garbage collection): the repository's documents are tombstoned;
* `replace_shards` (compaction): a set of shards is replaced by shards holding the same live
  documents; tombstones written meanwhile carry over.

A shard whose repositories are all dead leaves the manifest. Shard files that no manifest entry
names any more are deleted; a reader that still has one mapped keeps reading it (POSIX keeps
unlinked files alive while mapped).

An index directory without a manifest (built by hand) is read as "every ``*.shard`` file".
A format-1 manifest (an older codesearch, whose shards this one cannot read) is read as an empty
index: `stale_repos` names its repositories so that they are indexed again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from codesearch.errors import IndexFormatError
from codesearch.index.format import FORMAT_VERSION, SUFFIX, disk_full_as_error, format_version

MANIFEST = "manifest.json"
LOCK = "manifest.lock"
FORMAT = 2

#: The manifest as read from its JSON file: {"format", "generation", "repos": {key: {"name",
#: "generation", "shards"}}, "shards": {file name: {"repos", "dead"}}} (see the module docstring).
Manifest = dict[str, Any]
#: A repository in the manifest: its id, or "legacy:<file-name prefix>" for an adopted shard.
RepoKey = int | str


@dataclass(frozen=True)
class IndexedShard:
    """One shard of the index now: its file and the repositories tombstoned in it."""

    path: str
    dead: frozenset[int] = frozenset()


def read_manifest(index_dir: str) -> Manifest | None:
    """The manifest, or None when the directory has none. A manifest of an older format is
    returned as it is (`is_current` tells)."""
    path = os.path.join(index_dir, MANIFEST)
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise IndexFormatError(path, f"unreadable manifest: {e}") from None
    if not isinstance(data, dict) or data.get("format") not in (1, FORMAT) or not isinstance(data.get("repos"), dict):
        raise IndexFormatError(path, f"not a codesearch index manifest (format {FORMAT})")
    return data


def is_current(manifest: Manifest) -> bool:
    return manifest.get("format") == FORMAT


def current_index(index_dir: str) -> list[IndexedShard]:
    """The shards that make up the index now, with their tombstones, in a stable order. The
    manifest is parsed again only when its file changed (`read_shared`): the scheduler asks
    every second, and at 6,457 repositories the manifest is 1.4 MB of JSON (~15 ms to parse)."""
    manifest = read_shared(index_dir)
    if manifest is None:
        names = [f for f in os.listdir(index_dir) if f.endswith(SUFFIX) and not f.startswith(".")]
        return [IndexedShard(os.path.join(index_dir, n)) for n in sorted(names)]
    if not is_current(manifest):
        return []
    return [
        IndexedShard(os.path.join(index_dir, name), frozenset(d for d in entry.get("dead", ()) if isinstance(d, int)))
        for name, entry in sorted(manifest["shards"].items())
    ]


def current_shards(index_dir: str) -> list[str]:
    """Paths of the shard files that make up the index now, in a stable order."""
    return [s.path for s in current_index(index_dir)]


def stale_repos(index_dir: str) -> list[int]:
    """Repositories whose index this codesearch cannot read (an older manifest or shard format):
    they must be indexed again."""
    manifest = read_manifest(index_dir)
    if manifest is None:
        return []
    if not is_current(manifest):
        return sorted(int(k) for k in manifest["repos"] if k.isdigit())
    stale = set()
    for name, entry in manifest["shards"].items():
        if format_version(os.path.join(index_dir, name)) != FORMAT_VERSION:
            stale.update(set(entry.get("repos", ())) - set(entry.get("dead", ())))
    return sorted(stale)


@contextlib.contextmanager
def _locked(index_dir: str) -> Iterator[None]:
    os.makedirs(index_dir, exist_ok=True)
    fd = os.open(os.path.join(index_dir, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _write(index_dir: str, manifest: Manifest) -> None:
    """Replace the manifest atomically; on a full disk (`DiskFull`) the previous one stays."""
    with disk_full_as_error(os.path.join(index_dir, MANIFEST), "writing the index manifest"):
        fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=index_dir)
        try:
            with os.fdopen(fd, "w") as f:
                # compact: without `indent` json encodes in C; an indented manifest of thousands of
                # repositories took ~30 ms of pure-Python encoding per write, two writes per index job
                f.write(json.dumps(manifest, sort_keys=True, separators=(",", ":")))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, os.path.join(index_dir, MANIFEST))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def _load(index_dir: str) -> Manifest:
    """The manifest to change: the current one, a new one for a directory without one, or a new
    one in place of an older format (whose shards this codesearch cannot read: they go)."""
    manifest = read_manifest(index_dir)
    if manifest is None:
        return _adopt(index_dir)
    if not is_current(manifest):
        return {"format": FORMAT, "generation": int(manifest.get("generation", 0)), "repos": {}, "shards": {}}
    return manifest


def next_generation(index_dir: str) -> int:
    """A generation number no shard file of this directory uses yet."""
    with _locked(index_dir):
        manifest = _load(index_dir)
        generation = manifest["generation"] = int(manifest.get("generation", 0)) + 1
        _write(index_dir, manifest)
        return generation


def _adopt(index_dir: str) -> Manifest:
    """A manifest for a directory that has none: its readable shard files, grouped by file-name
    prefix under made-up repository keys."""
    repos: dict[str, dict[str, Any]] = {}
    shards: dict[str, dict[str, Any]] = {}
    if os.path.isdir(index_dir):
        for f in sorted(os.listdir(index_dir)):
            if f.endswith(SUFFIX) and not f.startswith("."):
                key = "legacy:" + f.rsplit(".", 2)[0]
                repos.setdefault(key, {"name": key, "generation": 0, "shards": []})["shards"].append(f)
                shards[f] = {"repos": [key], "dead": []}
    return {"format": FORMAT, "generation": 0, "repos": repos, "shards": shards}


def _tombstone(manifest: Manifest, key: RepoKey, names: Iterable[str]) -> None:
    """Mark repository `key`'s documents dead in the shards `names`."""
    for name in names:
        entry = manifest["shards"].get(name)
        if entry is not None and key in entry["repos"] and key not in entry["dead"]:
            entry["dead"] = sorted(entry["dead"] + [key], key=str)


def _drop_dead_shards(manifest: Manifest) -> None:
    for name in [n for n, e in manifest["shards"].items() if set(e["repos"]) <= set(e["dead"])]:
        del manifest["shards"][name]


def swap_repo(
    index_dir: str,
    repo_id: int,
    name: str,
    generation: int,
    built: list[str],
    replaces_prefix: str | None = None,
    built_from: str | None = None,
) -> list[str]:
    """Move the freshly built shard files `built` (all of repository `repo_id`) into the index,
    make them the repository's shards and tombstone its documents in the shards it had,
    atomically; delete the files no manifest entry names any more.

    The move happens under the lock, so another writer's garbage collection never sees (and
    deletes) shards that are in the directory but not yet in the manifest. `replaces_prefix`
    also retires shards that an index without a manifest had for the repository; `built_from` is
    the build's key (`builder.build_key`), kept for `built_from`. Returns the deleted file names.
    """
    repos_of = {os.path.basename(p): [repo_id] for p in built}
    keys = {repo_id: built_from} if built_from else None
    return swap_repos(index_dir, [(repo_id, name, replaces_prefix)], generation, built, repos_of, keys)


def swap_repos(
    index_dir: str,
    swapped: Sequence[tuple[int, str, str | None]],
    generation: int,
    built: list[str],
    repos_of: dict[str, list[int]],
    keys: dict[int, str] | None = None,
) -> list[str]:
    """`swap_repo` for several repositories at once, built together into shared shards (a bulk
    build packs small repositories into compound shards): `swapped` lists (repository id, name,
    replaced prefix or None), `repos_of` the repositories each built file holds (keyed by file
    name), `keys` their build keys where known. One atomic write: every one of them switches to
    its new documents together."""
    with _locked(index_dir):
        manifest = _load(index_dir)
        names = []
        for path in built:
            name_ = os.path.basename(path)
            os.replace(path, os.path.join(index_dir, name_))
            names.append(name_)
        repos = manifest["repos"]
        for repo_id, name, replaces_prefix in swapped:
            if replaces_prefix:
                for key in [k for k in repos if k.startswith("legacy:") and k[len("legacy:") :] == replaces_prefix]:
                    _tombstone(manifest, key, repos.pop(key)["shards"])
            old = repos.get(str(repo_id), {}).get("shards", [])
            _tombstone(manifest, repo_id, [n for n in old if n not in names])
            repos[str(repo_id)] = {
                "name": name,
                "generation": generation,
                "shards": [n for n in names if repo_id in repos_of[n]],
            }
            if keys and keys.get(repo_id):
                repos[str(repo_id)]["builtFrom"] = keys[repo_id]
        for n in names:
            manifest["shards"][n] = {"repos": list(repos_of[n]), "dead": []}
        _drop_dead_shards(manifest)
        _write(index_dir, manifest)
        return _collect_garbage(index_dir, manifest)


#: The last manifest `read_shared` parsed, per index directory: (its file's identity, the
#: manifest), kept only for a file that was older than `SETTLED_S` when it was parsed.
_CACHE: dict[str, tuple[tuple[int, int, int, int], Manifest]] = {}
#: File times are coarse (a few ms on ext4) and a freed inode may be reused: a file replaced
#: within the same tick by one of the same size could look the same. A file parsed when it was
#: older than this cannot: anything written after that has a later time.
SETTLED_S = 1.0


def read_shared(index_dir: str) -> Manifest | None:
    """`read_manifest` for readers that do not change it, parsed again only when the file is
    another one (every write renames a new file into place, so inode, size or times differ): a
    re-index pass over thousands of unchanged repositories parses a large manifest once, not once
    per repository, and the scheduler's checks every second cost a `stat` while the index does
    not change (at 6,457 repositories the manifest is 1.4 MB of JSON, ~15 ms to parse). A file
    written less than `SETTLED_S` ago is parsed every time. The result is shared between
    callers: never modify it."""
    path = os.path.join(index_dir, MANIFEST)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise IndexFormatError(path, f"unreadable manifest: {e}") from None
    identity = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    cached = _CACHE.get(index_dir)
    if cached is not None and cached[0] == identity:
        return cached[1]
    settled = time.time() - max(st.st_mtime, st.st_ctime) > SETTLED_S
    manifest = read_manifest(index_dir)
    if manifest is not None and settled:
        _CACHE[index_dir] = (identity, manifest)
    return manifest


def built_from(index_dir: str, repo_id: int) -> str | None:
    """The build key (`builder.build_key`) of repository `repo_id`'s documents in the index, when
    they are all there as built: the manifest is current, and each of its shards is listed, holds
    the repository alive and is on disk in this codesearch's shard format. None otherwise (never
    indexed, built without a key, or a shard lost or written by another version): rebuild."""
    try:
        manifest = read_shared(index_dir)
    except IndexFormatError:
        return None
    if manifest is None or not is_current(manifest):
        return None
    entry = manifest["repos"].get(str(repo_id))
    if not isinstance(entry, dict) or not isinstance(entry.get("builtFrom"), str):
        return None
    for name in entry.get("shards", ()):
        shard = manifest["shards"].get(name)
        if shard is None or repo_id not in shard.get("repos", ()) or repo_id in shard.get("dead", ()):
            return None
        try:
            if format_version(os.path.join(index_dir, name)) != FORMAT_VERSION:
                return None
        except (OSError, IndexFormatError):
            return None
    return str(entry["builtFrom"])


def shard_repos(path: str) -> dict[int, str]:
    """The repositories (id → name) whose live documents shard file `path` holds, per the
    manifest of its directory: what a search misses when the shard cannot be read. Empty when
    the manifest cannot say (none, unreadable, or it does not list the file)."""
    index_dir, name = os.path.split(path)
    try:
        manifest = read_shared(index_dir)
    except IndexFormatError:
        return {}
    if manifest is None or not is_current(manifest):
        return {}
    entry = manifest["shards"].get(name) or {}
    dead = set(entry.get("dead", ()))
    out: dict[int, str] = {}
    for repo_id in entry.get("repos", ()):
        if isinstance(repo_id, int) and repo_id not in dead:
            repo = manifest["repos"].get(str(repo_id)) or {}
            out[repo_id] = str(repo.get("name") or repo_id)
    return out


def remove_repo(index_dir: str, repo_id: int) -> list[str]:
    """Drop a repository from the index (garbage collection): its documents are tombstoned;
    returns the deleted file names (of shards that held nothing else)."""
    with _locked(index_dir):
        manifest = read_manifest(index_dir)
        if manifest is None or not is_current(manifest):
            return []
        entry = manifest["repos"].pop(str(repo_id), None)
        if entry is None:
            return []
        _tombstone(manifest, repo_id, entry["shards"])
        _drop_dead_shards(manifest)
        _write(index_dir, manifest)
        return _collect_garbage(index_dir, manifest)


def replace_shards(
    index_dir: str, sources: dict[str, frozenset[RepoKey]], built: list[str], repos_of: dict[str, list[int]]
) -> bool:
    """Compaction: replace the shards `sources` (file name → the tombstones they had when the
    compactor read them) by the freshly built `built` files (file path → its repositories in
    `repos_of`, keyed by file name), which hold the live documents of `sources`.

    Refused (False, nothing changed, the built files deleted) when a source left the index
    meanwhile. Repositories tombstoned in a source since it was read are tombstoned in the new
    shards too (their documents there are old now).
    """
    with _locked(index_dir):
        manifest = read_manifest(index_dir)
        if manifest is None or not is_current(manifest) or any(n not in manifest["shards"] for n in sources):
            for path in built:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            return False
        died = set()
        for n, dead_then in sources.items():
            died |= set(manifest["shards"][n]["dead"]) - set(dead_then)
        names = []
        for path in built:
            name_ = os.path.basename(path)
            os.replace(path, os.path.join(index_dir, name_))
            names.append(name_)
            held = list(repos_of[name_])
            manifest["shards"][name_] = {"repos": held, "dead": sorted(d for d in died if d in held)}
        for n in sources:
            del manifest["shards"][n]
        for key, entry in manifest["repos"].items():
            if any(n in sources for n in entry["shards"]):
                rid = int(key) if key.isdigit() else key
                kept = [n for n in entry["shards"] if n not in sources]
                entry["shards"] = kept + [n for n in names if rid in repos_of[n] and rid not in died]
        _drop_dead_shards(manifest)
        _write(index_dir, manifest)
        _collect_garbage(index_dir, manifest)
        return True


def collect_garbage(index_dir: str) -> list[str]:
    """Delete the shard files no manifest entry names: those a writer moved into the directory
    and then died before its manifest write (every writer moves and writes under the lock, so
    an unnamed file seen under the lock is nobody's). Returns the deleted file names; an index
    without a current manifest is left alone."""
    with _locked(index_dir):
        manifest = read_manifest(index_dir)
        if manifest is None or not is_current(manifest):
            return []
        return _collect_garbage(index_dir, manifest)


def _collect_garbage(index_dir: str, manifest: Manifest) -> list[str]:
    live = set(manifest["shards"])
    gone = []
    for f in os.listdir(index_dir):
        if f.endswith(SUFFIX) and not f.startswith(".") and f not in live:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(index_dir, f))
                gone.append(f)
    return gone
