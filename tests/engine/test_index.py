"""The index: indexing rules, shard format, corrupt and truncated shards, git sources, globs."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from pyroaring import BitMap

from codesearch.errors import IndexBuildError, IndexFormatError
from codesearch.globs import PatternList, glob_match
from codesearch.index import format as fmt
from codesearch.index.builder import BINARY, INDEXED, TOO_LARGE, TOO_MANY_TRIGRAMS, IndexSettings
from codesearch.index.paths import index_paths
from codesearch.index.shard import Shard
from codesearch.index.sources import repo_name_from_url
from codesearch.index.trigrams import count_folded, normalize, string_trigrams, unique_trigrams, variants
from codesearch.search.engine import Searcher
from tests import corpus


def _write(root, files: dict[str, bytes]):
    for path, data in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)


def _docs(shard: Shard) -> dict[str, dict]:
    return {shard.doc_path(d): {"skip": int(shard.doc_skip[d]), "lang": shard.language(d), "content": shard.content(d)}
            for d in range(shard.doc_count)}


RULE_CASES = [
    # (path, content, settings, ALWAYS_INDEX patterns, expected skip)
    ("a.py", b"print('hi')\n", {}, [], INDEXED),
    ("big.txt", b"x" * 101, {"max_file_size": 100}, [], TOO_LARGE),
    ("big.txt", b"x" * 100, {"max_file_size": 100}, [], INDEXED),
    ("big.min.js", b"x" * 101, {"max_file_size": 100}, ["*.min.js"], INDEXED),
    ("web/big.min.js", b"x" * 101, {"max_file_size": 100}, ["**/*.min.js"], INDEXED),
    ("web/big.min.js", b"x" * 101, {"max_file_size": 100}, ["**/*.js", "!web/*.min.js"], TOO_LARGE),
    ("web/big.min.js", b"x" * 101, {"max_file_size": 100}, ["!**/*.js", "web/**"], INDEXED),
    ("bin.dat", b"abc\0def", {}, [], BINARY),
    ("bin.dat", b"abc\0def", {}, ["*.dat"], BINARY),  # the binary rule is never lifted
    ("many.txt", " ".join(f"{i:04d}" for i in range(200)).encode(), {"max_trigram_count": 100}, [], TOO_MANY_TRIGRAMS),
    ("many.txt", " ".join(f"{i:04d}" for i in range(200)).encode(), {"max_trigram_count": 100}, ["many.*"], INDEXED),
    ("latin1.txt", "caf\xe9\n".encode("latin-1"), {}, [], INDEXED),
    ("empty.txt", b"", {}, [], INDEXED),
]


@pytest.mark.parametrize("path,content,opts,always,want", RULE_CASES)
def test_indexing_rules(tmp_path, path, content, opts, always, want):
    _write(tmp_path / "src", {path: content})
    stats = index_paths([str(tmp_path / "src")], str(tmp_path / "ix"), IndexSettings(always_index=PatternList(always), ctags=False, **opts))
    shard = Shard(stats.shards[0])
    doc = _docs(shard)[path]
    assert doc["skip"] == want
    if want != INDEXED:
        assert doc["lang"] == "skipped" and doc["content"] == b""
        # A skipped file stays findable by name and by lang:skipped.
        s = Searcher(str(tmp_path / "ix"))
        assert [f["fileName"]["text"] for f in s.search(f"file:{path.split('/')[-1].split('.')[0]}")["files"]] == [path]
        assert [f["fileName"]["text"] for f in s.search("lang:skipped")["files"]] == [path]
    else:
        assert doc["content"] == content


def test_always_index_patterns_from_environment(tmp_path, monkeypatch):
    """The ``index`` command passes ``ALWAYS_INDEX_FILE_PATTERNS`` to the builder."""
    from codesearch import cli
    from codesearch.index.manifest import current_shards

    monkeypatch.setenv("ALWAYS_INDEX_FILE_PATTERNS", "**/*.big, !keep/no.big")
    _write(tmp_path / "src", {"a/x.big": b"y" * 50, "keep/no.big": b"y" * 50})
    ix = str(tmp_path / "ix")
    assert cli.main(["index", str(tmp_path / "src"), "--out", ix, "--max-file-size", "10", "--no-ctags"]) == 0
    [shard] = current_shards(ix)
    docs = _docs(Shard(shard))
    assert docs["a/x.big"]["skip"] == INDEXED and docs["keep/no.big"]["skip"] == TOO_LARGE


def test_identical_blobs_across_branches_are_stored_once(tmp_path):
    repo = corpus.make_git_repo(str(tmp_path / "repo"))
    stats = index_paths([repo], str(tmp_path / "ix"), IndexSettings(ctags=False), branches=["**"], tags=["v*"])
    shard = Shard(stats.shards[0])
    assert shard.repos[0].branches[0] == "refs/heads/main"
    assert set(shard.repos[0].branches) == {"refs/heads/main", "refs/heads/dev", "refs/heads/release/1.0", "refs/tags/v1.0"}
    paths = [shard.doc_path(d) for d in range(shard.doc_count)]
    test_doc = paths.index("tests/test_app.py")  # same content on every branch
    assert paths.count("tests/test_app.py") == 1
    assert set(shard.branches(test_doc)) == set(shard.repos[0].branches)
    assert paths.count("src/util.py") == 2  # differs on dev
    assert paths.count("src/release.py") == 1 and shard.branches(paths.index("src/release.py")) == ["refs/heads/release/1.0"]


def test_symbols_from_ctags(tmp_path):
    _write(tmp_path / "src", {"m.py": b"class Alpha:\n    def beta(self):\n        pass\n\ndef gamma():\n    return 1\n"})
    stats = index_paths([str(tmp_path / "src")], str(tmp_path / "ix"))
    shard = Shard(stats.shards[0])
    syms = {(s.name, s.kind, s.line, s.parent) for s in shard.symbols(0)}
    assert ("Alpha", "class", 1, "") in syms and ("beta", "member", 2, "Alpha") in syms and ("gamma", "function", 5, "") in syms


def test_language_detection(tmp_path):
    files = {"a.py": b"x = 1\n", "b.go": b"package b\n", "c.ts": b"let x = 1\n", "Makefile": b"all:\n", "script": b"#!/usr/bin/env python3\nprint(1)\n",
             "d.cc": b"int main() {}\n", "README.md": b"# hi\n"}
    _write(tmp_path / "src", files)
    stats = index_paths([str(tmp_path / "src")], str(tmp_path / "ix"), IndexSettings(ctags=False))
    langs = {p: d["lang"] for p, d in _docs(Shard(stats.shards[0])).items()}
    assert langs == {"a.py": "Python", "b.go": "Go", "c.ts": "TypeScript", "Makefile": "Makefile", "script": "Python", "d.cc": "C++", "README.md": "Markdown"}


def test_posting_lists_are_exact(tmp_path):
    """Every trigram of every document is in its posting list, and nothing else is."""
    texts = {f"f{i}.txt": f"alpha beta {i} GAMMA delta{i % 3}\n".encode() * (i + 1) for i in range(20)}
    _write(tmp_path / "src", texts)
    stats = index_paths([str(tmp_path / "src")], str(tmp_path / "ix"), IndexSettings(ctags=False))
    shard = Shard(stats.shards[0])
    expected: dict[int, set[int]] = {}
    for d in range(shard.doc_count):  # the exact bytes' trigrams, computed here independently
        c = shard.content(d)
        for t in {c[i] << 16 | c[i + 1] << 8 | c[i + 2] for i in range(len(c) - 2)}:
            expected.setdefault(t, set()).add(d)
    assert sorted(expected) == shard.content_index.keys.tolist()
    for t, docs in expected.items():
        assert set(shard.content_index.postings(t)) == docs
        assert shard.content_index.cardinality(t) == len(docs)


def test_stored_sizes_and_cardinalities_of_query_trigrams(tmp_path):
    """What a query reads of the index (``indexBytesLoaded``) and how large its posting lists
    are: for an exact trigram its own list, for an any-case one the sum over its `variants` that
    the shard has (0 for those it lacks), asked once or many times."""
    _write(tmp_path / "src", {f"f{i}.txt": f"Alpha BETA gamma {i}\n".encode() * (i + 1) for i in range(12)})
    stats = index_paths([str(tmp_path / "src")], str(tmp_path / "ix"), IndexSettings(ctags=False))
    index = Shard(stats.shards[0]).content_index

    def own(t):  # one dictionary slot, read here directly
        i = index.slot(t)
        return (int(index.offs[i + 1]) - int(index.offs[i]), int(index.card[i])) if i >= 0 else (0, 0)

    query_trigrams = [t for text in ("alpha", "Alpha", "BETA", "zzz", "mma 1") for cs in (True, False)
                      for t in string_trigrams(text.encode(), cs)]
    assert any(len(variants(t)) > 1 for t in query_trigrams) and any(own(t) == (0, 0) for t in query_trigrams)
    for _ in range(2):
        for t in query_trigrams:
            assert index.stored_size(t) == sum(own(v)[0] for v in variants(t)), t
        assert index.cardinalities(query_trigrams) == [sum(own(v)[1] for v in variants(t)) for t in query_trigrams]


@pytest.mark.parametrize("case_sensitive", [True, False])
def test_a_literal_reads_no_more_posting_lists_than_it_needs(tmp_path, case_sensitive):
    """Once a literal's candidates are few (`ENOUGH_FOR_FILTERS`), its other trigrams' posting
    lists are not read: the quadgram filters narrow the rest. The answer is the files that hold
    the literal, found here by `in`, and less of the index is read than all of its lists."""
    from codesearch.search.evaluate import ENOUGH_FOR_FILTERS

    n = 400
    assert n > ENOUGH_FOR_FILTERS  # the common words' lists alone leave too many candidates
    files = {f"f{i}.txt": f"common words everywhere {i}\n".encode() for i in range(n)}
    for i in (6, 77, 382):  # three files hold the literal, in three spellings (i % 3)
        files[f"f{i}.txt"] += (b"commonRareWordsZq\n", b"COMMONRAREWORDSZQ\n", b"commonrarewordszq\n")[i % 3]
    _write(tmp_path / "src", files)
    stats = index_paths([str(tmp_path / "src")], str(tmp_path / "ix"), IndexSettings(ctags=False))
    index = Shard(stats.shards[0]).content_index
    literal = "commonRareWordsZq"
    want = sorted(name for name, text in files.items()
                  if (literal.encode() in text if case_sensitive else literal.lower().encode() in text.lower()))
    r = Searcher(str(tmp_path / "ix")).search(literal, matches=10**6, case_sensitive=case_sensitive)
    assert sorted(f["fileName"]["text"] for f in r["files"]) == want and want
    every_list = sum(index.stored_size(t) for t in set(string_trigrams(literal.encode(), case_sensitive)))
    assert 0 < r["stats"]["indexBytesLoaded"] < every_list / 2


def test_shards_split_at_the_size_limit(tmp_path):
    _write(tmp_path / "src", {f"f{i}.txt": (f"file {i} " * 200).encode() for i in range(30)})
    stats = index_paths([str(tmp_path / "src")], str(tmp_path / "ix"), IndexSettings(ctags=False, shard_max_bytes=10_000))
    assert len(stats.shards) > 3
    s = Searcher(str(tmp_path / "ix"))
    r = s.search("file", matches=10**6)
    assert len(r["files"]) == 30 and r["isSearchExhaustive"]


def test_reindex_replaces_old_shards(tmp_path):
    _write(tmp_path / "src", {f"f{i}.txt": (f"old {i} " * 200).encode() for i in range(30)})
    ix = str(tmp_path / "ix")
    index_paths([str(tmp_path / "src")], ix, IndexSettings(ctags=False, shard_max_bytes=10_000))
    shutil.rmtree(tmp_path / "src")
    _write(tmp_path / "src", {"only.txt": b"new content\n"})
    index_paths([str(tmp_path / "src")], ix, IndexSettings(ctags=False, shard_max_bytes=10_000))
    assert len([f for f in os.listdir(ix) if f.endswith(".shard")]) == 1
    s = Searcher(ix)
    assert s.search("old")["files"] == [] and len(s.search("new")["files"]) == 1


# -- the format: corrupt, truncated, foreign files -------------------------------------------


@pytest.fixture
def one_shard(tmp_path):
    _write(tmp_path / "src", {"a.py": b"def alpha():\n    return 'alpha'\n", "b.txt": b"beta\n"})
    stats = index_paths([str(tmp_path / "src")], str(tmp_path / "ix"))
    return stats.shards[0]


def test_shard_round_trip(one_shard):
    shard = Shard(one_shard)
    assert shard.doc_count == 2 and shard.file.has("ctg.post")


@pytest.mark.parametrize("damage,reason", [
    (lambda b: b[: len(b) // 2], "truncated"),
    (lambda b: b[:10], "too short|truncated"),
    (lambda b: b"", "too short"),
    (lambda b: b"NOTSHARD" + b[8:], "bad magic"),
    (lambda b: b[:8] + (99).to_bytes(4, "little") + b[12:], "version 99"),
    (lambda b: b[:-40] + bytes(x ^ 0xFF for x in b[-40:]), "checksum"),
    (lambda b: b[:200] + b"\xff" * 50 + b[250:], "checksum|truncated"),
])
def test_damaged_shards_raise_clear_errors(one_shard, damage, reason):
    data = open(one_shard, "rb").read()
    with open(one_shard, "wb") as f:
        f.write(damage(data))
    with pytest.raises(IndexFormatError, match=reason) as e:
        Shard(one_shard)
    assert one_shard in str(e.value)


def test_searcher_skips_a_damaged_shard_and_searches_the_rest(tmp_path):
    _write(tmp_path / "a", {"x.txt": b"needle in a\n"})
    _write(tmp_path / "b", {"y.txt": b"needle in b\n"})
    ix = str(tmp_path / "ix")
    stats = index_paths([str(tmp_path / "a"), str(tmp_path / "b")], ix, IndexSettings(ctags=False))
    with open(stats.shards[0], "r+b") as f:
        f.seek(100)
        f.write(b"\x00garbage\x00")
    s = Searcher(ix)
    assert len(s.errors) == 1
    assert [f["fileName"]["text"] for f in s.search("needle")["files"]] == ["y.txt"]


def test_writer_is_atomic(tmp_path):
    path = str(tmp_path / "x.shard")
    fmt.write_shard(path, {"meta": {"a": 1}, "arr": np.arange(5, dtype=np.uint32)})
    assert os.listdir(tmp_path) == ["x.shard"]  # no temporary files left behind
    f = fmt.ShardFile(path)
    assert f.json("meta") == {"a": 1} and f.array("arr", np.uint32).tolist() == [0, 1, 2, 3, 4]


def test_bad_sources(tmp_path):
    with pytest.raises(IndexBuildError, match="no such file"):
        index_paths([str(tmp_path / "missing")], str(tmp_path / "ix"))
    empty_git = tmp_path / "empty"
    empty_git.mkdir()
    corpus.git(str(empty_git), "init", "-q")
    with pytest.raises(IndexBuildError, match="no commits"):
        index_paths([str(empty_git)], str(tmp_path / "ix"))


# -- small pieces --------------------------------------------------------------------------


@pytest.mark.parametrize("glob,text,want", [
    ("*.py", "a.py", True), ("*.py", "d/a.py", False), ("**/*.py", "a.py", True), ("**/*.py", "d/e/a.py", True),
    ("release/*", "release/1.0", True), ("release/*", "release/1/2", False), ("release/**", "release/1/2", True),
    ("v?.0", "v1.0", True), ("[ab]*", "b1", True), ("[!ab]*", "b1", False), ("{main,dev}", "dev", True),
    ("src/{a,b/**}/x", "src/b/c/d/x", True), ("a.b", "aXb", False), ("(x)", "(x)", True),
])
def test_globs(glob, text, want):
    assert glob_match(glob, text) is want


@pytest.mark.parametrize("url,name", [
    ("https://github.com/sourcebot-dev/sourcebot.git", "github.com/sourcebot-dev/sourcebot"),
    ("https://user:tok@gitlab.example.com:8443/g/sub/p", "gitlab.example.com:8443/g/sub/p"),
    ("git@github.com:owner/repo.git", "github.com/owner/repo"),
    ("ssh://git@host.xz/path/to/repo.git/", "host.xz/path/to/repo"),
])
def test_repo_names_from_urls(url, name):
    assert repo_name_from_url(url) == name


@pytest.mark.parametrize("text,case_sensitive,want", [
    # the index keeps case; a case-insensitive query trigram stands for every case of its letters
    ("abc", True, [["abc"]]),
    ("ABC", True, [["ABC"]]),
    ("aBc", False, [["abc", "Abc", "aBc", "ABc", "abC", "AbC", "aBC", "ABC"]]),
    ("a1b", False, [["a1b", "A1b", "a1B", "A1B"]]),
    ("12_", False, [["12_"]]),
    ("\u212aab", True, [["kab"]]),  # Kelvin sign and long s are normalized to ASCII in the index
    ("\u212aAB", False, [["kab", "Kab", "kAb", "KAb", "kaB", "KaB", "kAB", "KAB"]]),
    ("abcd", True, [["abc"], ["bcd"]]),
])
def test_trigrams_and_their_variants(text, case_sensitive, want):
    got = [sorted(variants(t)) for t in string_trigrams(text, case_sensitive)]
    assert got == [sorted(int.from_bytes(v.encode(), "big") for v in vs) for vs in want]


def test_index_trigrams_keep_case_but_the_limit_counts_folded():
    assert BitMap(unique_trigrams(normalize(b"abcabc")).tolist()) == BitMap(string_trigrams("abcabc"))
    assert unique_trigrams(normalize(b"Abc abc")).size == 5  # "Abc" "bc " "c a" " ab" "abc"
    assert count_folded(unique_trigrams(normalize(b"Abc abc"))) == 4  # "abc" once


@pytest.mark.parametrize("seed", range(6))
def test_the_folded_count_is_the_count_of_lower_cased_distinct_trigrams(seed):
    """The compiled count (a bit set) against Python's own: the distinct 3-byte windows of the
    lower-cased bytes, over random texts of letters of both cases, digits and other bytes."""
    import random

    rng = random.Random(seed)
    alphabet = b"aAbBzZ09@[`{ \n\xe2\x84\xaa\xff"
    data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 3000)))
    unique = unique_trigrams(data)
    text = b"".join(t.to_bytes(3, "big") for t in unique.tolist())
    want = len({text[i:i + 3].lower() for i in range(0, len(text), 3)})
    assert count_folded(unique) == want
    assert count_folded(unique) == want  # the bit set was left zeroed


def test_ctags_timeouts_and_failures_never_fail_a_build(tmp_path, caplog):
    from codesearch.index.symbols import CtagsError, CtagsProcess, find_ctags

    exe = find_ctags()
    assert exe, "universal-ctags with JSON support is required (make installs it)"
    slow = CtagsProcess(exe, timeout_s=1e-6)
    with pytest.raises(CtagsError, match="timed out"):
        slow.tags("a.py", b"def f():\n    pass\n" * 1000)
    slow.timeout_s = 10  # the process was restarted and works again
    assert [s.name for s in slow.tags("a.py", b"def f():\n    pass\n")] == ["f"]
    slow.close()

    _write(tmp_path / "src", {"a.py": b"def alpha():\n    pass\n"})
    stats = index_paths([str(tmp_path / "src")], str(tmp_path / "ix"), IndexSettings(ctags_timeout_s=1e-6))
    shard = Shard(stats.shards[0])
    assert shard.symbols(0) == [] and shard.doc_count == 1
    assert "ctags failed on a.py" in caplog.text


def test_ctags_batch_and_per_file_agree(tmp_path):
    """The batch run and the per-file protocol give the same symbols; odd names go per file."""
    from codesearch.index.symbols import CtagsProcess, SymbolExtractor, ctags_batch, find_ctags

    exe = find_ctags()
    files = [(i, f"src/m{i}.py", f"class C{i}:\n    def m{i}(self):\n        pass\n".encode()) for i in range(30)]
    files += [(30, "src/Makefile", b"all:\n\techo hi\n"), (31, "src/tab\there.py", b"def odd():\n    pass\n")]
    per_file = CtagsProcess(exe)
    want = {k: per_file.tags(p, d) for k, p, d in files}
    per_file.close()
    assert want[0] and want[31]
    got = ctags_batch(exe, [f for f in files if f[0] != 31], 10)
    assert {k: v for k, v in want.items() if v and k != 31} == got
    ex = SymbolExtractor()
    for k, p, d in files:
        ex.submit(k, p, d)
    assert ex.collect() == {k: v for k, v in want.items() if v}
    ex.close()


def test_a_ctags_batch_keeps_files_of_one_name_apart_and_odd_bytes_readable():
    """Files of the same name (in different folders of a repository) each get their own tags;
    a name that is not UTF-8 (as os.scandir spells it, with surrogates) still gets its tags, and
    a tag's undecodable byte reads as U+FFFD."""
    from codesearch.index.symbols import ctags_batch, find_ctags

    exe = find_ctags()
    files = [(i, f"pkg{i}/mod.py", f"def only_in_{i}():\n    pass\n".encode()) for i in range(3)]
    files.append((9, "x/caf\udce9.py", b"def caf\xe9():\n    pass\n"))
    got = ctags_batch(exe, files, 10)
    assert [[s.name for s in got[i]] for i in range(3)] == [["only_in_0"], ["only_in_1"], ["only_in_2"]]
    assert [s.name for s in got[9]] == ["caf\ufffd"]


def _slow_pascal(procedures: int) -> bytes:
    """A Pascal unit that ctags parses in time quadratic in its procedures (5,000: ~3 s here),
    as it did real files of the Free Pascal sources (a 1 MB one: 25 s)."""
    head = "".join(f"procedure p{i}(a: integer);\n" for i in range(procedures))
    body = "".join(f"procedure p{i}(a: integer);\nbegin\nend;\n" for i in range(procedures))
    return f"unit u;\ninterface\n{head}implementation\n{body}end.\n".encode()


@pytest.mark.slow
def test_a_ctags_batch_that_runs_out_of_time_keeps_the_files_it_finished():
    """A batch stopped on a slow file gives back the tags of the files ctags finished before it
    (those are not tagged again) and the files still to tag, the slow one among them (the files go
    smallest first, so little is left after it); the extractor tags those one by one, so every
    file but the slow one gets its symbols."""
    from codesearch.index.symbols import BatchTimedOut, CtagsProcess, SymbolExtractor, ctags_batch, find_ctags

    exe = find_ctags()
    before = [
        (i, f"a/m{i}.py", "".join(f"def function_{i}_{j}(x):\n    return x\n" for j in range(8)).encode())
        for i in range(150)
    ]
    slow = (500, "a/slow.pp", _slow_pascal(5000))
    after = [(600 + i, f"b/n{i}.py", f"def after_{i}():\n    pass\n".encode()) for i in range(20)]
    files = [*before, slow, *after]
    with pytest.raises(BatchTimedOut) as caught:
        ctags_batch(exe, files, 1.0)
    done, rest = caught.value.done, caught.value.rest
    assert done, "the files before the slow one were finished and kept"
    assert sorted([*done, *(k for k, _, _ in rest)]) == sorted(k for k, _, _ in files)  # each once
    # smallest first: the slow file, the biggest, is last; before it only the files whose tags
    # ctags had not yet written out (a 4 KB buffer: ~13 of these files)
    assert rest[-1] == slow and len(rest) < 40
    per_file = CtagsProcess(exe)
    want = {k: per_file.tags(p, d) for k, p, d in files if k != 500}
    per_file.close()
    assert all(done[k] == want[k] for k in done)

    ex = SymbolExtractor(timeout_s=1.0)
    for k, p, d in files:
        ex.submit(k, p, d)
    assert ex.collect() == {k: v for k, v in want.items() if v}
    assert ex.failures == 1  # the slow file alone, out of time again
    ex.close()


def test_revision_selection_order_globs_and_cap(tmp_path):
    """Default branch first, then matching branches newest first, then tags; at most 64, with a warning."""
    from codesearch.git.revisions import MAX_REVISIONS, select_revisions

    repo = tmp_path / "r"
    repo.mkdir()
    corpus.git(str(repo), "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    corpus.git(str(repo), "add", "-A")
    corpus.git(str(repo), "commit", "-q", "-m", "a")
    for i in range(70):
        corpus.git(str(repo), "branch", f"release/{i:02d}")
    corpus.git(str(repo), "branch", "feature/x/deep")
    corpus.git(str(repo), "tag", "v1.0")
    corpus.git(str(repo), "tag", "other")
    r = str(repo / ".git")
    revs, warnings = select_revisions(r, ["release/*", "feature/*"], ["v*"])
    refs = [x.ref for x in revs]
    assert refs[0] == "refs/heads/main" and len(refs) == MAX_REVISIONS == 64
    assert "refs/heads/feature/x/deep" not in refs  # `*` does not cross `/`
    assert warnings and "72 revisions" in warnings[0]
    revs, warnings = select_revisions(r, ["feature/**"], ["v*"])
    assert [x.ref for x in revs] == ["refs/heads/main", "refs/heads/feature/x/deep", "refs/tags/v1.0"] and not warnings


def test_searches_during_reindex_see_one_generation(tmp_path):
    """A re-index swaps a multi-shard repository atomically: every search sees all files of
    one version, never a mix and never nothing, while another thread re-indexes."""
    import threading

    from codesearch.index.manifest import read_manifest

    src, ix = tmp_path / "src", str(tmp_path / "ix")
    n_files = 12

    def write_version(v):
        _write(src, {f"f{i}.txt": (f"version{v:03d} marker\n" + "filler text\n" * 400).encode() for i in range(n_files)})

    settings = IndexSettings(ctags=False, shard_max_bytes=15_000)
    write_version(0)
    index_paths([str(src)], ix, settings)
    searcher = Searcher(ix)
    errors, done = [], threading.Event()

    def reindex():
        try:
            for v in range(1, 12):
                write_version(v)
                index_paths([str(src)], ix, settings)
        except Exception as e:  # surfaced below
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=reindex)
    t.start()
    seen = set()
    while not done.is_set() or not seen:
        searcher.reload()
        r = searcher.search("marker", matches=10**6)
        versions = {ch["content"].split()[0] for f in r["files"] for ch in f["chunks"]}
        assert len(r["files"]) == n_files and len(versions) == 1, (len(r["files"]), versions)
        seen |= versions
    t.join()
    assert not errors
    searcher.reload()
    assert {ch["content"].split()[0] for f in searcher.search("marker")["files"] for ch in f["chunks"]} == {"version011"}
    assert len(read_manifest(ix)["repos"]) == 1 and len(os.listdir(ix)) == len(searcher.shards) + 2  # + manifest, lock
