"""`manifest.read_shared`: the manifest as read-only readers see it (the scheduler's index checks
every second, the integrity check, `current_index`, `built_from`), parsed again only when the
file changed, and never served stale: every write is seen at once, settled or not."""

from __future__ import annotations

import os

import pytest

from codesearch.index import manifest


def _manifest(generation: int, shards: dict[str, list[int]]) -> dict:
    return {
        "format": manifest.FORMAT,
        "generation": generation,
        "repos": {},
        "shards": {name: {"repos": [1], "dead": dead} for name, dead in shards.items()},
    }


@pytest.fixture
def index(tmp_path, monkeypatch):
    """An index directory with a manifest, and a count of the parses `read_shared` makes."""
    folder = str(tmp_path / "index")
    os.makedirs(folder)
    manifest._CACHE.pop(folder, None)
    manifest._write(folder, _manifest(1, {"a.shard": []}))
    parses = []
    real = manifest.read_manifest

    def counting(index_dir: str):
        parses.append(index_dir)
        return real(index_dir)

    monkeypatch.setattr(manifest, "read_manifest", counting)
    return folder, parses


def _later(monkeypatch, seconds: float) -> None:
    """The clock `read_shared` reads, `seconds` ahead of the file times."""
    now = manifest.time.time()
    monkeypatch.setattr(manifest.time, "time", lambda: now + seconds)


def test_a_settled_manifest_is_parsed_once(index, monkeypatch):
    folder, parses = index
    _later(monkeypatch, manifest.SETTLED_S + 1)
    first = manifest.read_shared(folder)
    assert manifest.read_shared(folder) is first
    assert [s.path for s in manifest.current_index(folder)] == [os.path.join(folder, "a.shard")]
    assert len(parses) == 1


def test_a_fresh_manifest_is_parsed_every_time(index, monkeypatch):
    """Written less than SETTLED_S ago: a file replaced in the same clock tick by one of the same
    size (on a reused inode) would look the same, so nothing is kept."""
    folder, parses = index
    _later(monkeypatch, 0)  # (the clock stops just after the write, however slow the machine)
    manifest.read_shared(folder)
    manifest.read_shared(folder)
    assert len(parses) == 2


@pytest.mark.parametrize(
    "change, expected",
    [
        ("tombstone", [("a.shard", frozenset({1}))]),
        ("new shard", [("a.shard", frozenset()), ("b.shard", frozenset())]),
        ("same size", [("z.shard", frozenset())]),
    ],
)
def test_every_write_is_seen(index, monkeypatch, change, expected):
    folder, _ = index
    _later(monkeypatch, manifest.SETTLED_S + 1)
    assert [(os.path.basename(s.path), s.dead) for s in manifest.current_index(folder)] == [("a.shard", frozenset())]
    shards = {
        "tombstone": {"a.shard": [1]},
        "new shard": {"a.shard": [], "b.shard": []},
        "same size": {"z.shard": []},
    }[change]
    manifest._write(folder, _manifest(2, shards))
    assert [(os.path.basename(s.path), s.dead) for s in manifest.current_index(folder)] == expected


def test_no_manifest_and_a_broken_one(index):
    folder, _ = index
    with open(os.path.join(folder, manifest.MANIFEST), "w") as f:
        f.write("{not json")
    with pytest.raises(manifest.IndexFormatError, match="unreadable manifest"):
        manifest.read_shared(folder)
    os.unlink(os.path.join(folder, manifest.MANIFEST))
    assert manifest.read_shared(folder) is None
