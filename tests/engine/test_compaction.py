"""Compound shards: tombstones, compaction and the manifest that holds them.

* a table of manifest operations (re-index, remove, compaction, and a compaction that races a
  re-index) with the manifest each one must leave;
* differential checks on twelve small git repositories: the engine equals the brute-force oracle
  with one shard per repository, after compaction into a compound shard, after re-indexing one
  repository (its old documents tombstoned, the compound shard not rewritten), after removing
  one, and after compacting again;
* an index an older codesearch wrote is refused, never misread, and named for re-indexing.
"""

from __future__ import annotations

import json
import os
import struct

import pytest

from codesearch.errors import IndexFormatError
from codesearch.index import manifest
from codesearch.index.builder import IndexSettings, index_source
from codesearch.index.compact import compact, plan
from codesearch.index.shard import Shard
from codesearch.index.sources import GitSource, RepoInfo
from codesearch.search.engine import Searcher
from tests.corpus import git, make_local_repo
from tests.oracle import Oracle, docs_from_git, engine_spans

# ---------------------------------------------------------------------------------------------
# The manifest, operation by operation

OPS = [
    # (operation, expected {"repos": {id: shards}, "shards": {name: (repos, dead)}} after it)
    (("swap", 1, ["a"]), {"repos": {"1": ["a"]}, "shards": {"a": ([1], [])}}),
    (("swap", 2, ["b"]), {"repos": {"1": ["a"], "2": ["b"]}, "shards": {"a": ([1], []), "b": ([2], [])}}),
    (("swap", 3, ["c1", "c2"]), {"repos": {"1": ["a"], "2": ["b"], "3": ["c1", "c2"]},
                                 "shards": {"a": ([1], []), "b": ([2], []), "c1": ([3], []), "c2": ([3], [])}}),
    # compaction: a, b and c1 become one compound shard m (c2 stays)
    (("replace", {"a": [], "b": [], "c1": []}, {"m": [1, 2, 3]}),
     {"repos": {"1": ["m"], "2": ["m"], "3": ["c2", "m"]}, "shards": {"c2": ([3], []), "m": ([1, 2, 3], [])}}),
    # re-index 2: its documents in m are tombstoned, m is not rewritten
    (("swap", 2, ["d"]), {"repos": {"1": ["m"], "2": ["d"], "3": ["c2", "m"]},
                          "shards": {"c2": ([3], []), "d": ([2], []), "m": ([1, 2, 3], [2])}}),
    # remove 3: tombstoned in m, and c2 (only 3) leaves the index
    (("remove", 3), {"repos": {"1": ["m"], "2": ["d"]}, "shards": {"d": ([2], []), "m": ([1, 2, 3], [2, 3])}}),
    # re-index 1: every repository of m is dead now, so m leaves the index and its file goes
    (("swap", 1, ["e"]), {"repos": {"1": ["e"], "2": ["d"]}, "shards": {"d": ([2], []), "e": ([1], [])}}),
]


def test_manifest_operations(tmp_path):
    ix = str(tmp_path / "ix")
    os.makedirs(ix)
    build = tmp_path / "build"
    build.mkdir()

    def files(names):
        paths = []
        for n in names:
            p = build / f"{n}.shard"
            p.write_bytes(b"x")
            paths.append(str(p))
        return paths

    for op, want in OPS:
        if op[0] == "swap":
            manifest.swap_repo(ix, op[1], f"repo{op[1]}", 1, files(op[2]))
        elif op[0] == "remove":
            manifest.remove_repo(ix, op[1])
        else:
            sources = {f"{n}.shard": frozenset(d) for n, d in op[1].items()}
            built = files(op[2])
            assert manifest.replace_shards(ix, sources, built, {f"{n}.shard": r for n, r in op[2].items()})
        got = manifest.read_manifest(ix)
        assert {k: [s.removesuffix(".shard") for s in v["shards"]] for k, v in got["repos"].items()} == want["repos"], op
        assert {k.removesuffix(".shard"): (v["repos"], v["dead"]) for k, v in got["shards"].items()} == want["shards"], op
        assert sorted(f for f in os.listdir(ix) if f.endswith(".shard")) == sorted(f"{n}.shard" for n in want["shards"])


def test_a_compaction_that_lost_a_source_is_refused(tmp_path):
    ix = str(tmp_path / "ix")
    os.makedirs(ix)
    for rid, name in ((1, "a"), (2, "b")):
        p = tmp_path / f"{name}.shard"
        p.write_bytes(b"x")
        manifest.swap_repo(ix, rid, f"repo{rid}", 1, [str(p)])
    manifest.remove_repo(ix, 2)  # b leaves the index while a compaction of a and b runs
    built = tmp_path / "m.shard"
    built.write_bytes(b"x")
    assert not manifest.replace_shards(ix, {"a.shard": frozenset(), "b.shard": frozenset()}, [str(built)],
                                       {"m.shard": [1, 2]})
    assert not built.exists() and set(manifest.read_manifest(ix)["shards"]) == {"a.shard"}


def test_a_race_with_a_reindex_keeps_the_new_documents(tmp_path):
    ix = str(tmp_path / "ix")
    os.makedirs(ix)

    def shard(name):
        p = tmp_path / f"{name}.shard"
        p.write_bytes(b"x")
        return str(p)

    manifest.swap_repo(ix, 1, "repo1", 1, [shard("a")])
    manifest.swap_repo(ix, 2, "repo2", 1, [shard("b")])
    assert manifest.replace_shards(ix, {"a.shard": frozenset(), "b.shard": frozenset()}, [shard("m")],
                                   {"m.shard": [1, 2]})
    sources = {"m.shard": frozenset()}  # a compactor reads m (1 and 2 alive) to rewrite it...
    manifest.swap_repo(ix, 1, "repo1", 2, [shard("a2")])  # ...while 1 is re-indexed
    assert manifest.replace_shards(ix, sources, [shard("n")], {"n.shard": [1, 2]})
    got = manifest.read_manifest(ix)
    assert got["shards"]["n.shard"] == {"repos": [1, 2], "dead": [1]}  # n's copy of 1 is the old one
    assert got["repos"]["1"]["shards"] == ["a2.shard"] and got["repos"]["2"]["shards"] == ["n.shard"]


def test_files_left_by_a_writer_that_died_mid_swap_are_swept(tmp_path):
    """A writer killed between moving its shard in and writing the manifest (and a compactor
    killed mid-merge) leaves files nothing names; the compactor's next pass deletes them and
    nothing the manifest names."""
    from codesearch.runtime.compactor import Compactor

    data = tmp_path / "data"
    ix = data / "index"
    ix.mkdir(parents=True)
    kept = tmp_path / "a.shard"
    kept.write_bytes(b"x")
    manifest.swap_repo(str(ix), 1, "repo1", 1, [str(kept)])
    (ix / "compound.g9.0.shard").write_bytes(b"moved in, manifest never written")
    (ix / ".compact-9").mkdir()
    (ix / ".compact-9" / "compound.g9.1.shard").write_bytes(b"half written")
    assert manifest.collect_garbage(str(tmp_path / "no-manifest")) == []
    Compactor(str(data)).sweep()
    assert sorted(os.listdir(ix)) == sorted(["a.shard", "manifest.json", "manifest.lock"])
    assert set(manifest.read_manifest(str(ix))["shards"]) == {"a.shard"}


def test_build_folders_of_dead_builds_are_swept_and_live_ones_kept(tmp_path):
    """A build folder lives as long as its process holds its lock: a killed builder's goes at
    the next sweep, a running one's (in this process or another) stays, and a folder without a
    lock file goes only once it is a day old."""
    import signal
    import subprocess
    import sys
    import time

    from codesearch.index import scratch

    ix = str(tmp_path)
    code = ("import sys, time; from codesearch.index import scratch; "
            "print(scratch.open_build_dir(sys.argv[1], 7), flush=True); time.sleep(60)")
    killed = subprocess.Popen([sys.executable, "-c", code, ix], stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen([sys.executable, "-c", code, ix], stdout=subprocess.PIPE, text=True)
    try:
        dead_dir, other_dir = killed.stdout.readline().strip(), other.stdout.readline().strip()
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        mine = scratch.open_build_dir(ix, 8)
        young, old = tmp_path / ".build-9-young", tmp_path / ".build-9-old"
        young.mkdir()
        old.mkdir()
        os.utime(old, (time.time() - 2 * scratch.UNHELD_MAX_AGE_S,) * 2)
        gone = scratch.sweep(ix)
        assert sorted(gone) == sorted([os.path.basename(dead_dir), old.name])
        assert os.path.isdir(mine) and os.path.isdir(other_dir) and young.is_dir()
        scratch.remove_build_dir(mine)
        assert not os.path.exists(mine) and os.path.basename(mine) not in scratch.sweep(ix)
    finally:
        for p in (killed, other):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)


# ---------------------------------------------------------------------------------------------
# Differential: many small repositories, compacted, re-indexed, removed

N = 12
QUERIES = [  # (query, flags, tree for the oracle)
    ("needle", {}, ("text", "needle")),
    ("Needle", {"case_sensitive": True}, ("text", "Needle")),
    ("handler_3", {}, ("text", "handler_3")),
    ("repo:r0[0-5]$ needle", {}, ("and", ("repo", "r0[0-5]$"), ("text", "needle"))),
    ("-file:README needle", {}, ("and", ("not", ("file", "README")), ("text", "needle"))),
    ("shared or common", {}, ("or", ("text", "shared"), ("text", "common"))),
    (r'"def handler_\d+"', {"is_regex": True}, ("regex", r"def handler_\d+")),
    ("sym:^handler_7$", {}, ("sym", "^handler_7$")),
    ("lang:python return", {}, ("and", ("lang", "python"), ("text", "return"))),
]


def _files(i: int, version: int = 1) -> dict[str, str]:
    body = f"def handler_{i}():\n    return 'Needle {i}'\n" if version == 1 else f"def renamed_{i}():\n    return 'moved'\n"
    return {f"src/mod_{i}.py": body, "README.md": f"repository {i}: needle and shared text\n",
            "data/common.txt": "common words\n" * (i + 1)}


@pytest.fixture()
def world(tmp_path):
    repos = {}
    for i in range(N):
        path = make_local_repo(str(tmp_path / "src" / f"r{i:02d}"), _files(i))
        repos[i] = (path, RepoInfo(name=f"git.example.com/t/r{i:02d}", id=100 + i))
    ix = str(tmp_path / "index")
    settings = IndexSettings(ctags=True)
    for path, info in repos.values():
        index_source(GitSource(path, repo=info), ix, settings)
    return {"repos": repos, "index": ix, "settings": settings, "scratch": str(tmp_path / "scratch"), "removed": set()}


def _oracle(w) -> Oracle:
    docs, repos = [], {}
    for i, (path, info) in w["repos"].items():
        if i not in w["removed"]:
            docs += docs_from_git(path, info.name, ["refs/heads/main"], os.path.join(w["scratch"], str(len(docs))))
            repos[info.name] = {"default": "refs/heads/main"}
    return Oracle(docs, repos=repos)


def _check_all(w) -> None:
    oracle = _oracle(w)
    s = Searcher(w["index"])
    try:
        for query, flags, tree in QUERIES:
            want = oracle.search(tree, case_sensitive=flags.get("case_sensitive", False))
            got = engine_spans(s.search(query, matches=10**6, **flags))
            assert got == want, query
    finally:
        s.close()


def _shard_names(w) -> list[str]:
    return [os.path.basename(p) for p in manifest.current_shards(w["index"])]


def test_compaction_reindex_and_removal_keep_answers_exact(world):
    w = world
    assert len(_shard_names(w)) == N
    _check_all(w)

    stats = compact(w["index"], w["settings"])
    names = _shard_names(w)
    assert len(names) == 1 and names[0].startswith("compound.") and stats.merged_shards == N
    assert {r.id for r in Shard(manifest.current_shards(w["index"])[0]).repos} == {100 + i for i in range(N)}
    assert plan(w["index"], w["settings"].shard_max_bytes) == []  # nothing left to do
    _check_all(w)

    # re-index repository 3 with new contents: its old documents are tombstoned, the compound
    # shard is not rewritten (same file), the new ones come in a shard of their own
    compound = os.path.join(w["index"], names[0])
    inode = os.stat(compound).st_ino
    path, info = w["repos"][3]
    for name in list(_files(3)):
        os.remove(os.path.join(path, name))
    for name, text in _files(3, version=2).items():
        os.makedirs(os.path.dirname(os.path.join(path, name)), exist_ok=True)
        with open(os.path.join(path, name), "w") as f:
            f.write(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "v2")
    index_source(GitSource(path, repo=info), w["index"], w["settings"])
    entries = {os.path.basename(e.path): e.dead for e in manifest.current_index(w["index"])}
    assert entries[names[0]] == frozenset({103}) and os.stat(compound).st_ino == inode and len(entries) == 2
    _check_all(w)

    # remove repository 7 (garbage collection): tombstoned too
    manifest.remove_repo(w["index"], 107)
    w["removed"].add(7)
    _check_all(w)

    # compacting again drops the dead documents and merges the new shard in
    stats = compact(w["index"], w["settings"])
    entries = manifest.current_index(w["index"])
    assert len(entries) == 1 and not entries[0].dead and stats.dropped_bytes > 0
    assert {r.id for r in Shard(entries[0].path).repos} == {100 + i for i in range(N)} - {107}
    _check_all(w)


def test_repo_filters_skip_shards_that_hold_only_dead_or_other_repos(world):
    w = world
    compact(w["index"], w["settings"])
    manifest.remove_repo(w["index"], 100)
    s = Searcher(w["index"])
    try:
        resp = s.search("repo:r00$ needle", matches=100)
        assert resp["files"] == [] and resp["stats"]["shardsSkippedFilter"] == 1 and resp["stats"]["filesLoaded"] == 0
    finally:
        s.close()


# ---------------------------------------------------------------------------------------------
# An index written by an older codesearch


def test_an_older_shard_format_is_refused_and_named_for_reindexing(world):
    w = world
    path = manifest.current_shards(w["index"])[0]
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(struct.pack("<I", 1))  # format version 1 in the header
    with pytest.raises(IndexFormatError, match="older codesearch"):
        Shard(path)
    entry = manifest.read_manifest(w["index"])["shards"][os.path.basename(path)]
    assert manifest.stale_repos(w["index"]) == entry["repos"]


def test_an_older_manifest_is_an_empty_index_whose_repos_are_stale(tmp_path):
    ix = tmp_path / "ix"
    ix.mkdir()
    (ix / "manifest.json").write_text(json.dumps({"format": 1, "generation": 3, "repos": {
        "5": {"name": "a", "generation": 3, "shards": ["a.5.g3.0.shard"]}, "9": {"name": "b", "generation": 1, "shards": []}}}))
    (ix / "a.5.g3.0.shard").write_bytes(b"CSSHARD\n" + struct.pack("<II", 1, 0))
    assert manifest.current_index(str(ix)) == [] and manifest.stale_repos(str(ix)) == [5, 9]
    p = tmp_path / "new.shard"
    p.write_bytes(b"x")
    manifest.swap_repo(str(ix), 5, "a", 4, [str(p)])  # the first new write starts a format-2 manifest
    got = manifest.read_manifest(str(ix))
    assert got["format"] == 2 and set(got["shards"]) == {"new.shard"} and sorted(os.listdir(ix)) == [
        "manifest.json", "manifest.lock", "new.shard"]


def test_planning_an_unchanged_index_opens_no_shard(world, monkeypatch):
    """The compactor plans every few seconds: a shard planned before (same file, same
    tombstones) is not opened again; one whose tombstones changed is."""
    from codesearch.index import compact as compact_module

    w = world
    compact(w["index"], w["settings"])
    opened = []
    real = compact_module.Shard

    def counting(path, *args, **kwargs):
        opened.append(os.path.basename(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(compact_module, "Shard", counting)
    target = w["settings"].shard_max_bytes
    compact_module._KNOWN_FACTS.clear()  # (as in a compactor that just started)
    assert plan(w["index"], target) == [] and len(opened) == 1
    assert plan(w["index"], target) == [] and len(opened) == 1
    for i in range(N // 2, N):  # the larger half of the repositories: most of the content is dead
        manifest.remove_repo(w["index"], 100 + i)
    assert plan(w["index"], target) == [_shard_names(w)] and len(opened) == 2
