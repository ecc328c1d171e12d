"""More than 64 branches per repository (issue 29, item 12): variable-length branch masks.

The specification, as tables:

* the branches every search result reports are checked against a brute-force table: each
  branch listed on its own with ``git ls-tree``, independently of the index, for repositories of
  70 and 200 branches (masks of 2 and 4 words) and one of a single branch, in separate shards and
  after compaction into one compound shard (where the narrow repository takes the wide width);
* the default cap stays Sourcebot's 64 revisions; `CODESEARCH_MAX_INDEXED_REVISIONS` (and
  ``codesearch index --max-revisions``) raises it, and a bad value is refused with a message
  that names the variable and what it accepts;
* masks round-trip through the format at any width, and a shard of format 3 (one-word masks,
  no width recorded) is refused and named for re-indexing, never misread.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess

import numpy as np
import pytest

from codesearch import cli, defaults, environment
from codesearch.errors import IndexFormatError, InvalidEnvironmentVariable
from codesearch.index import format as fmt
from codesearch.index import manifest
from codesearch.index.builder import IndexSettings
from codesearch.index.compact import compact
from codesearch.index.paths import index_paths
from codesearch.index.shard import Shard
from codesearch.runtime.workers import RepoIndexer
from codesearch.search.engine import Searcher

BRANCH_GLOBS = ["b/*"]


def _files(i: int) -> dict[str, str]:
    """What branch number `i` (0: main) holds: shared by all, by some, and its own files."""
    files = {
        "common.txt": "needle common\n",
        "group.txt": f"needle group {i % 7}\n",
        "own.txt": f"needle own {i}\n",
        "word.txt": f"needle word {i // 64}\n",
    }
    if i % 2:
        files["odd.txt"] = "needle odd\n"
    return files


def make_branchy_repo(path: str, branches: int) -> str:
    """A git repository with `main` and ``branches - 1`` more (``b/001`` …), each one commit
    written by one ``git fast-import`` (hundreds of branches in well under a second)."""
    os.makedirs(path)
    subprocess.run(["git", "init", "-q", "-b", "main", path], check=True)
    out = []
    for i in range(branches):
        ref = "refs/heads/main" if i == 0 else f"refs/heads/b/{i:03d}"
        msg = f"branch {i}".encode()
        out.append(f"commit {ref}\ncommitter T <t@example.com> {1_700_000_000 + i} +0000\n".encode())
        out.append(b"data %d\n%s\n" % (len(msg), msg))
        for name, text in _files(i).items():
            data = text.encode()
            out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name.encode(), len(data), data))
    subprocess.run(["git", "-C", path, "fast-import", "--quiet"], input=b"".join(out), check=True)
    return path


def brute_force(path: str) -> dict[tuple[str, str], set[str]]:
    """(path, blob sha) → the branches whose tree holds it, from ``git ls-tree`` of each branch."""
    refs = subprocess.run(
        ["git", "-C", path, "for-each-ref", "--format=%(refname)", "refs/heads/"], capture_output=True, check=True
    ).stdout.decode().split()
    table: dict[tuple[str, str], set[str]] = {}
    for ref in refs:
        listing = subprocess.run(["git", "-C", path, "ls-tree", "-r", ref], capture_output=True, check=True).stdout
        for line in listing.decode().splitlines():
            meta, name = line.split("\t", 1)
            table.setdefault((name, meta.split()[2]), set()).add(ref)
    return table


def blob_sha(content: str) -> str:
    data = content.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("branches")
    repos = {n: make_branchy_repo(str(root / f"r{n}"), n) for n in (1, 70, 200)}
    index = str(root / "index")
    stats = index_paths(
        [repos[1], repos[70], repos[200]],
        index,
        IndexSettings(ctags=False, max_revisions=defaults.MAX_INDEXED_REVISIONS_LIMIT),
        branches=BRANCH_GLOBS,
    )
    assert not stats.warnings
    return {"repos": repos, "index": index, "tables": {n: brute_force(p) for n, p in repos.items()}}


# (query, which branches a file must be on to match, which of them the result reports)
QUERIES = [
    ("needle rev:*", lambda ref: True, "the matching ones"),
    ("needle", lambda ref: ref == "refs/heads/main", "the matching ones"),  # no rev: the default branch
    # branches are ordered newest first (bit 1 is b/199 in r200, b/069 in r70):
    ("needle rev:b/19", lambda ref: "b/19" in ref, "the matching ones"),  # r200's bits 1-10: the first word
    ("needle rev:b/06", lambda ref: "b/06" in ref, "the matching ones"),  # r200's bits 134-143: the third word
    ("needle rev:b/00", lambda ref: "b/00" in ref, "the matching ones"),  # r200's 191-199, r70's 61-69 (2 words)
    ("needle rev:main", lambda ref: ref == "refs/heads/main", "the matching ones"),
    ("needle -rev:b/1", lambda ref: "b/1" not in ref, "all of the file's"),  # none positive: all are shown
]


def _expected(world, wanted, shown) -> dict[tuple[str, str, str], set[str]]:
    out = {}
    for n, table in world["tables"].items():
        name = os.path.abspath(world["repos"][n]).strip("/")
        for (path, sha), refs in table.items():
            hit = {r for r in refs if wanted(r)}
            if shown == "all of the file's":
                if hit == refs:  # a negated filter: no branch of the file may be excluded
                    out[(name, path, sha)] = refs
            elif hit:
                out[(name, path, sha)] = hit
    return out


def _reported(index: str, query: str) -> dict[tuple[str, str, str], set[str]]:
    s = Searcher(index)
    try:
        resp = s.search(query, matches=100_000, whole=True)
    finally:
        s.close()
    assert resp["isSearchExhaustive"]
    got: dict[tuple[str, str, str], set[str]] = {}
    for f in resp["files"]:
        key = (f["repository"], f["fileName"]["text"], blob_sha(f["content"]))
        assert key not in got, f"{key} reported twice"
        got[key] = set(f["branches"])
    return got


@pytest.mark.parametrize("query,wanted,shown", QUERIES, ids=[q for q, _, _ in QUERIES])
def test_branches_of_every_result_match_git_ls_tree(world, query, wanted, shown):
    assert _reported(world["index"], query) == _expected(world, wanted, shown)


def test_shards_are_as_wide_as_their_widest_repository_and_compaction_keeps_the_answers(world, tmp_path):
    widths = {}
    for path in manifest.current_shards(world["index"]):
        shard = Shard(path)
        widths[len(shard.repos[0].branches)] = shard.branch_words
        shard.close()
    assert widths == {1: 1, 70: 2, 200: 4}
    before = {q: _reported(world["index"], q) for q, _, _ in QUERIES}
    copy = str(tmp_path / "index")
    subprocess.run(["cp", "-r", world["index"], copy], check=True)
    compact(copy, IndexSettings(ctags=False))
    (only,) = manifest.current_shards(copy)
    shard = Shard(only)
    assert (len(shard.repos), shard.branch_words) == (3, 4)  # the one-branch repository's masks widened too
    shard.close()
    assert {q: _reported(copy, q) for q, _, _ in QUERIES} == before


# ------------------------------------------------------------------------------------- the cap


def test_the_default_cap_stays_64_and_a_setting_raises_it(world, tmp_path):
    path = world["repos"][200]
    stats = index_paths([path], str(tmp_path / "a"), IndexSettings(ctags=False), branches=BRANCH_GLOBS)
    assert any("200 revisions match; indexing the first 64, dropping 136" in w for w in stats.warnings)
    shard = Shard(stats.shards[0])
    assert (len(shard.repos[0].branches), shard.branch_words) == (64, 1)
    shard.close()
    settings = IndexSettings(ctags=False, max_revisions=150)
    stats = index_paths([path], str(tmp_path / "b"), settings, branches=BRANCH_GLOBS)
    shard = Shard(stats.shards[0])
    assert (len(shard.repos[0].branches), shard.branch_words) == (150, 3)
    shard.close()


ENV_CASES = [
    # (value, accepted as)
    (None, 64),
    ("", 64),
    ("1", 1),
    (" 1000 ", 1000),
    ("4096", 4096),
    ("0", None),
    ("4097", None),
    ("-5", None),
    ("1.5", None),
    ("lots", None),
]


@pytest.mark.parametrize("value,want", ENV_CASES)
def test_the_revision_cap_variable(value, want):
    env = {} if value is None else {"CODESEARCH_MAX_INDEXED_REVISIONS": value}
    if want is not None:
        assert environment.max_indexed_revisions(env) == want
        environment.check(env)
        return
    for call in (environment.max_indexed_revisions, environment.check):
        with pytest.raises(InvalidEnvironmentVariable) as e:
            call(env)
        text = str(e.value)
        assert "CODESEARCH_MAX_INDEXED_REVISIONS" in text and "from 1 to 4096" in text


def test_the_index_worker_takes_its_cap_from_its_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(environment.MAX_INDEXED_REVISIONS, "300")
    assert RepoIndexer(str(tmp_path), "w1").max_revisions == 300
    assert RepoIndexer(str(tmp_path), "w2", max_revisions=70).max_revisions == 70  # given: it wins
    assert IndexSettings().max_revisions == 64  # the library itself reads no environment
    monkeypatch.setenv(environment.MAX_INDEXED_REVISIONS, "0")
    with pytest.raises(InvalidEnvironmentVariable, match="CODESEARCH_MAX_INDEXED_REVISIONS"):
        RepoIndexer(str(tmp_path), "w3")


@pytest.mark.parametrize("value,want", [("200", 200), ("0", None), ("5000", None), ("x", None)])
def test_the_index_command_takes_a_cap(value, want, capsys):
    argv = ["index", "repo", "--out", "ix", "--max-revisions", value]
    if want is not None:
        assert cli.build_parser().parse_args(argv).max_revisions == want
        return
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(argv)
    assert "--max-revisions" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- the format


@pytest.mark.parametrize("bits,words", [([0], 1), ([63], 1), ([64], 2), ([0, 127], 2), ([5, 999], 16), ([], 1)])
def test_masks_round_trip_at_any_width(bits, words):
    mask = sum(1 << b for b in bits)
    assert fmt.branch_words([max(bits, default=0) + 1]) == words
    rows = fmt.pack_masks([mask, 0, mask], words)
    assert rows.shape == (3, words) and rows.dtype == np.uint64
    assert [fmt.mask_of(r) for r in rows] == [mask, 0, mask]
    names = [f"n{i}" for i in range(1000)]
    assert fmt.mask_names(names, mask) == [f"n{b}" for b in sorted(bits)]
    assert fmt.mask_names(names[:3], mask) == [f"n{b}" for b in sorted(bits) if b < 3]  # bits past the names: none
    with pytest.raises(ValueError, match="does not fit"):
        fmt.pack_masks([1 << (64 * words)], words)


def _words(path: str) -> int:
    shard = Shard(path)
    try:
        return shard.branch_words
    finally:
        shard.close()


def _rewrite(src: str, dst: str, change) -> None:
    """`src` written again to `dst` with `change` applied to its sections (valid checksums)."""
    f = fmt.ShardFile(src)
    sections = {tag: bytes(f.raw(tag)) for tag in f._sections}
    f.close()
    change(sections)
    fmt.write_shard(dst, sections)


def _meta(**changes):
    def change(sections):
        meta = json.loads(sections["meta"])
        meta.update(changes)
        for k in [k for k, v in changes.items() if v is None]:
            del meta[k]
        sections["meta"] = json.dumps(meta).encode()

    return change


def _drop_last_word(sections):
    sections["doc.brch"] = sections["doc.brch"][:-8]


# (what is wrong with a version-4 shard, the change, the error)
DAMAGED = [
    ("no width recorded (as in format 3)", _meta(branchWords=None), "meta section is incomplete"),
    ("a width too small for 200 branches", _meta(branchWords=1), "branchWords 1 is too small"),
    ("a width of zero", _meta(branchWords=0), "branchWords 0 is too small"),
    ("masks one word short", _drop_last_word, "'doc.brch' has .* words, expected"),
]


@pytest.mark.parametrize("what,change,error", DAMAGED, ids=[d[0] for d in DAMAGED])
def test_masks_that_do_not_fit_are_refused_never_misread(world, tmp_path, what, change, error):
    wide = next(p for p in manifest.current_shards(world["index"]) if _words(p) == 4)
    bad = str(tmp_path / "bad.shard")
    _rewrite(wide, bad, lambda s: None)
    assert _words(bad) == 4  # rewritten unchanged, it reads
    _rewrite(wide, bad, change)
    with pytest.raises(IndexFormatError, match=error):
        Shard(bad)


def _patch(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_a_format_3_shard_is_refused_and_named_for_reindexing(world, tmp_path):
    copy = str(tmp_path / "index")
    subprocess.run(["cp", "-r", world["index"], copy], check=True)
    wide = next(p for p in manifest.current_shards(copy) if _words(p) == 4)
    assert fmt.format_version(wide) == 4 == fmt.FORMAT_VERSION
    _patch(wide, 8, struct.pack("<I", 3))
    with pytest.raises(IndexFormatError, match="version 3.*older codesearch"):
        Shard(wide)
    assert manifest.stale_repos(copy) == manifest.read_manifest(copy)["shards"][os.path.basename(wide)]["repos"]
    s = Searcher(copy)  # the other repositories still answer; the refused one is missing, not misread
    try:
        names = {f["repository"] for f in s.search("needle rev:*", matches=100_000)["files"]}
    finally:
        s.close()
    assert names == {os.path.abspath(world["repos"][n]).strip("/") for n in (1, 70)}
