"""codesearch.git.process (the one git runner), the diff parser and the date helpers, table by
table: the environment a real git process sees, time limits (a hanging git and its children are
killed), scrubbing of what git says, the error it becomes; then `DiffParser` on hand-written
diffs with the traps git's format holds, and the dates handed to git."""

from __future__ import annotations

import contextlib
import os
import pickle
import time
from datetime import UTC, datetime

import pytest

from codesearch.errors import CodesearchError, GitError
from codesearch.git import dates, process
from codesearch.git.diff import DiffParser, FileDiff, Hunk
from codesearch.git.process import Git, GitFailed, environment
from codesearch.redaction import Scrubber
from tests.corpus import git as corpus_git

# ---------------------------------------------------------------------- environment

# (inherited variable, its value, what the git process gets: None = dropped)
ENV_CASES = [
    ("GIT_DIR", "/elsewhere", None),
    ("GIT_WORK_TREE", "/elsewhere", None),
    ("GIT_CONFIG_PARAMETERS", "'core.pager'='evil'", None),
    ("GIT_TRACE_CURL", "1", None),
    ("GIT_TRACE", "1", None),
    ("GIT_ASKPASS", "/usr/bin/my-askpass", "false"),  # replaced by a program that fails
    ("SSH_ASKPASS", "/usr/bin/my-askpass", "false"),
    ("GIT_TERMINAL_PROMPT", "1", "0"),
    ("LC_ALL", "de_DE.UTF-8", "C"),
    ("LANGUAGE", "de", "C"),
    ("GIT_SSH_COMMAND", "ssh -i /keys/id", "ssh -i /keys/id"),  # transport set-up an operator relies on
    ("GIT_SSL_CAINFO", "/etc/ca.pem", "/etc/ca.pem"),
    ("GIT_PROXY_COMMAND", "my-proxy", "my-proxy"),
    ("HTTPS_PROXY", "http://proxy:3128", "http://proxy:3128"),  # not git's: kept
]


@pytest.mark.parametrize("name,value,want", ENV_CASES, ids=[c[0] for c in ENV_CASES])
def test_the_environment_policy(monkeypatch, name, value, want):
    monkeypatch.setenv(name, value)
    env = environment()
    got = env.get(name)
    if want == "false":
        assert os.path.basename(got) == "false"
    else:
        assert got == want
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == os.devnull


def test_config_goes_through_the_environment_after_the_protective_entries():
    env = environment((("http.extraHeader", "Authorization: Basic abc"),))
    entries = [(env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"]) for i in range(int(env["GIT_CONFIG_COUNT"]))]
    assert entries == [*process.PROTECTIVE_CONFIG, ("http.extraHeader", "Authorization: Basic abc")]


@pytest.fixture()
def leaky_home(tmp_path, monkeypatch):
    """A user whose config files and environment would change what git does."""
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]\n\tname = FromHome\n[alias]\n\tst = status\n")
    (home / ".config" / "git" / "config").write_text("[core]\n\tpager = evil-pager\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'user.email'='from@env'")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.editor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "evil-editor")
    return home


@pytest.mark.parametrize("key", ["user.name", "user.email", "core.pager", "core.editor", "alias.st"])
def test_a_real_git_reads_no_user_config(leaky_home, key):
    assert corpus_git_config(key) == ""


def corpus_git_config(key: str) -> str:
    return Git().text(["config", "--get", key], check=False).strip()


def test_every_config_entry_git_sees_is_ours(leaky_home, tmp_path):
    repo = tmp_path / "r"
    corpus_git(str(tmp_path), "init", "-q", "-b", "main", str(repo))
    listing = Git.at(str(repo / ".git")).text(["config", "--list", "--show-scope"])
    scopes = {line.split("\t", 1)[0] for line in listing.splitlines()}
    assert scopes <= {"command", "local"}  # no "global", no "system"
    assert "evil" not in listing and "FromHome" not in listing


def test_a_credential_prompt_fails_at_once_instead_of_waiting():
    t = time.monotonic()
    res = Git(timeout_s=20).run(["credential", "fill"], stdin=b"protocol=https\nhost=example.com\n")
    assert res.returncode != 0 and "terminal prompts disabled" in res.stderr
    assert time.monotonic() - t < 10


# ---------------------------------------------------------------------- time limits


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is dead, waiting to be reaped
    except FileNotFoundError:
        return True


HANG = "!echo $$ > \"$1\"; sleep 60; :"  # a git alias running a shell that waits: git's child


@pytest.mark.parametrize("how", ["run", "stream"])
def test_a_hanging_git_and_its_children_are_killed(tmp_path, how):
    pidfile = str(tmp_path / "pid")
    git = Git(timeout_s=0.5)
    args = ["-c", f"alias.hang={HANG}", "hang", pidfile]
    t = time.monotonic()
    with pytest.raises(GitFailed) as info:
        if how == "run":
            git.run(args)
        else:
            with git.stream(args) as p:
                assert p.out.until(b"\n", 100) is None
                p.finish()
    assert time.monotonic() - t < 10
    assert info.value.timed_out and info.value.returncode is None and info.value.command == "hang"
    assert str(info.value) == "git timed out after 0.5s"
    pid = int(open(pidfile).read())
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


@pytest.mark.parametrize("limits", [(30, 0.3), (0.3, 30), (0.6, 0.3, 30), (30, 0.3, 0.6)])
def test_streams_are_killed_in_the_order_of_their_limits(tmp_path, limits):
    """One watchdog thread kills every stream: a stream with a shorter limit started after one
    with a longer limit is still killed on time, and the others are left running."""
    repo = tmp_path / "r"
    corpus_git(str(tmp_path), "init", "-q", "-b", "main", str(repo))
    streams = [Git.at(str(repo / ".git"), timeout_s=s).stream(["cat-file", "--batch"], stdin=True) for s in limits]
    t = time.monotonic()
    try:
        for limit in sorted(s for s in limits if s < 30):
            stream = streams[limits.index(limit)]
            assert stream.out.until(b"\n", 100) is None  # (until its timer kills git)
            assert limit - 0.05 < time.monotonic() - t < limit + 5
            with pytest.raises(GitFailed, match=f"^git timed out after {limit:g}s reading the repository$"):
                stream.finish()
        assert [s.proc.poll() for s, limit in zip(streams, limits, strict=True) if limit == 30] == [None]
    finally:
        for stream in streams:
            with contextlib.suppress(GitFailed):
                stream.__exit__(None, None, None)


def test_the_default_limit_is_read_when_a_call_starts(tmp_path, monkeypatch):
    repo = tmp_path / "r"
    corpus_git(str(tmp_path), "init", "-q", "-b", "main", str(repo))
    monkeypatch.setattr(process, "GIT_TIMEOUT_S", 0.3)
    with pytest.raises(GitFailed, match=r"^git timed out after 0.3s reading the repository$"):
        with Git.at(str(repo / ".git")).stream(["cat-file", "--batch"], stdin=True) as p:  # waits for input
            assert p.out.until(b"\n", 100) is None
            p.finish()


def test_no_call_starts_after_the_deadline(tmp_path):
    marker = tmp_path / "ran"
    git = Git(timeout_s=60, deadline=time.monotonic() - 1)
    with pytest.raises(GitFailed) as info:
        git.run(["-c", f"alias.touch=!touch {marker}", "touch"])
    assert info.value.timed_out and not marker.exists()


def test_a_deadline_shortens_the_limit():
    git = Git(timeout_s=600, deadline=time.monotonic() + 2)
    assert 0 < git.limit() <= 2
    assert Git(timeout_s=5).limit() == 5


# ---------------------------------------------------------------------- scrubbing and errors

TOKEN = "s3cr3t-t0ken"

# (git's words, secrets, {folder: label}, what may be shown)
SCRUB_CASES = [
    ("fatal: unable to access 'https://bob:s3cr3t-t0ken@git.example.com/a.git/': 403", (), {},
     "fatal: unable to access 'https://git.example.com/a.git/': 403"),
    ("fatal: could not read from ssh://deploy@host:22/a.git", (), {}, "fatal: could not read from ssh://host:22/a.git"),
    ("> Authorization: Basic Ym9iOnMzY3IzdA==", (), {}, "> Authorization: ***"),
    ("authorization: bearer abc.def", (), {}, "authorization: ***"),
    ("remote said s3cr3t-t0ken twice: s3cr3t-t0ken", (TOKEN,), {}, "remote said *** twice: ***"),
    ("fatal: not a git repository: '/srv/data/repos/7'", (), {"/srv/data/repos": "<mirrors>"},
     "fatal: not a git repository: '<mirrors>/7'"),
    ("fatal: '/srv/data/repos/7/HEAD' is corrupt", (), {"/srv/data/repos/7": "the repository",
                                                        "/srv/data/repos": "<mirrors>"},
     "fatal: 'the repository/HEAD' is corrupt"),  # the longer folder first
    ("nothing to hide here", (TOKEN,), {"/srv": "x"}, "nothing to hide here"),
]


@pytest.mark.parametrize("text,secrets,places,want", SCRUB_CASES)
def test_scrubber(text, secrets, places, want):
    assert Scrubber.hiding(places, secrets)(text) == want


def test_scrubber_hides_a_folder_by_its_real_path_too(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    scrub = Scrubber.hiding({str(tmp_path / "link"): "<data dir>"})
    assert scrub(f"at {real}/x and {tmp_path / 'link'}/y") == "at <data dir>/x and <data dir>/y"


# (command, secrets, words the error must have, words it must not have)
FAILURE_CASES = [
    (["ls-remote", f"https://bob:{TOKEN}@127.0.0.1:9/a.git"], (TOKEN,), ["git ls-remote failed", "127.0.0.1:9/a.git"],
     [TOKEN, "bob"]),
    (["ls-remote", "https://127.0.0.1:9/a.git"], (), ["git ls-remote failed", "connect"], []),
    (["-c", "user.name=x", "rev-parse", "--verify", "no-such-ref"], (), ["git rev-parse failed"], []),
]


@pytest.mark.parametrize("args,secrets,has,hasnt", FAILURE_CASES, ids=["credentials-in-url", "unreachable", "bad-ref"])
def test_a_failed_command_is_a_scrubbed_git_error(tmp_path, args, secrets, has, hasnt):
    repo = tmp_path / "r"
    corpus_git(str(tmp_path), "init", "-q", "-b", "main", str(repo))
    gd = str(repo / ".git")
    git = Git(git_dir=gd, scrubber=Scrubber.hiding({gd: "the repository"}, secrets), timeout_s=20)
    with pytest.raises(GitFailed) as info:
        git.run(args, check=True)
    e = info.value
    shown = str(e) + e.stderr
    assert all(w in str(e) for w in has), str(e)
    assert not any(w in shown for w in hasnt) and str(tmp_path) not in shown
    assert isinstance(e, GitError) and isinstance(e, CodesearchError) and e.status_code == 500
    assert e.returncode not in (0, None) and not e.timed_out
    again = pickle.loads(pickle.dumps(e))  # crosses Ray process boundaries intact
    assert type(again) is GitFailed and str(again) == str(e)
    assert (again.command, again.returncode, again.stderr) == (e.command, e.returncode, e.stderr)


def test_repository_commands_name_the_repository_not_its_folder(tmp_path):
    gd = str(tmp_path / "not-a-repo")
    os.mkdir(gd)
    res = Git.at(gd).run(["rev-parse", "--git-dir"])
    assert res.returncode != 0 and "the repository" in res.stderr and gd not in res.stderr


# ---------------------------------------------------------------------- the diff parser


def _parse(text: str, **caps) -> tuple[list[FileDiff], bool]:
    parser = DiffParser(**caps)
    lines = text.encode().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for line in lines:
        room = parser.room()
        if not parser.feed(line[:room], len(line) > room):
            break
    return parser.finish(), parser.truncated


MODIFY = """diff --git a/src/app.py b/src/app.py
index 1111111..2222222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -1,3 +1,3 @@ def main():
 a
-b
+B
 c
"""
TRICKY = """diff --git a/doc.md b/doc.md
--- a/doc.md
+++ b/doc.md
@@ -1,2 +1,3 @@
 text
+diff --git a/fake b/fake
 more
\\ No newline at end of file
diff --git "a/sp ace\\ttab" "b/sp ace\\ttab"
new file mode 100644
--- /dev/null
+++ "b/sp ace\\ttab"
@@ -0,0 +1 @@
+x
"""
RENAME_BINARY_DELETE = """diff --git a/old.txt b/new.txt
similarity index 100%
rename from old.txt
rename to new.txt
diff --git a/img.png b/img.png
Binary files a/img.png and b/img.png differ
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
"""

# (name, diff text, caps, files as (old, new, status, binary, hunks[, cut]), truncated);
# a hunk is (old_start, old_lines, new_start, new_lines, header, lines); cut: the byte cap fell inside that file
_RENAME_ONLY = RENAME_BINARY_DELETE.split("diff --git a/img.png")[0]
PARSER_CASES = [
    ("modify", MODIFY, {}, [("src/app.py", "src/app.py", "modified", False,
                             [(1, 3, 1, 3, "def main():", [" a", "-b", "+B", " c"])])], False),
    ("content-that-looks-like-a-header", TRICKY, {},
     [("doc.md", "doc.md", "modified", False,
       [(1, 2, 1, 3, "", [" text", "+diff --git a/fake b/fake", " more", "\\ No newline at end of file"])]),
      (None, "sp ace\ttab", "added", False, [(0, 0, 1, 1, "", ["+x"])])], False),
    ("rename-binary-delete", RENAME_BINARY_DELETE, {},
     [("old.txt", "new.txt", "renamed", False, []), ("img.png", "img.png", "modified", True, []),
      ("gone.txt", None, "deleted", False, [(1, 1, 0, 0, "", ["-bye"])])], False),
    ("max-files", RENAME_BINARY_DELETE, {"max_files": 2},
     [("old.txt", "new.txt", "renamed", False, []), ("img.png", "img.png", "modified", True, [])], True),
    ("max-bytes-drops-the-hunk-being-read", MODIFY, {"max_bytes": len(MODIFY) - 4},
     [("src/app.py", "src/app.py", "modified", False, [], True)], True),
    ("max-bytes-in-a-header-cuts-that-file", RENAME_BINARY_DELETE, {"max_bytes": len(_RENAME_ONLY) - 10},
     [("old.txt", "new.txt", "renamed", False, [], True)], True),
    ("max-bytes-before-the-next-file-cuts-none", RENAME_BINARY_DELETE, {"max_bytes": len(_RENAME_ONLY) + 15},
     [("old.txt", "new.txt", "renamed", False, [])], True),
    ("max-bytes-exactly", MODIFY, {"max_bytes": len(MODIFY)},
     [("src/app.py", "src/app.py", "modified", False, [(1, 3, 1, 3, "def main():", [" a", "-b", "+B", " c"])])],
     False),
    ("empty", "", {}, [], False),
]


@pytest.mark.parametrize("text,caps,want,truncated", [c[1:] for c in PARSER_CASES], ids=[c[0] for c in PARSER_CASES])
def test_diff_parser(text, caps, want, truncated):
    files, cut = _parse(text, **caps)
    expected = [FileDiff(old, new, status, binary, [Hunk(*h[:5], list(h[5])) for h in hunks], cut=rest == [True])
                for old, new, status, binary, hunks, *rest in want]
    assert (files, cut) == (expected, truncated)


# ---------------------------------------------------------------------- dates handed to git

NOW = datetime.now(UTC)

# (since, until, options git gets; None = no commit can match)
RANGE_CASES = [
    (None, None, []),
    ("2024-01-31", None, ["--since=2024-01-31 00:00:00 +0000"]),
    (None, "2024-01-31", ["--until=2024-01-31 23:59:59 +0000"]),  # a bare date: the whole day
    (None, "2024-01-31T10:00:00+02:00", ["--until=2024-01-31 08:00:00 +0000"]),
    ("1960-01-01", None, []),  # before 1970: every commit is after it
    ("2200-01-01", None, ["--since=2099-12-31 23:59:59 +0000"]),  # git's arithmetic ends in 2099
    (None, "2200-01-01", []),  # every commit is before it
    (None, "1969-12-30", None),  # nothing can match
]


@pytest.mark.parametrize("since,until,want", RANGE_CASES)
def test_date_range_args(since, until, want):
    assert dates.date_range_args(since, until) == want


# (git's epoch and offset, ISO 8601 as git's %aI prints it)
ISO_CASES = [
    (("1705000000", "+0200"), "2024-01-11T21:06:40+02:00"),
    (("1705000000", "-0530"), "2024-01-11T13:36:40-05:30"),
    (("0", "+0000"), "1970-01-01T00:00:00+00:00"),
    (("garbage", "+0000"), ""),
    (("1705000000", "bad"), ""),
]


@pytest.mark.parametrize("raw,want", ISO_CASES)
def test_iso_from_git(raw, want):
    assert dates.iso_from_git(*raw) == want


def test_git_date_is_utc():
    assert dates.git_date(datetime(2024, 1, 31, 12, 0, tzinfo=UTC)) == "2024-01-31 12:00:00 +0000"
    assert dates.git_date(NOW).endswith("+0000")
