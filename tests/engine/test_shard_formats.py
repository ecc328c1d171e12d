"""The index from every shard format version codesearch has shipped (tests/data/shard_formats: real
index directories written by each release): an older one is refused by the reader, named by
`stale_repos` and `built_from` so that it is indexed again, never searched as if it were current;
indexing again replaces it with a current shard that answers. The folder of the current format
is read and answers. A new format joins by adding its folder (see the README there)."""

from __future__ import annotations

import os
import shutil

import pytest

from codesearch.errors import IndexFormatError
from codesearch.index import manifest
from codesearch.index.builder import index_source
from codesearch.index.format import FORMAT_VERSION, SUFFIX, ShardFile, format_version
from codesearch.index.sources import DirectorySource, RepoInfo
from codesearch.search.engine import Searcher

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "shard_formats")
NAME = "tmp/shardsrc/greet"  # the repository as every golden index names it
REPO_ID = RepoInfo(name=NAME).id
SHIPPED = sorted(int(d[1:]) for d in os.listdir(DATA) if d.startswith("v") and d[1:].isdigit())


def golden(version: int, tmp_path) -> str:
    """A copy of the index directory written by format `version` (tests write into it)."""
    folder = str(tmp_path / f"v{version}")
    shutil.copytree(os.path.join(DATA, f"v{version}"), folder)
    return folder


def shard_of(folder: str) -> str:
    (name,) = [n for n in os.listdir(folder) if n.endswith(SUFFIX)]
    return os.path.join(folder, name)


def hits(folder: str) -> list[tuple[str, int]]:
    response = Searcher(folder).search("Hello")
    return sorted(
        (f["repository"], f["fileName"]["text"], r["start"]["lineNumber"])
        for f in response["files"]
        for c in f["chunks"]
        for r in c["matchRanges"]
    )


WANT = [(NAME, "hello.py", 2), (NAME, "hello.py", 3)]  # "hello" and "Hello": case-insensitive


def test_every_format_up_to_the_current_one_has_a_golden_index():
    assert SHIPPED == list(range(1, FORMAT_VERSION + 1)) or SHIPPED == list(range(1, FORMAT_VERSION)), (
        f"tests/data/shard_formats has {SHIPPED}; add v{FORMAT_VERSION} (see its README)"
    )


@pytest.mark.parametrize("version", SHIPPED)
def test_each_golden_shard_is_of_its_version(version):
    assert format_version(shard_of(os.path.join(DATA, f"v{version}"))) == version


@pytest.mark.parametrize("version", [v for v in SHIPPED if v < FORMAT_VERSION])
def test_an_older_shard_is_refused_named_stale_and_never_searched(version, tmp_path):
    folder = golden(version, tmp_path)
    with pytest.raises(IndexFormatError, match=f"format version {version}.*older codesearch: index it again"):
        ShardFile(shard_of(folder))
    assert manifest.stale_repos(folder) == [REPO_ID]  # the scheduler indexes these again
    assert manifest.built_from(folder, REPO_ID) is None  # nothing counts as built from it
    searcher = Searcher(folder)
    assert searcher.shards == [] and hits(folder) == []  # not misread: not read at all


@pytest.mark.parametrize("version", [v for v in SHIPPED if v < FORMAT_VERSION])
def test_an_older_index_is_replaced_by_indexing_again(version, tmp_path):
    folder = golden(version, tmp_path)
    old = shard_of(folder)
    index_source(DirectorySource(os.path.join(DATA, "greet"), repo=RepoInfo(name=NAME)), folder)
    assert not os.path.exists(old)
    assert format_version(shard_of(folder)) == FORMAT_VERSION
    assert manifest.stale_repos(folder) == []
    assert hits(folder) == WANT


@pytest.mark.skipif(FORMAT_VERSION not in SHIPPED, reason=f"no golden index of format {FORMAT_VERSION} yet")
def test_the_current_format_is_read_and_answers(tmp_path):
    folder = golden(FORMAT_VERSION, tmp_path)
    ShardFile(shard_of(folder))
    assert manifest.stale_repos(folder) == []
    assert hits(folder) == WANT
