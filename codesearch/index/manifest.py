"""The index manifest: which shard files make up the index, swapped atomically per repository.

``<index dir>/manifest.json`` (format 1)::

    {"format": 1, "generation": 7,
     "repos": {"<repo id>": {"name": "github.com/acme/api", "generation": 7,
                             "shards": ["github.com_acme_api.123.g7.0.shard", ...]}}}

A re-index writes the repository's new shards under new file names (the generation is part of
the name, so nothing in use is overwritten), then replaces the repository's entry in the
manifest: the manifest is written to a temporary file, fsynced and renamed, so a reader sees
the old set of shards or the new one, never a mix. Writers serialise on ``manifest.lock``
(``flock``), so indexers in several processes can finish at the same time. Shard files that no
manifest entry names any more are deleted; a reader that still has one mapped keeps reading it
(POSIX keeps unlinked files alive while mapped).

An index directory without a manifest (built by older code, or by hand) is read as "every
``*.shard`` file", so it keeps working.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile

from codesearch.errors import IndexFormatError
from codesearch.index.format import SUFFIX

MANIFEST = "manifest.json"
LOCK = "manifest.lock"
FORMAT = 1


def read_manifest(index_dir: str) -> dict | None:
    """The manifest, or None when the directory has none."""
    path = os.path.join(index_dir, MANIFEST)
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise IndexFormatError(path, f"unreadable manifest: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("repos"), dict):
        raise IndexFormatError(path, f"not a format-{FORMAT} index manifest")
    return data


def current_shards(index_dir: str) -> list[str]:
    """Paths of the shard files that make up the index now, in a stable order."""
    manifest = read_manifest(index_dir)
    if manifest is None:
        names = [f for f in os.listdir(index_dir) if f.endswith(SUFFIX) and not f.startswith(".")]
    else:
        names = [s for entry in manifest["repos"].values() for s in entry.get("shards", [])]
    return sorted(os.path.join(index_dir, n) for n in names)


@contextlib.contextmanager
def _locked(index_dir: str):
    os.makedirs(index_dir, exist_ok=True)
    fd = os.open(os.path.join(index_dir, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _write(index_dir: str, manifest: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=index_dir)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(index_dir, MANIFEST))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def next_generation(index_dir: str) -> int:
    """A generation number no shard file of this directory uses yet."""
    with _locked(index_dir):
        manifest = read_manifest(index_dir) or _adopt(index_dir)
        manifest["generation"] = int(manifest.get("generation", 0)) + 1
        _write(index_dir, manifest)
        return manifest["generation"]


def _adopt(index_dir: str) -> dict:
    """A manifest for a directory that has none: its shard files, grouped by file-name prefix."""
    repos: dict[str, dict] = {}
    for f in sorted(os.listdir(index_dir)):
        if f.endswith(SUFFIX) and not f.startswith("."):
            key = "legacy:" + f.rsplit(".", 2)[0]
            repos.setdefault(key, {"name": key, "generation": 0, "shards": []})["shards"].append(f)
    return {"format": FORMAT, "generation": 0, "repos": repos}


def swap_repo(index_dir: str, repo_id: int, name: str, generation: int, built: list[str],
              replaces_prefix: str | None = None) -> list[str]:
    """Move the freshly built shard files `built` into the index and make them the repository's
    shards, atomically; delete the files no manifest entry names any more.

    The move happens under the lock, so another writer's garbage collection never sees (and
    deletes) shards that are in the directory but not yet in the manifest. `replaces_prefix`
    also retires shards that an index without a manifest had for the repository. Returns the
    deleted file names.
    """
    with _locked(index_dir):
        manifest = read_manifest(index_dir) or _adopt(index_dir)
        names = []
        for path in built:
            name_ = os.path.basename(path)
            os.replace(path, os.path.join(index_dir, name_))
            names.append(name_)
        repos = manifest["repos"]
        if replaces_prefix:
            for key in [k for k in repos if k.startswith("legacy:") and k[len("legacy:"):] == replaces_prefix]:
                del repos[key]
        repos[str(repo_id)] = {"name": name, "generation": generation, "shards": names}
        _write(index_dir, manifest)
        return _collect_garbage(index_dir, manifest)


def remove_repo(index_dir: str, repo_id: int) -> list[str]:
    """Drop a repository from the index (garbage collection); returns the deleted file names."""
    with _locked(index_dir):
        manifest = read_manifest(index_dir)
        if manifest is None or manifest["repos"].pop(str(repo_id), None) is None:
            return []
        _write(index_dir, manifest)
        return _collect_garbage(index_dir, manifest)


def _collect_garbage(index_dir: str, manifest: dict) -> list[str]:
    live = {s for entry in manifest["repos"].values() for s in entry.get("shards", [])}
    gone = []
    for f in os.listdir(index_dir):
        if f.endswith(SUFFIX) and not f.startswith(".") and f not in live:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(index_dir, f))
                gone.append(f)
    return gone
