"""Push webhooks end to end: `codesearch serve` as a real process (its own Ray and Serve) with a
config of one GitHub connection whose host API is a local fake (`tests.fakehosts.github`) and
whose repository is a real bare repository behind git smart HTTP (`tests.githttp`), all on
127.0.0.1.

The config's periodic resync and re-index are a day apart, so after the first index only a
webhook can make the service fetch and index again. A new commit is pushed into the served bare
repository; webhooks that are unsigned or signed with another secret are refused (401) and queue
no job (the commit stays unsearchable); a push event signed as GitHub signs it
(``X-Hub-Signature-256: sha256=<HMAC-SHA256(secret, body)>``) is accepted (202) and the pushed
commit becomes searchable within a bounded time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from pathlib import Path

import httpx

from tests.corpus import git
from tests.fakehosts.github import FakeGitHub
from tests.githttp import GitHttpServer
from tests.service.test_serve_cli import ONE_WORKER_EACH, Served

GH_TOKEN = "ghp_webhook0000000000000000000000000000"
CONNECTION = "gh-e2e"  # its secret: CODESEARCH_WEBHOOK_SECRET_GH_E2E (not A-Z/0-9 → "_")
SECRET = "webhook-e2e-" + uuid.uuid4().hex
DAY_MS = 24 * 3600 * 1000
#: Seconds a signed push may take to become searchable (fetch + index + searcher reload, on a busy 2-core machine).
REINDEX_DEADLINE_S = 60.0
#: Seconds a refused push is watched for a re-index that must not happen: a webhook queues its
#: jobs before it answers (the job list is compared at once) and an idle indexer claims a job
#: within half a second.
QUIET_S = 2.0


def _push_commit(bare: Path, work: Path, name: str, text: str) -> str:
    """Commit `name` with `text` in a work clone of `bare` and push it to ``main``: the sha."""
    if not work.exists():
        git(str(bare.parent), "clone", "-q", str(bare), str(work))
    git(str(work), "pull", "-q", "--ff-only")
    (work / name).write_text(text)
    git(str(work), "add", name)
    git(str(work), "commit", "-q", "-m", f"add {name}")
    git(str(work), "push", "-q", "origin", "HEAD:main")
    return git(str(work), "rev-parse", "HEAD").strip()


def _payload(gh: FakeGitHub, full_name: str, before: str, after: str) -> bytes:
    """A push event as GitHub documents it (the fields a receiver reads; GHES layout: web host = the fake)."""
    owner, _, name = full_name.partition("/")
    html = f"{gh.base_url}/{full_name}"
    return json.dumps({
        "ref": "refs/heads/main", "before": before, "after": after, "created": False, "deleted": False,
        "forced": False, "base_ref": None, "compare": f"{html}/compare/{before[:12]}...{after[:12]}",
        "commits": [{"id": after, "message": "update", "url": f"{html}/commit/{after}", "distinct": True,
                     "author": {"name": "T", "email": "t@example.com"}}],
        "head_commit": {"id": after, "message": "update", "url": f"{html}/commit/{after}"},
        "repository": {"id": 1001, "name": name, "full_name": full_name, "private": False,
                       "owner": {"login": owner, "name": owner}, "html_url": html, "url": html,
                       "clone_url": gh.git.url(f"{full_name}.git"), "git_url": f"git://127.0.0.1/{full_name}.git",
                       "ssh_url": f"git@127.0.0.1:{full_name}.git", "default_branch": "main", "master_branch": "main"},
        "pusher": {"name": "alice", "email": "alice@example.com"},
        "sender": {"login": "alice", "id": 1, "type": "User"},
    }).encode()


def _signed(body: bytes, secret: str) -> dict[str, str]:
    return {"X-GitHub-Event": "push", "X-GitHub-Delivery": str(uuid.uuid4()), "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/e2e",
            "X-Hub-Signature-256": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}


def _files(base: str, query: str) -> list[str]:
    r = httpx.post(f"{base}/api/search", json={"query": query, "matches": 10}, timeout=30)
    assert r.status_code == 200, r.text
    return [f["fileName"]["text"] for f in r.json()["files"]]


def _wait_searchable(served: Served, query: str, deadline_s: float) -> float:
    """Seconds until `query` finds a file (fails after `deadline_s`)."""
    start = time.monotonic()
    while True:
        assert served.proc.poll() is None, served.log()[-3000:]
        if _files(served.base, query):
            return time.monotonic() - start
        assert time.monotonic() - start < deadline_s, f"{query!r} not searchable after {deadline_s:g}s\n" + served.log()[-3000:]
        time.sleep(0.5)


def _index_jobs(base: str) -> list[dict]:
    """Every index job the service knows (active and finished)."""
    jobs = []
    for state in ("PENDING", "IN_PROGRESS", "COMPLETED", "FAILED"):
        r = httpx.get(f"{base}/api/jobs", params={"kind": "index", "state": state}, timeout=30)
        assert r.status_code == 200, r.text
        jobs += r.json()
    return sorted(jobs, key=lambda j: j["id"])


def test_a_signed_push_webhook_reindexes_and_unsigned_ones_are_refused(tmp_path):
    git_root = tmp_path / "git"
    git_root.mkdir()
    with GitHttpServer(str(git_root), users={("x-access-token", GH_TOKEN)}) as git_srv, \
            FakeGitHub(GH_TOKEN, "alice", git=git_srv) as gh:
        gh.add_org("acme", members=("alice",))
        gh.add_repo("acme", "widgets")
        bare, work = git_root / "acme" / "widgets.git", tmp_path / "work"
        first = f"firsttoken{uuid.uuid4().hex}"
        before = _push_commit(bare, work, "first.txt", f"{first}\n")
        config = {
            "$schema": "https://raw.githubusercontent.com/sourcebot-dev/sourcebot/main/schemas/v3/index.json",
            "settings": {"reindexIntervalMs": DAY_MS, "resyncConnectionIntervalMs": DAY_MS, **ONE_WORKER_EACH},
            "connections": {CONNECTION: {"type": "github", "url": gh.base_url, "token": {"env": "GH_TOKEN"},
                                         "repos": ["acme/widgets"]}},
        }
        config_path = tmp_path / "config.json"
        config_path.write_text(json.dumps(config, indent=2))
        data = tmp_path / "data"
        data.mkdir()
        served = Served(data, searchers=1, FORCE_ENABLE_ANONYMOUS_ACCESS="true", CONFIG_PATH=str(config_path), GH_TOKEN=GH_TOKEN,
                        CODESEARCH_WEBHOOK_SECRET_GH_E2E=SECRET, CODESEARCH_FIRST_SYNC_TIMEOUT_S="120")
        try:
            served.wait_healthy(timeout_s=240)
            _wait_searchable(served, first, 60)  # the first index (before serving: at once)
            repos = httpx.get(f"{served.base}/api/repos", timeout=30).json()
            assert len(repos) == 1, repos
            repo_name = repos[0]["repoName"]
            jobs_before = _index_jobs(served.base)
            assert jobs_before and all(j["state"] == "COMPLETED" for j in jobs_before), jobs_before

            # A commit is pushed; webhooks not signed with the connection's secret are refused.
            refused = f"refusedtoken{uuid.uuid4().hex}"
            after = _push_commit(bare, work, "refused.txt", f"{refused}\n")
            url = f"{served.base}/api/webhooks/{CONNECTION}"
            body = _payload(gh, "acme/widgets", before, after)
            unsigned = {k: v for k, v in _signed(body, SECRET).items() if k != "X-Hub-Signature-256"}
            for headers in (unsigned, _signed(body, "not-the-secret"),
                            {**_signed(body, SECRET), "X-Hub-Signature-256": "sha256=" + "0" * 64}):
                r = httpx.post(url, content=body, headers=headers, timeout=30)
                assert r.status_code == 401, r.text
                assert r.json()["errorCode"] == "INVALID_WEBHOOK_SIGNATURE", r.text
            # a body changed after signing (another repository named) is refused too
            tampered = body.replace(b"acme/widgets", b"acme/gadgets")
            r = httpx.post(url, content=tampered, headers=_signed(body, SECRET), timeout=30)
            assert r.status_code == 401, r.text
            assert _index_jobs(served.base) == jobs_before, "a refused webhook queued a job"
            time.sleep(QUIET_S)  # an index job, had one been queued, would be claimed by now
            assert _files(served.base, refused) == [], "a refused webhook led to a re-index"
            assert _index_jobs(served.base) == jobs_before

            # The push signed as GitHub signs it: accepted, queued, and the commit is searchable.
            r = httpx.post(url, content=body, headers=_signed(body, SECRET), timeout=30)
            assert r.status_code == 202, r.text
            queued = r.json()["queued"]
            assert [q["repository"] for q in queued] == [repo_name], r.text
            took = _wait_searchable(served, refused, REINDEX_DEADLINE_S)
            print(f"pushed commit searchable {took:.1f}s after the signed webhook")
            assert _files(served.base, first) == ["first.txt"]  # the earlier content stays
            jobs = _index_jobs(served.base)
            assert [j["id"] for j in jobs if j not in jobs_before] == [q["jobId"] for q in queued], jobs
            assert all(j["state"] == "COMPLETED" for j in jobs), jobs

            # A ping (sent when a hook is created) is answered and queues nothing.
            ping = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
            r = httpx.post(url, content=ping, headers={**_signed(ping, SECRET), "X-GitHub-Event": "ping"}, timeout=30)
            assert (r.status_code, r.json()["queued"]) == (200, []), r.text
        finally:
            code = served.stop()
        assert code == 0, served.log()[-3000:]
