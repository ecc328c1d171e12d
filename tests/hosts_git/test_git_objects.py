"""The object reader (`codesearch.git.objects`: GitPython's persistent ``git cat-file`` processes,
started and bounded by `codesearch.git.process`'s policy): how each failure reaches a caller, a
killed process replaced, a hung git cut off at its time limit, the environment git sees, the
caller's git slot, SHA-256 repositories. Real repositories made here, real git processes: a hang
is a loose object that is a FIFO (git blocks opening it), a damage is an object file overwritten."""

from __future__ import annotations

import contextvars
import hashlib
import os
import signal
import time

import pytest

from codesearch.errors import CodesearchError, FileNotFound, GitFailed, InvalidGitRef
from codesearch.git import objects, process, slots
from codesearch.git.objects import ObjectBatch, object_info, read_blob, resolve_commit
from codesearch.git.trees import list_tree
from tests.corpus import git, make_local_repo

FILES = {"a.txt": "hello\n", "d/b.txt": "bee\n"}
BIG = "".join(f"line {i}: {'abcdefgh' * (i % 7)}\n" for i in range(20_000))  # compresses to far more than 2 KB


def _sha(text: str) -> str:
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _loose(git_dir: str, sha: str) -> str:
    return os.path.join(git_dir, "objects", sha[:2], sha[2:])


def _ambiguous_pair() -> tuple[str, str, str]:
    """Two blob contents whose shas share their first 4 hex digits, and that prefix."""
    seen: dict[str, str] = {}
    for i in range(100_000):
        text = f"{i}\n"
        prefix = _sha(text)[:4]
        if prefix in seen:
            return seen[prefix], text, prefix
        seen[prefix] = text
    raise AssertionError("no two shas share 4 hex digits")


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    """Repositories, each broken one way: `gd` (healthy), `not_repo` (a plain folder),
    `damaged` (a.txt's blob is garbage: git answers "missing"), `truncated` (big.txt's blob is cut
    short: git dies while sending it), `hung_blob` (a.txt's blob is a FIFO), `hung` (every read
    blocks: its alternates file is a FIFO), `ambiguous` (two blobs share a 4-digit prefix)."""
    base = tmp_path_factory.mktemp("objects")
    out = {"not_repo": str(base / "plain")}
    os.makedirs(out["not_repo"])
    for name in ("gd", "damaged", "truncated", "hung_blob", "hung", "ambiguous"):
        out[name] = make_local_repo(str(base / name), {**FILES, "big.txt": BIG}) + "/.git"
    out["commit"] = git(out["gd"], "rev-parse", "HEAD").strip()
    blob = _loose(out["damaged"], _sha(FILES["a.txt"]))
    os.chmod(blob, 0o644)
    with open(blob, "wb") as f:
        f.write(b"not zlib data")
    big = _loose(out["truncated"], _sha(BIG))
    os.chmod(big, 0o644)
    os.truncate(big, 2000)
    os.remove(_loose(out["hung_blob"], _sha(FILES["a.txt"])))
    os.mkfifo(_loose(out["hung_blob"], _sha(FILES["a.txt"])))
    os.mkfifo(os.path.join(out["hung"], "objects", "info", "alternates"))
    one, two, out["prefix"] = _ambiguous_pair()
    for text in (one, two):
        path = os.path.join(base, "blob.txt")
        with open(path, "w") as f:
            f.write(text)
        git(out["ambiguous"], "hash-object", "-w", path)
    return out


def _cat_files(git_dir: str) -> list[int]:
    """The live (not zombie) ``git cat-file`` processes reading `git_dir`, by pid."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if b"cat-file" in argv and git_dir.encode() in argv and state != "Z":
            pids.append(int(entry))
    return pids


def _kill(pid: int) -> None:
    """SIGKILL `pid` and wait until it has died (a zombie: its parent has not reaped it yet)."""
    os.kill(pid, signal.SIGKILL)
    for _ in range(500):
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not die")


# ---------------------------------------------------------------------- answers


@pytest.mark.parametrize("name, want", [
    ("<blob>", ("blob", b"hello\n", 20)),
    ("<commit>:d/b.txt", ("blob", b"bee\n", 20)),
    ("<commit>:a.txt", ("blob", b"hello\n", 20)),
    ("<blob:8>", ("blob", b"hello\n", 20)),  # a unique short name
    ("0" * 40, None),  # no such object
    ("<commit>:nope.txt", None),  # no such path
    ("nope", None),
    ("<commit>:a\nb.txt", None),  # a line feed: GitPython sends no such name
    ("<commit>:\udcff.txt", None),  # not UTF-8: GitPython sends names as UTF-8 only
])
def test_an_object_is_its_type_and_content_or_none(repos, name, want):
    name = name.replace("<blob:8>", _sha("hello\n")[:8]).replace("<blob>", _sha("hello\n"))
    with ObjectBatch(repos["gd"]) as batch:
        assert batch.get(name.replace("<commit>", repos["commit"])) == want
        assert batch.get(_sha("bee\n")) == ("blob", b"bee\n", 20)  # the same process answers on
        assert len(_cat_files(repos["gd"])) == 1


@pytest.mark.parametrize("name, want", [
    ("<commit>", ("<commit>", "commit", None)),
    ("<commit>:d", (None, "tree", None)),
    ("<commit>:a.txt", (_sha("hello\n"), "blob", 6)),
    ("<commit>:nope", None),
    ("0" * 40, None),
])
def test_a_header_is_the_full_sha_type_and_size_or_none(repos, name, want):
    with ObjectBatch(repos["gd"]) as batch:
        got = batch.header(name.replace("<commit>", repos["commit"]))
    if want is None:
        assert got is None
    else:
        sha, kind, size = want
        assert got is not None and got[1] == kind and len(got[0]) == 40
        assert got[0] == (repos["commit"] if sha == "<commit>" else sha or got[0])
        assert size is None or got[2] == size


def test_a_missing_blob_is_an_error_naming_it(repos):
    tree = git(repos["gd"], "rev-parse", "HEAD^{tree}").strip()
    with ObjectBatch(repos["gd"]) as batch:
        for sha in ("0" * 40, tree):  # nothing there; not a blob
            with pytest.raises(CodesearchError, match=f"blob {sha} is missing from the repository"):
                batch.blob(sha)


# ---------------------------------------------------------------------- failures, as callers see them

FAILURES = [
    # (call, error class, exact message or a part of it)
    (lambda r: resolve_commit(r["gd"], "nope"), InvalidGitRef, "git ref 'nope' not found in the repository"),
    (lambda r: resolve_commit(r["gd"], "0" * 40), InvalidGitRef, f"git ref {'0' * 40!r} not found in the repository"),
    (lambda r: resolve_commit(r["ambiguous"], r["prefix"]), InvalidGitRef, "is ambiguous in the repository: give more"),
    (lambda r: resolve_commit(r["gd"], "main:a.txt"), InvalidGitRef, "invalid git ref"),  # the grammar's gate
    (lambda r: resolve_commit(r["not_repo"], "main"), CodesearchError,
     "the repository's clone is not a git repository"),
    (lambda r: read_blob(r["gd"], "main", "nope.txt"), FileNotFound, "file 'nope.txt' not found at 'main'"),
    (lambda r: read_blob(r["gd"], "main", "d"), FileNotFound, "file 'd' not found at 'main'"),  # a directory
    (lambda r: read_blob(r["gd"], "nope", "a.txt"), InvalidGitRef, "git ref 'nope' not found in the repository"),
    (lambda r: read_blob(r["damaged"], "main", "a.txt"), FileNotFound, "file 'a.txt' not found at 'main'"),
    (lambda r: ObjectBatch(r["not_repo"]).get("HEAD"), GitFailed, "git cat-file failed: not a git repository"),
    (lambda r: read_blob(r["truncated"], "main", "big.txt"), FileNotFound, "file 'big.txt' not found at 'main'"),
    (lambda r: ObjectBatch(r["damaged"]).blob(_sha("hello\n")), CodesearchError,
     f"blob {_sha('hello' + chr(10))} is missing from the repository"),
    (lambda r: ObjectBatch(r["truncated"]).blob(_sha(BIG)), GitFailed,
     f"git cat-file failed: unable to stream {_sha(BIG)} to stdout"),
]


@pytest.mark.parametrize("call, error, message", FAILURES)
def test_each_failure_is_our_error_with_our_message(repos, call, error, message):
    with pytest.raises(error) as e:
        call(repos)
    assert type(e.value) is error or error is InvalidGitRef
    assert message in str(e.value)
    assert os.path.dirname(os.path.dirname(repos["gd"])) not in str(e.value)  # no folder of ours


@pytest.mark.parametrize("where, name, want", [
    ("gd", "<commit>:a.txt", ("blob", 6)),
    ("gd", "<commit>:d", ("tree", len(b"100644 b.txt\0") + 20)),
    ("gd", "<commit>:nope", None),
    ("not_repo", "<commit>:a.txt", None),  # (callers resolved the ref first: that is where it fails)
])
def test_object_info_is_the_type_and_size_or_none(repos, where, name, want):
    got = object_info(repos[where], name.replace("<commit>", repos["commit"]))
    assert got == want


# ---------------------------------------------------------------------- time limits


TIMEOUTS = [
    # (what, call) with every limit at 0.5 s; each one reads an object git blocks on
    ("a batch's content read", lambda r: ObjectBatch(r["hung_blob"], timeout_s=0.5).blob(_sha("hello\n"))),
    ("a batch's header read", lambda r: ObjectBatch(r["hung"], timeout_s=0.5).header("HEAD")),
    ("resolving a ref", lambda r: resolve_commit(r["hung"], "main")),
    ("reading a file (not a FileNotFound)", lambda r: read_blob(r["hung_blob"], "main", "a.txt")),
    ("object_info (not None)", lambda r: object_info(r["hung_blob"], "HEAD:a.txt")),
]


@pytest.mark.parametrize("what, call", TIMEOUTS, ids=[t[0] for t in TIMEOUTS])
def test_a_hung_git_is_killed_at_the_time_limit(repos, monkeypatch, what, call):
    monkeypatch.setattr(process, "GIT_TIMEOUT_S", 0.5)
    monkeypatch.setattr(objects, "RESOLVE_TIMEOUT_S", 0.5)
    started = time.monotonic()
    with pytest.raises(GitFailed) as e:
        call(repos)
    assert e.value.timed_out and str(e.value) == "git timed out after 0.5s reading the repository"
    assert time.monotonic() - started < 5
    assert _cat_files(repos["hung"]) == [] and _cat_files(repos["hung_blob"]) == []


def test_after_its_time_limit_a_batch_answers_nothing(repos):
    batch = ObjectBatch(repos["hung_blob"], timeout_s=0.5)
    assert batch.blob(_sha("bee\n")) == b"bee\n"
    with pytest.raises(GitFailed, match="timed out"):
        batch.blob(_sha("hello\n"))
    with pytest.raises(GitFailed, match="timed out"):  # a healthy object, but the batch's time is up
        batch.blob(_sha("bee\n"))
    with pytest.raises(GitFailed, match="timed out"):
        batch.header("HEAD")
    batch.close()
    assert _cat_files(repos["hung_blob"]) == []


# ---------------------------------------------------------------------- a dead process


@pytest.mark.parametrize("read", [
    lambda batch: batch.blob(_sha("hello\n")) == b"hello\n",
    lambda batch: batch.header("HEAD:a.txt")[1:] == ("blob", 6),
], ids=["--batch", "--batch-check"])
def test_a_killed_process_is_replaced_at_the_next_request(repos, read):
    gd = repos["gd"]
    with ObjectBatch(gd, timeout_s=60) as batch:
        assert read(batch)
        [first] = _cat_files(gd)
        _kill(first)
        assert read(batch)
        [second] = _cat_files(gd)  # (the killed one was reaped)
        assert second != first
        assert read(batch)
        assert _cat_files(gd) == [second]
    assert _cat_files(gd) == []


def test_a_process_that_dies_within_an_answer_fails_that_request_only(repos):
    gd = repos["truncated"]
    with ObjectBatch(gd) as batch:
        assert batch.blob(_sha("hello\n")) == b"hello\n"
        with pytest.raises(GitFailed, match="unable to stream"):
            batch.blob(_sha(BIG))
        assert _cat_files(gd) == []  # (reaped)
        assert batch.blob(_sha("bee\n")) == b"bee\n"  # a new process
        assert len(_cat_files(gd)) == 1


def test_the_indexers_reader_has_no_limit_of_its_own(repos):
    batch = ObjectBatch(repos["gd"], timeout_s=float("inf"))
    assert batch.blob(_sha("bee\n")) == b"bee\n"
    [pid] = _cat_files(repos["gd"])
    _kill(pid)
    assert batch.blob(_sha("bee\n")) == b"bee\n"
    batch.close()


# ---------------------------------------------------------------------- the policy of every git process


def test_cat_file_runs_under_the_process_policy(repos, monkeypatch, tmp_path):
    """Inherited GIT_* variables that would hide every object or add config are dropped; git runs
    as ``git -c safe.directory=… --git-dir … cat-file``, in its own session, with the sealed
    environment of `process.environment` (as every git process does)."""
    os.makedirs(tmp_path / "empty")
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(tmp_path / "empty"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.packedGitLimit'='1'")
    monkeypatch.setenv("GIT_TRACE", "1")
    gd = repos["gd"]
    with ObjectBatch(gd) as batch:
        assert batch.blob(_sha("hello\n")) == b"hello\n"
        [pid] = _cat_files(gd)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode().split("\0")[:-1]
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(e.split("=", 1) for e in f.read().decode().split("\0") if e)
        assert os.getsid(pid) == pid
    assert argv == ["git", "-c", f"safe.directory={gd}", "--git-dir", gd, "cat-file", "--batch"]
    assert {k: v for k, v in env.items() if k.startswith("GIT_")} == {
        k: v for k, v in process.environment().items() if k.startswith("GIT_")
    }
    assert "GIT_OBJECT_DIRECTORY" not in env and env["GIT_CONFIG_NOSYSTEM"] == "1" and env["LC_ALL"] == "C"


@pytest.fixture
def installed():
    table = slots.GitSlots(per_caller=1, total=2, wait_s=0.3)
    slots.install(table)
    yield table
    slots.install(None)


def _as_caller(fn):
    def body():
        slots.claim("user:1")
        return fn()

    return contextvars.Context().run(body)


@pytest.mark.parametrize("how", ["closed", "killed and replaced", "timed out", "not a repository"])
def test_a_batch_holds_the_callers_slot_and_gives_it_back(repos, installed, how):
    def request():
        where = {"timed out": "hung_blob", "not a repository": "not_repo"}.get(how, "gd")
        batch = ObjectBatch(repos[where], timeout_s=0.5)
        try:
            if how == "not a repository":
                batch.get("HEAD")
            assert batch.get(f"{repos['commit']}:a.txt") is not None
            assert batch.header("HEAD") is not None  # two processes, one request: one slot
            assert installed.in_use("user:1") == 1
            if how == "killed and replaced":
                for pid in _cat_files(repos["gd"]):
                    _kill(pid)
                assert batch.blob(_sha("hello\n")) == b"hello\n" and installed.in_use("user:1") == 1
            if how == "timed out":
                batch.blob(_sha("hello\n"))
        finally:
            batch.close()

    if how in ("timed out", "not a repository"):
        with pytest.raises(GitFailed):
            _as_caller(request)
    else:
        _as_caller(request)
    assert installed.in_use() == 0


# ---------------------------------------------------------------------- SHA-256


def test_a_sha256_repository_reads_like_any_other(tmp_path):
    root = str(tmp_path / "repo")
    os.makedirs(root)
    git(root, "init", "-q", "--object-format=sha256", "-b", "main")
    os.makedirs(os.path.join(root, "d"))
    for path, text in FILES.items():
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    gd = root + "/.git"
    commit = resolve_commit(gd, "main")
    assert len(commit) == 64 and resolve_commit(gd, commit[:10]) == commit
    assert read_blob(gd, "main", "d/b.txt") == (b"bee\n", commit)
    assert [e.path for e in list_tree(gd, "main", depth=2)[0]] == ["d", "d/b.txt", "a.txt"]
    with ObjectBatch(gd) as batch:
        assert batch.get(f"{commit}^{{tree}}")[::2] == ("tree", 32)
        assert batch.header(f"{commit}:a.txt")[1:] == ("blob", 6)
    assert object_info(gd, f"{commit}:d") is not None
