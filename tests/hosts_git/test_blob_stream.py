"""The blob stream (`codesearch.git.blob_stream`): one ``git cat-file --batch`` sent every name at
once, read in order. Real repositories and real git: what a read returns for each kind of name
(ahead, passed over, behind, never sent, missing, twice), big blobs whole, a git that dies
mid-way, and no process left behind whatever the reader stopped at."""

from __future__ import annotations

import hashlib
import os
import signal

import pytest

from codesearch.errors import CodesearchError, GitFailed
from codesearch.git.blob_stream import BlobStream
from codesearch.git.objects import ObjectBatch
from tests.corpus import make_local_repo
from tests.hosts_git.test_git_objects import _cat_files, _loose

TEXTS = {
    "a.txt": "alpha\n",
    "b.txt": "bravo\n",
    "c.txt": "charlie\n",
    "empty.txt": "",
    "big.txt": "".join(f"line {i}: {'xyz' * (i % 50)}\n" for i in range(30_000)),  # ~2.6 MB: many pipe-fulls
}
MISSING = "0" * 40


def _sha(text: str) -> str:
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


SHAS = {name: _sha(text) for name, text in TEXTS.items()}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_local_repo(str(tmp_path_factory.mktemp("stream") / "r"), TEXTS) + "/.git"


def _blob(name: str) -> bytes:
    return TEXTS[name].encode()


# (names sent, reads asked in turn as (name or MISSING, expected: bytes | None | an error type))
CASES = {
    "every blob in order": (
        ["a.txt", "b.txt", "big.txt", "empty.txt", "c.txt"],
        [(n, _blob(n)) for n in ["a.txt", "b.txt", "big.txt", "empty.txt", "c.txt"]],
    ),
    "blobs passed over are dropped, big ones too": (
        ["a.txt", "big.txt", "b.txt", "c.txt"],
        [("b.txt", _blob("b.txt")), ("c.txt", _blob("c.txt"))],
    ),
    "a blob behind the reader is not there any more": (
        ["a.txt", "b.txt", "c.txt"],
        [("b.txt", _blob("b.txt")), ("a.txt", None), ("c.txt", _blob("c.txt"))],
    ),
    "a blob never sent is not there": (
        ["a.txt", "c.txt"],
        [("b.txt", None), ("a.txt", _blob("a.txt")), ("c.txt", _blob("c.txt"))],
    ),
    "the same blob sent twice is read twice": (
        ["a.txt", "a.txt", "b.txt"],
        [("a.txt", _blob("a.txt")), ("a.txt", _blob("a.txt")), ("a.txt", None), ("b.txt", _blob("b.txt"))],
    ),
    "a missing blob is an error when asked for, and passed over otherwise": (
        ["a.txt", MISSING, "b.txt", MISSING, "c.txt"],
        [("a.txt", _blob("a.txt")), (MISSING, CodesearchError), ("c.txt", _blob("c.txt"))],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_reads(repo, case):
    sent, reads = CASES[case]
    names = [SHAS.get(n, n) for n in sent]
    with BlobStream(repo, names) as stream:
        for name, want in reads:
            sha = SHAS.get(name, name)
            if isinstance(want, type):
                with pytest.raises(want, match="missing"):
                    stream.read(sha)
            else:
                assert stream.read(sha) == want, (case, name)
    assert _cat_files(repo) == []


def test_the_stream_agrees_with_the_one_at_a_time_reader(repo):
    """Every blob of the repository, both ways: the same bytes."""
    names = list(SHAS.values())
    with BlobStream(repo, names) as stream, ObjectBatch(repo) as batch:
        assert [stream.read(s) for s in names] == [batch.blob(s) for s in names]


def test_stopping_early_leaves_no_git_behind(repo):
    """A reader that stops after one blob of many (a cancelled build) ends git and the writer."""
    names = [SHAS["big.txt"]] * 40 + [SHAS["a.txt"]]  # more than the pipes hold: git is blocked writing
    stream = BlobStream(repo, names)
    assert stream.read(SHAS["big.txt"]) == _blob("big.txt")
    stream.close()
    assert _cat_files(repo) == [] and not stream._writer.is_alive()


def test_a_git_that_dies_is_a_git_failure(tmp_path):
    """git killed while answering: the next read is a `GitFailed`, never a short blob."""
    repo = make_local_repo(str(tmp_path / "r"), TEXTS) + "/.git"
    names = [SHAS["big.txt"]] * 40
    with BlobStream(repo, names) as stream:
        assert stream.read(SHAS["big.txt"]) == _blob("big.txt")
        for pid in _cat_files(repo):
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(GitFailed):
            for _ in range(39):
                assert stream.read(SHAS["big.txt"]) == _blob("big.txt")


def test_a_damaged_blob_is_a_git_failure_or_missing(tmp_path):
    """A blob whose object file is garbage: git says so (missing, or dies): an error, not content."""
    repo = make_local_repo(str(tmp_path / "r"), TEXTS) + "/.git"
    blob = _loose(repo, SHAS["b.txt"])
    if not os.path.exists(blob):
        pytest.skip("objects are packed")
    os.chmod(blob, 0o644)
    with open(blob, "wb") as f:
        f.write(b"not zlib data")
    with BlobStream(repo, [SHAS["a.txt"], SHAS["b.txt"], SHAS["c.txt"]]) as stream:
        assert stream.read(SHAS["a.txt"]) == _blob("a.txt")
        with pytest.raises((CodesearchError, GitFailed)):
            stream.read(SHAS["b.txt"])


def test_a_git_source_reads_on_when_its_stream_dies(tmp_path):
    """An index build's source (`GitSource` with `stream_up_to`) whose stream's git is killed
    mid-way reads the rest one at a time: every file's content, none missing."""
    from codesearch.index.sources import GitSource

    texts = {f"f{i}.txt": TEXTS["big.txt"] + f"file {i}\n" for i in range(12)}
    repo = make_local_repo(str(tmp_path / "r"), texts)
    source = GitSource(repo, stream_up_to=10 << 20)
    try:
        files = list(source.files())
        got = {files[0].path: files[0].read()}
        for pid in _cat_files(source.git_dir):
            os.kill(pid, signal.SIGKILL)
        got.update((f.path, f.read()) for f in files[1:])
    finally:
        source.close()
    assert got == {name: text.encode() for name, text in texts.items()}
    assert _cat_files(source.git_dir) == []
