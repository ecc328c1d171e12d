"""Symbol columns (`codesearch.index.symbol_columns`): a merge copies each document's symbols
column by column from the shards it reads, and must write the very bytes that turning them into
objects and back wrote (the object path, the reference here). Real shards, symbols from real
ctags, in several languages, with parents and kinds that differ from shard to shard."""

from __future__ import annotations

import random

import numpy as np
import pytest

from codesearch.index import manifest, symbol_columns
from codesearch.index.builder import IndexSettings, index_source
from codesearch.index.compact import compact
from codesearch.index.shard import Shard
from codesearch.index.sources import GitSource, RepoInfo
from codesearch.index.symbols import find_ctags
from tests.corpus import make_local_repo

pytestmark = pytest.mark.skipif(find_ctags() is None, reason="universal-ctags is not installed")

FILES = [
    {"a/m.py": "class Alpha:\n    def run(self):\n        pass\n\ndef helper():\n    return 1\n",
     "b/util.go": "package b\n\ntype Box struct{}\n\nfunc (b *Box) Open() {}\nfunc Close() {}\n"},
    {"src/x.c": "struct point { int x; };\nstatic int área(void) { return 0; }\n#define MAX 3\n",
     "web/app.js": "class Widget {\n  render() { return 1; }\n}\nfunction boot() {}\n", "README.md": "# Title\n"},
    {"pkg/Thing.java": "package pkg;\npublic class Thing {\n  int size;\n  void grow() {}\n}\n",
     "empty.txt": "nothing to tag\n", "lib/m.py": "def run():\n    pass\nclass Alpha:\n    pass\n"},
]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    base = tmp_path_factory.mktemp("symcols")
    ix = str(base / "index")
    for i, files in enumerate(FILES):
        path = make_local_repo(str(base / f"r{i}"), files)
        index_source(GitSource(path, repo=RepoInfo(name=f"git.example.com/t/r{i}", id=10 + i)), ix, IndexSettings())
    return ix


def _sections_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        x, y = a[name], b[name]
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert np.asarray(x).dtype == np.asarray(y).dtype and np.array_equal(x, y), name
        else:
            assert bytes(x) == bytes(y), name


def _orders(shards: list[Shard]) -> dict[str, list[tuple[int, int]]]:
    every = [(si, d) for si, s in enumerate(shards) for d in range(s.doc_count)]
    shuffled = every[:]
    random.Random(7).shuffle(shuffled)
    return {
        "each shard in order": every,
        "interleaved, as a merge sorts them": shuffled,
        "one shard's documents only": [x for x in every if x[0] == 1],
        "documents without symbols only": [x for x in every if not shards[x[0]].symbol_range(x[1])],
        "nothing": [],
    }


def test_columns_copied_from_shards_are_the_bytes_the_objects_make(index):
    shards = [Shard(p) for p in manifest.current_shards(index)]
    assert len(shards) == 3 and all(s.sym_line.size for s in shards)
    assert len({tuple(s.symbol_kinds) for s in shards}) == 3  # each shard its own kind table
    for case, docs in _orders(shards).items():
        copied = symbol_columns.from_shards(shards, docs)
        made = symbol_columns.from_symbols([shards[si].symbols(d) for si, d in docs])
        assert copied.kinds == made.kinds, case
        _sections_equal(symbol_columns.sections(copied), symbol_columns.sections(made))


def test_a_compaction_keeps_every_symbol(index, tmp_path):
    def symbols_by_file(ix: str) -> dict:
        out = {}
        for p in manifest.current_shards(ix):
            s = Shard(p)
            for d in range(s.doc_count):
                out[(s.repo(d).name, s.doc_path(d))] = s.symbols(d)
        return out

    before = symbols_by_file(index)
    assert sum(map(len, before.values())) > 10
    stats = compact(index, IndexSettings())
    assert stats.merged_shards == 3 and len(manifest.current_shards(index)) == 1
    assert symbols_by_file(index) == before
    merged = Shard(manifest.current_shards(index)[0])
    for name in ("Alpha", "run", "point", "MAX", "Widget", "Open"):  # the merged key table finds each definition
        defined = [d for d in range(merged.doc_count) if any(x.name == name for x in merged.symbols(d))]
        assert defined, name
        for d in defined:
            found = merged.symbols_named(name.upper().encode(), d)  # up to ASCII case
            assert [merged.symbol(k).name for k in found] == [x.name for x in merged.symbols(d) if x.name == name]
