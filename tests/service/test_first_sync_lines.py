"""The first sync's progress lines of `codesearch serve` (`launcher.wait_first_sync`) over a real
state store: the last line ("every repository indexed") is printed only once the searchers have
what was indexed, so a script that searches on that line finds it (CI once searched in the moment
between a repository recorded indexed and the scheduler's next tick handing its shards to the
searchers, and found nothing)."""

from __future__ import annotations

from codesearch.hosts.base import HostRepo
from codesearch.serving.launcher import wait_first_sync
from codesearch.statuses import IndexStatus, SyncStatus
from codesearch.store import Store


def _store(tmp_path, indexed: int, of: int) -> Store:
    store = Store.open(str(tmp_path))
    store.upsert_connection("gh", "github", {"type": "github"})
    listing = [HostRepo(name=f"github.com/acme/r{i}", display_name=f"acme/r{i}", code_host_type="github",
                        clone_url=f"https://github.com/acme/r{i}.git") for i in range(of)]
    store.upsert_repos("gh", listing)
    store.update_connection_status("gh", SyncStatus.SYNCED)
    for repo in store.repos_for_connection("gh")[:indexed]:
        store.update_repo_index_status(repo.id, IndexStatus.INDEXED)
    return store


def test_the_last_line_waits_for_the_searchers(tmp_path):
    store = _store(tmp_path, indexed=2, of=2)
    said: list[str] = []
    try:
        assert wait_first_sync(store, say=said.append, searchable=lambda: said.append("<searchers caught up>"))
    finally:
        store.close()
    assert said == ["<searchers caught up>", "first sync: 1/1 connections synced, 2/2 repositories indexed",
                    "  indexed [1/2] github.com/acme/r0", "  indexed [2/2] github.com/acme/r1"]


def test_lines_before_the_last_do_not_wait(tmp_path):
    store = _store(tmp_path, indexed=1, of=2)
    said: list[str] = []
    try:
        assert not wait_first_sync(store, say=said.append, timeout_s=0,
                                   searchable=lambda: said.append("<searchers caught up>"))
    finally:
        store.close()
    assert said[0] == "first sync: 1/1 connections synced, 1/2 repositories indexed"
    assert "<searchers caught up>" not in said
