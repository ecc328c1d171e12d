"""Google Cloud IAP sign-in through `codesearch serve` (a real process, its own Ray and Serve):
the config's gcp-iap entry and its audience variable, and ``CODESEARCH_GCP_IAP_JWKS_URL``, reach
the API replicas, which check each request's ``x-goog-iap-jwt-assertion`` against a key set on
127.0.0.1 (`tests.fakehosts.iap`). The unit of behaviour is in `tests/web/test_sso_iap.py`; this file
checks that it holds where it runs in production.
"""

from __future__ import annotations

import json
import re

import httpx

from codesearch.sso.iap import ASSERTION_HEADER
from tests.fakehosts.iap import FakeIapKeys
from tests.service.test_serve_cli import ONE_WORKER_EACH, Served

AUD = "/projects/42/global/backendServices/4242"


def test_serve_signs_in_iap_requests_and_refuses_bad_ones(tmp_path):
    config = {"identityProviders": [{"provider": "gcp-iap", "purpose": "sso", "audience": {"env": "IAP_AUDIENCE"}}],
              "settings": ONE_WORKER_EACH}
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(config))
    data = tmp_path / "data"
    data.mkdir()
    with FakeIapKeys() as google:
        served = Served(data, searchers=1, CONFIG_PATH=str(config_path), IAP_AUDIENCE=AUD,
                        CODESEARCH_GCP_IAP_JWKS_URL=google.jwks_url)
        try:
            served.wait_healthy(timeout_s=240, indexed=False)
            token_sent = google.assertion(AUD, "alice@example.com")
            alice = {ASSERTION_HEADER: token_sent}
            with httpx.Client(base_url=served.base, timeout=30) as http:
                cases = [
                    # (headers, status of GET /api/repos)
                    ({}, 401),  # no IAP, no key, anonymous access off
                    (alice, 200),
                    ({ASSERTION_HEADER: google.assertion("/projects/1/apps/other", "alice@example.com")}, 401),
                    ({ASSERTION_HEADER: google.assertion(AUD, "alice@example.com", exp=1_000_000_000)}, 401),
                ]
                for headers, status in cases:
                    r = http.get("/api/repos", headers=headers)
                    assert r.status_code == status, (headers.keys(), r.text, served.log()[-2000:])
                page = http.get("/settings/keys", headers=alice)
                assert re.search(r"Signed in as <strong>alice@example.com</strong> · owner", page.text), page.text
                csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
                body = {"query": "anything", "matches": 10}
                assert http.post("/api/search", json=body, headers=alice).status_code == 401  # no CSRF token
                r = http.post("/api/search", json=body, headers={**alice, "X-CSRF-Token": csrf})
                assert r.status_code == 200, r.text
        finally:
            code = served.stop()
        assert code == 0, served.log()[-3000:]
        assert not [part for part in token_sent.split(".")[1:] if part in served.log()]  # never logged
