"""The service's own path for a GitHub App: the scheduler stores the config's apps with the github
connection (references, never the key), the syncer lists through the installation and the indexer
fetches with the installation's token, against the local GitHub of tests/fakehosts/github_app.py."""

from __future__ import annotations

import json

from joserfc.jwk import RSAKey

from codesearch.hosts.github_app import APPS_KEY, TOKENS
from tests.fakehosts.github_app import FakeGitHubApp
from tests.githttp import GitHttpServer


def test_scheduler_syncer_and_indexer_use_the_installation(tmp_path, monkeypatch):
    from codesearch.runtime.scheduler import Scheduler
    from codesearch.runtime.workers import ConnectionSyncer, RepoIndexer, RuntimeOptions
    from codesearch.store import models as m

    key = RSAKey.generate_key(2048)
    pem = key.as_pem(private=True).decode()
    monkeypatch.setenv("APP_KEY", pem)
    TOKENS.clear()
    git = GitHttpServer(str(tmp_path / "git"), users=set())  # only installation tokens get in
    with FakeGitHubApp("77", key.as_pem(private=False), git=git) as gh:
        gh.owned = [git]
        git.start()
        try:
            gh.add_org("acme")
            gh.add_repo("acme", "private-api", private=True)
            gh.install("acme")
            config = tmp_path / "config.json"
            config.write_text(json.dumps({
                "apps": [{"type": "github", "id": "77", "privateKey": {"env": "APP_KEY"},
                          "deploymentHostname": "127.0.0.1"}],
                "connections": {"ghe": {"type": "github", "url": gh.base_url, "orgs": ["acme"]}}}))
            data = str(tmp_path / "data")
            options = RuntimeOptions(poll_s=0.05, heartbeat_s=0.1)
            scheduler = Scheduler(str(config), data, options)
            syncer, indexer = ConnectionSyncer(data, "sync-app", options), RepoIndexer(data, "index-app", options)
            try:
                stored = scheduler.store.get_connection("ghe").config
                assert stored[APPS_KEY] == [{"id": "77", "privateKey": {"env": "APP_KEY"},
                                             "deploymentHostname": "127.0.0.1"}]
                assert "PRIVATE KEY" not in json.dumps(stored)
                scheduler.tick()
                while syncer.run_once():
                    pass
                TOKENS.clear()  # the indexer runs in another process in the service: no shared cache
                while indexer.run_once():
                    pass
                assert (syncer.done, indexer.done, indexer.failed) == (1, 1, 0)
                (repo,) = scheduler.store.repos_for_connection("ghe")
                assert repo.display_name == "acme/private-api" and repo.index_status == m.INDEXED
                assert {u for _, _, u in git.requests if u} == {"x-access-token"}
            finally:
                syncer.close()
                indexer.close()
                scheduler.close()
        finally:
            TOKENS.clear()
