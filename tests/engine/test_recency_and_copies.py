"""Per-file recency and content identity (codesearch/index/recency.py, the optional ``doc.time`` and
``doc.oid`` sections), the ``sort`` orders (codesearch/search/sorting.py) and folded copies
(codesearch/search/duplicates.py), each checked against a brute-force table computed independently:
``git log -1`` per file for the times, hashlib over the files on disk for the contents.

The world: an upstream repository, a fork of it (a clone with one more commit), a repository that
vendors one upstream file under another path, and a plain directory holding another copy; every
file holds the word ``needle`` once, and the commits have known, distinct dates.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess

import pytest

from codesearch.git.process import Git
from codesearch.index import format as fmt
from codesearch.index import manifest
from codesearch.index.builder import IndexSettings, index_source
from codesearch.index.compact import compact
from codesearch.index.recency import walk_changes
from codesearch.index.shard import Shard
from codesearch.index.sources import DirectorySource, GitSource, RepoInfo
from codesearch.search.duplicates import mark_copies
from codesearch.search.engine import Searcher
from codesearch.search.options import SearchOptions

UTIL = "def helper():\n    return 'needle'\n"
#: (repository, commits: (date, {path: content or None to delete}))
HISTORY = {
    "upstream": [
        ("2020-01-01T00:00:00Z", {"lib/util.py": UTIL, "README.md": "needle readme v1\n"}),
        ("2021-06-01T00:00:00Z", {"app.py": "print('needle app')\n"}),
        ("2023-02-01T00:00:00Z", {"README.md": "needle readme v2\n"}),
    ],
    "vendor": [
        ("2019-05-05T00:00:00Z", {"main.go": "package main // needle\n", "old.txt": "needle old\n"}),
        ("2022-03-01T00:00:00Z", {"third_party/util.py": UTIL}),
    ],
}
#: the fork: a clone of upstream, then this commit
FORK_COMMIT = ("2024-01-01T00:00:00Z", {"app.py": "print('needle app, forked')\n", "fork.txt": "needle fork\n"})
PLAIN = {"copy/util.py": UTIL, "plain.txt": "needle plain\n"}


def commit(root: str, date: str, files: dict[str, str]) -> None:
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", date], cwd=root, check=True, env=env)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("recency"))
    roots = {}
    for name, commits in HISTORY.items():
        root = roots[name] = os.path.join(base, name)
        os.makedirs(root)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
        for date, files in commits:
            commit(root, date, files)
    roots["fork"] = os.path.join(base, "fork")
    subprocess.run(["git", "clone", "-q", roots["upstream"], roots["fork"]], check=True)
    commit(roots["fork"], *FORK_COMMIT)
    roots["plain"] = os.path.join(base, "plain")
    for path, text in PLAIN.items():
        os.makedirs(os.path.dirname(os.path.join(roots["plain"], path)), exist_ok=True)
        with open(os.path.join(roots["plain"], path), "w") as f:
            f.write(text)
    index = os.path.join(base, "index")
    settings = IndexSettings(ctags=False)
    for name, root in roots.items():
        source = GitSource(root, repo=RepoInfo(name=f"git.local/{name}")) if name != "plain" else \
            DirectorySource(root, RepoInfo(name="git.local/plain"))
        index_source(source, index, settings)
        if isinstance(source, GitSource):
            source.close()
    return {"roots": roots, "index": index, "base": base}


def brute_force(roots: dict[str, str]) -> dict[tuple[str, str], tuple[str, int]]:
    """(repository, path) → (git blob id of the file on disk by hashlib, time of `git log -1` on it;
    0 for the plain directory, which has no history)."""
    table = {}
    for name, root in roots.items():
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d != ".git"]
            for fn in filenames:
                full = os.path.join(dirpath, fn)
                rel = os.path.relpath(full, root)
                data = open(full, "rb").read()
                oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
                when = 0
                if name != "plain":
                    out = subprocess.run(["git", "log", "-1", "--format=%ct", "--", rel], cwd=root, check=True,
                                         capture_output=True, text=True).stdout.strip()
                    when = int(out)
                table[(f"git.local/{name}", rel)] = (oid, when)
    return table


def indexed(index: str) -> dict[tuple[str, str], tuple[str, int]]:
    """What the shards of `index` record: (repository, path) → (blob id, time)."""
    out = {}
    for entry in manifest.current_index(index):
        shard = Shard(entry.path).with_dead(entry.dead)
        for d in shard.docs_where("all"):
            oid = shard.content_id(d)
            out[(shard.repo(d).name, shard.doc_path(d))] = (oid.hex() if oid else "", shard.commit_time(d))
        shard.close()
    return out


def search(index: str, query: str = "needle", **options) -> list[dict]:
    s = Searcher(index)
    try:
        return s.search(query, options=SearchOptions(**{"matches": 1000, **options}))["files"]
    finally:
        s.close()


def key(f: dict) -> tuple[str, str]:
    return f["repository"], f["fileName"]["text"]


# ----------------------------------------------------------------------------- the sections


def test_every_document_records_its_blob_id_and_last_commit_time(world):
    assert indexed(world["index"]) == brute_force(world["roots"])


def test_the_api_says_both_per_file(world):
    table = brute_force(world["roots"])
    files = search(world["index"])
    assert {key(f) for f in files} == set(table)
    for f in files:
        oid, when = table[key(f)]
        assert f["contentHash"] == oid
        assert f.get("lastCommitTime") == (fmt_time(when) if when else None)


def fmt_time(unix: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(unix, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("max_commits, expected", [
    (1, {"README.md"}),
    (2, {"README.md", "app.py"}),
    (10, {"README.md", "app.py", "lib/util.py"}),
])
def test_a_walk_reads_at_most_max_commits(world, max_commits, expected):
    git = Git.at(os.path.join(world["roots"]["upstream"], ".git"))
    times = walk_changes(git, "HEAD", max_commits).times
    assert set(times) == expected
    table = brute_force({"upstream": world["roots"]["upstream"]})
    assert all(times[p] == table[("git.local/upstream", p)][1] for p in times)


# ----------------------------------------------------------------------------- sort


def test_recency_puts_the_newest_change_first_and_unknown_last(world):
    table = brute_force(world["roots"])
    files = search(world["index"], sort="recency")
    times = [table[key(f)][1] for f in files]
    known = [t for t in times if t]
    assert times == known + [0] * (len(times) - len(known))  # unknown (the plain directory) last
    assert known == sorted(known, reverse=True)
    assert len(files) == len(table)


def test_path_orders_by_repository_then_path(world):
    files = search(world["index"], sort="path")
    assert [key(f) for f in files] == sorted(brute_force(world["roots"]))


def test_an_order_decides_which_files_the_budget_keeps(world):
    """The search looks at up to SORT_WINDOW matches, not only at the first `matches` it finds."""
    table = brute_force(world["roots"])
    newest = sorted((t for _, t in table.values()), reverse=True)[:3]
    assert [table[key(f)][1] for f in search(world["index"], sort="recency", matches=3)] == newest
    first_paths = sorted(table)[:3]
    assert [key(f) for f in search(world["index"], sort="path", matches=3)] == first_paths


# ----------------------------------------------------------------------------- copies


def groups_on_disk(table: dict) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {}
    for k, (oid, _) in table.items():
        out.setdefault(oid, set()).add(k)
    return out


def test_each_copy_points_at_the_first_file_of_its_content(world):
    table = brute_force(world["roots"])
    files = mark_copies(search(world["index"]))
    first: dict[str, tuple[str, str]] = {}
    for f in files:
        oid = table[key(f)][0]
        if oid not in first:
            first[oid] = key(f)
            assert "duplicateOf" not in f
        else:
            assert (f["duplicateOf"]["repository"], f["duplicateOf"]["fileName"]) == first[oid]
    copies = {key(f) for f in files if "duplicateOf" in f}
    assert copies == {k for group in groups_on_disk(table).values() for k in group} - set(first.values())
    assert len(copies) >= 4  # util.py four times, README.md twice


def test_folded_copies_do_not_use_up_the_budget(world):
    table = brute_force(world["roots"])
    distinct = len(groups_on_disk(table))
    plain = search(world["index"], matches=distinct)
    assert len(plain) < len(table)  # copies count: the budget ends before every file
    folded = mark_copies(search(world["index"], matches=distinct, fold_copies=True))
    assert {key(f) for f in folded} == set(table)  # every content once, its copies free
    charged = [f for f in folded if "duplicateOf" not in f]
    assert len(charged) == distinct


def test_a_copy_the_caller_cannot_see_is_neither_shown_nor_counted(world):
    s = Searcher(world["index"])
    visible = frozenset(r.id for sh in s.shards for r in sh.repos if r.name != "git.local/vendor")
    resp = s.search("needle", options=SearchOptions(matches=1000, fold_copies=True, visible_repos=visible))
    s.close()
    files = mark_copies(resp["files"])
    assert all(f["repository"] != "git.local/vendor" for f in files)
    assert all(f["duplicateOf"]["repository"] != "git.local/vendor" for f in files if "duplicateOf" in f)
    assert resp["stats"]["actualMatchCount"] == len(files)  # one needle per file, none of vendor's


# ----------------------------------------------------------------------------- older shards, compaction


def strip_sections(path: str, drop: set[str]) -> None:
    f = fmt.ShardFile(path)
    sections = {}
    for tag in list(f._sections):
        if tag not in drop:
            sections[tag] = bytes(f.raw(tag))
    f.close()
    fmt.write_shard(path, sections)


def test_a_shard_without_the_sections_still_loads_and_ranks_as_unknown(world, tmp_path):
    index = str(tmp_path / "old")
    shutil.copytree(world["index"], index)
    fork = next(e.path for e in manifest.current_index(index) if "fork" in os.path.basename(e.path))
    strip_sections(fork, {"doc.oid", "doc.time"})
    files = search(index, sort="recency")
    forked = [f for f in files if f["repository"] == "git.local/fork"]
    assert forked and all("contentHash" not in f and "lastCommitTime" not in f for f in forked)
    assert [f["repository"] for f in files[-len(forked) - 2:]].count("git.local/fork") == len(forked)  # last, with plain
    assert not any("duplicateOf" in f for f in mark_copies(forked))


def test_compaction_keeps_both(world, tmp_path):
    index = str(tmp_path / "compacted")
    shutil.copytree(world["index"], index)
    before = len(manifest.current_index(index))
    stats = compact(index, IndexSettings(ctags=False))
    assert stats.merged_shards >= 2 and len(manifest.current_index(index)) < before
    assert indexed(index) == brute_force(world["roots"])
