"""`codesearch serve` answers while its first sync runs: HTTP comes up before every repository is
indexed, searches answer from what is indexed so far and say how many repositories they cannot
see yet, the home page and its status routes show the sync, and the answers become whole once
the last repository is indexed.

The slow repository is behind real git smart HTTP on 127.0.0.1 that holds every request until
the test lets it go (`GatedGitHttp`), so "during the first sync" is a state the test controls,
not a race it hopes to win.
"""

from __future__ import annotations

import json
import time

import httpx

from tests.corpus import make_local_repo
from tests.githttp import GatedGitHttp, make_bare_repo
from tests.service.test_serve_cli import Served


def _search(base: str, query: str) -> dict:
    """The answer of a search; ``{"files": [], "stats": {}}`` while the searchers are still starting
    (503 SERVICE_UNAVAILABLE with Retry-After: HTTP is up before the runtime's actors are)."""
    r = httpx.post(f"{base}/api/search", json={"query": query, "matches": 10}, timeout=30)
    if r.status_code == 503:
        assert r.json()["errorCode"] == "SERVICE_UNAVAILABLE" and r.headers["Retry-After"], r.text
        return {"files": [], "stats": {}, "starting": True}
    assert r.status_code == 200, r.text
    return r.json()


def _until(what: str, check, served: Served, deadline_s: float = 120.0):
    deadline = time.monotonic() + deadline_s
    while True:
        assert served.proc.poll() is None, served.log()[-3000:]
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not after {deadline_s:g}s\n" + served.log()[-3000:]
        time.sleep(0.5)


def test_search_and_home_page_answer_during_the_first_sync(tmp_path):
    fast = tmp_path / "local"
    make_local_repo(str(fast / "quick"), {"quick.py": "def quickfox_5e2a():\n    return 1\n"})
    make_bare_repo(str(tmp_path / "served"), "team/slow.git", {"slow.py": "def slowpoke_77b3():\n    return 2\n"})
    with GatedGitHttp(str(tmp_path / "served")) as slow_host:
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"connections": {
            "local": {"type": "git", "url": f"file://{fast}/*"},
            "slow": {"type": "git", "url": slow_host.url("team/slow.git")}}}))
        # two indexers (the default on two cores): one waits on the slow clone, the other indexes
        served = Served(tmp_path, searchers=1, CONFIG_PATH=str(config), FORCE_ENABLE_ANONYMOUS_ACCESS="true")
        try:
            served.wait_healthy(indexed=False)  # the slow repository cannot be indexed yet
            # the fast repository is searchable while the slow one still waits for its clone
            got = _until("the fast repository indexed", lambda: (r := _search(served.base, "quickfox_5e2a"))["files"] and r,
                         served)
            assert [f["fileName"]["text"] for f in got["files"]] == ["quick.py"]
            assert not slow_host.gate.is_set()
            # the count is read from the store every few seconds (`index_progress.TTL_S`): the first
            # one seen may date from before the fast repository's index ended
            stats = _until("the stats naming what is not indexed yet, the fast repository indexed",
                           lambda: (i := _search(served.base, "quickfox_5e2a")["stats"].get("indexing"))
                           and i["repositories"] > i["notYetIndexed"] and i, served)
            assert stats["notYetIndexed"] >= 1 and stats["repositories"] >= stats["notYetIndexed"] + 1, stats
            assert _search(served.base, "slowpoke_77b3")["files"] == []
            assert "starting" not in _search(served.base, "slowpoke_77b3")
            # the home page and the status routes it polls answer, and show the sync under way
            home = httpx.get(f"{served.base}/", timeout=30)
            assert home.status_code == 200 and 'id="sync"' in home.text
            repos = httpx.get(f"{served.base}/api/repos/status", params={"perPage": 100}, timeout=30)
            assert repos.status_code == 200, repos.text
            _until("the first sync's progress printed", lambda: "serving at" in served.log() and "first sync: " in served.log(),
                   served, deadline_s=60)

            slow_host.gate.set()
            got = _until("the slow repository indexed", lambda: (r := _search(served.base, "slowpoke_77b3"))["files"] and r,
                         served)
            assert [f["fileName"]["text"] for f in got["files"]] == ["slow.py"]
            _until("the stats without `indexing`", lambda: "indexing" not in _search(served.base, "slowpoke_77b3")["stats"],
                   served, deadline_s=30)
            # printed when the launcher next looks at the store (every 0.5 s), once the searchers have it
            _until("the first sync's last line", lambda: "first sync: 2/2 connections synced, 2/2 repositories indexed"
                   in served.log(), served, deadline_s=30)
        finally:
            slow_host.gate.set()
            code = served.stop()
        assert code == 0, served.log()[-3000:]
