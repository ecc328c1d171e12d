"""Shards for searchers without the data directory (`codesearch.runtime.shard_copy`).

Plain objects here (the source and the copies in one process, two directories); the same code
on two Ray nodes is in `test_shards_without_shared_disk.py`."""

from __future__ import annotations

import os

import pytest

from codesearch.errors import IndexFormatError
from codesearch.runtime import shard_copy
from codesearch.runtime.shard_copy import ShardCopies, ShardSource, file_digest


@pytest.fixture
def built(tmp_path):
    src = tmp_path / "builder" / "index"
    src.mkdir(parents=True)
    (src / "r1.g1.0.shard").write_bytes(os.urandom(3 * 1024 + 17))
    (src / "r2.g1.0.shard").write_bytes(b"")
    return src


class Lying(ShardSource):
    """A source whose reads are corrupted (a bad disk, a bad transfer): one byte flipped."""

    def read(self, name, offset, size):
        data = bytearray(super().read(name, offset, size))
        if data:
            data[0] ^= 0xFF
        return bytes(data)


@pytest.mark.parametrize("chunk", [1000, 1 << 20])
def test_a_copy_is_fetched_verified_and_then_reused(built, tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(shard_copy, "CHUNK_BYTES", chunk)
    copies = ShardCopies(str(tmp_path / "far"), ShardSource(str(built)))
    for name in ("r1.g1.0.shard", "r2.g1.0.shard"):
        local = copies.local(str(built / name))
        assert local == str(tmp_path / "far" / name) and local != str(built / name)
        assert open(local, "rb").read() == (built / name).read_bytes()
        assert open(local + ".b2").read() == file_digest(str(built / name))
    assert copies.fetched == 2
    copies.local(str(built / "r1.g1.0.shard"))
    assert copies.fetched == 2  # the verified copy is used as it is


def test_a_copy_that_does_not_match_is_refused_and_the_old_one_kept(built, tmp_path):
    good = ShardCopies(str(tmp_path / "far"), ShardSource(str(built)))
    kept = good.local(str(built / "r1.g1.0.shard"))
    (built / "r1.g1.0.shard").write_bytes(os.urandom(4000))  # a new file under the same name
    bad = ShardCopies(str(tmp_path / "far"), Lying(str(built)))
    with pytest.raises(IndexFormatError, match="does not match the source"):
        bad.local(str(built / "r1.g1.0.shard"))
    assert os.path.exists(kept) and not [n for n in os.listdir(tmp_path / "far") if n.startswith(".fetch-")]
    assert good.local(str(built / "r1.g1.0.shard")) == kept  # an honest source replaces it
    assert open(kept, "rb").read() == (built / "r1.g1.0.shard").read_bytes()


@pytest.mark.parametrize("name", ["../secret", "sub/dir.shard", ".hidden.shard", "", "manifest.json", "manifest.lock"])
def test_a_source_serves_only_files_of_its_index(built, name):
    with pytest.raises(IndexFormatError):
        ShardSource(str(built)).describe(name)


def test_a_missing_shard_is_a_clear_error(built, tmp_path):
    copies = ShardCopies(str(tmp_path / "far"), ShardSource(str(built)))
    with pytest.raises(IndexFormatError, match="not readable where the index is built"):
        copies.local(str(built / "gone.shard"))


def test_prune_removes_the_copies_no_list_names(built, tmp_path):
    copies = ShardCopies(str(tmp_path / "far"), ShardSource(str(built)))
    a = copies.local(str(built / "r1.g1.0.shard"))
    b = copies.local(str(built / "r2.g1.0.shard"))
    assert copies.prune({a}) == 1
    assert sorted(os.listdir(tmp_path / "far")) == ["r1.g1.0.shard", "r1.g1.0.shard.b2"]
    assert not os.path.exists(b)
