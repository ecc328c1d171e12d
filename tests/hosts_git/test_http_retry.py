"""codesearch.http_retry, the retry and redaction helpers shared by the code host adapters and the
language model client, and what HostHttp makes of them against a server on 127.0.0.1."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from codesearch.errors import HostAuthError, HostError
from codesearch.hosts.http import HostHttp
from codesearch.redaction import Redactor
from codesearch.http_retry import (
    backoff_seconds,
    retry_after_seconds,
    safe_url,
)
from tests.fakehosts.server import FakeServer

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.mark.parametrize("value, seconds", [
    ("7", 7.0), (" 2.5 ", 2.5), ("-3", 0.0), ("Fri, 02 Jan 2026 03:04:35 GMT", 30.0),
    ("Fri, 02 Jan 2026 03:00:00 GMT", 0.0), ("Fri, 02 Jan 2026 03:04:35", 30.0),  # no zone: GMT
    ("soon", None), ("", None), (None, None),
])
def test_retry_after_is_seconds_or_an_http_date(value, seconds):
    assert retry_after_seconds(value, now=lambda: NOW) == seconds


def test_backoff_doubles_up_to_the_cap():
    assert [backoff_seconds(n) for n in range(5)] == [1, 2, 4, 8, 16]
    assert backoff_seconds(10, cap=60) == 60 and backoff_seconds(2, base=0.5) == 2.0 and backoff_seconds(-1) == 1


@pytest.mark.parametrize("url, shown", [
    ("https://user:pw@git.example.com:8443/api/v4/projects?private_token=abc#x", "https://git.example.com:8443/api/v4/projects"),
    ("http://127.0.0.1:5000/v1/chat/completions?key=k", "http://127.0.0.1:5000/v1/chat/completions"),
    ("https://[::1]:9000/x", "https://[::1]:9000/x"),
    ("http://h:notaport/x", "<invalid URL>"),
])
def test_safe_url_drops_credentials_query_and_fragment(url, shown):
    assert safe_url(url) == shown


def test_redactor_masks_longest_first_header_values_without_scheme_and_url_credentials():
    redact = Redactor(["abc"])  # too short to mask safely
    redact.add("tok-123", "tok-123456")
    redact.add_headers({"Authorization": "Bearer ghp_secretvalue", "Accept": "application/json",
                        "PRIVATE-TOKEN": "glpat-xyz"})
    redact.add_url("https://u:hunter22@h/x?key=qsecret1&page=2")
    text = ("tok-123456 tok-123 ghp_secretvalue Bearer ghp_secretvalue glpat-xyz hunter22 qsecret1 abc "
            "application/json page 2")
    assert redact(text) == "*** *** *** *** *** *** *** abc application/json page 2"
    assert "ghp_secretvalue" in redact and "application/json" not in redact


class EchoingHost(FakeServer):
    """A careless host that repeats the credentials it was sent in its error messages."""

    def __init__(self, status: int):
        super().__init__()
        self.status = status

    def _answer(self, h):
        return self.status, {"Content-Type": "text/plain"}, (
            f"bad credentials: {h.headers.get('Authorization')} / {h.headers.get('PRIVATE-TOKEN')}").encode()


@pytest.mark.parametrize("status, error", [(401, HostAuthError), (400, HostError)])
def test_host_errors_do_not_repeat_the_credentials_sent(status, error):
    with EchoingHost(status) as host, HostHttp(headers={"Authorization": "token ghp_fromclient"}, retries=0,
                                               sleep=lambda s: None) as http:
        with pytest.raises(error) as info:
            http.get(host.base_url + "/api/v4/user?private_token=qtok-1234", headers={"PRIVATE-TOKEN": "glpat-perrequest"})
    message = str(info.value)
    assert message.startswith(f"{host.base_url}/api/v4/user ") and "bad credentials: " in message
    assert "ghp_fromclient" not in message and "glpat-perrequest" not in message and "qtok-1234" not in message
    assert message.count("***") == 2
