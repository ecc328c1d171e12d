"""The MCP Inspector CLI (a third-party MCP client, tests/inspector.py) signing in with OAuth.

No API key: the Inspector meets the 401, discovers the metadata, registers itself, and starts its
interactive login. It runs with stderr on a pseudo-terminal (its interactive login needs a
human's terminal) and ``MCP_AUTO_OPEN_ENABLED=false``, so it prints the authorization URL
instead of opening a browser; the test is the human: a signed-in user opens that URL, allows
the client on the consent page, and follows the redirect to the Inspector's loopback callback.
The Inspector then exchanges the code and lists the tools. A second run, with
``--stored-auth-only``, uses the token it stored. Every process is bounded (killed at its deadline).
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import tempfile
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.inspector import INSPECTOR_JS, NODE
from tests.oauthworld import OWNER, Browser, oauth_app  # noqa: F401  (fixture)
from tests.ports import free_port as _free_port

DEADLINE_S = 90
#: its secrets (client secret, tokens) in files under the throwaway HOME, so the second run finds them
STORE = {"MCP_INSPECTOR_SECRET_STORE": "file"}
_URL = re.compile(r"https?://[^\s\x1b\x07]+")
_ANSI = re.compile(r"\x1b\][^\x07]*\x07|\x1b\[[0-9;]*[A-Za-z]")


def _argv(url: str, callback: str, *extra: str) -> list[str]:
    return [str(NODE), str(INSPECTOR_JS), "--cli", "--transport", "http", "--server-url", url,
            "--method", "tools/list", "--format", "json", "--callback-url", callback, *extra]


def _run_interactive(argv: list[str], home: str, on_url) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pty; call `on_url(url)` with the first authorization URL it
    prints. Returns (exit code, stdout, stderr)."""
    master, slave = pty.openpty()
    env = {**os.environ, "HOME": home, "NO_COLOR": "1", "MCP_AUTO_OPEN_ENABLED": "false", **STORE}
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env, cwd=home)
    os.close(slave)
    err, handled = "", False
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536).decode("utf-8", "replace")
                except OSError:  # the child closed the terminal
                    chunk = ""
                err += chunk
                if not chunk and proc.poll() is not None:
                    break
            elif proc.poll() is not None:
                break
            plain = _ANSI.sub("", err)
            rest = plain[plain.index("navigate to"):] if "navigate to" in plain else ""
            if not handled and "\n" in rest:  # the whole line has arrived
                m = _URL.search(rest.split("\n")[0])
                assert m, rest
                handled = True
                on_url(m.group(0).strip())
        else:
            raise AssertionError(f"the Inspector did not finish within {DEADLINE_S}s: {err[-2000:]}")
        out = proc.stdout.read().decode()
        return proc.wait(10), out, _ANSI.sub("", err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)


@pytest.mark.skipif(not (NODE.exists() and INSPECTOR_JS.exists()), reason="the MCP Inspector is not installed: make inspector")
def test_the_mcp_inspector_signs_in_with_oauth_and_lists_the_tools(oauth_app):
    base, store = oauth_app["url"], oauth_app["store"]
    url = base + "/api/mcp"
    callback = f"http://127.0.0.1:{_free_port()}/oauth/callback"
    browser = Browser(base)
    browser.sign_in(OWNER)
    seen: dict = {}

    def consent(authorization_url: str) -> None:
        seen["url"] = authorization_url
        got = browser.authorize(authorization_url[len(base):])  # the consent page, Allow
        seen["query"] = got
        # the browser follows the redirect to the Inspector's loopback listener
        r = httpx.get(callback, params={k: v[0] for k, v in got.items()}, timeout=30)
        seen["callback_status"] = r.status_code

    with tempfile.TemporaryDirectory(prefix="mcp-inspector-home-") as home:
        code, out, err = _run_interactive(_argv(url, callback), home, consent)
        assert code == 0, err[-3000:]
        asked = parse_qs(urlsplit(seen["url"]).query)
        assert asked["code_challenge_method"] == ["S256"] and asked["redirect_uri"] == [callback]
        assert seen["callback_status"] == 200 and "code" in seen["query"]
        tools = {t["name"] for t in json.loads(out)["result"]["tools"]}
        assert {"grep", "list_repos", "read_file"} <= tools
        assert "Authorization complete." in err

        # the token it stored is enough for the next run: no second consent
        proc = subprocess.run(_argv(url, callback, "--stored-auth-only"), capture_output=True, text=True,
                              timeout=DEADLINE_S, env={**os.environ, "HOME": home, "NO_COLOR": "1", **STORE},
                              stdin=subprocess.DEVNULL, cwd=home)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert {t["name"] for t in json.loads(proc.stdout)["result"]["tools"]} == tools

    client_id = asked["client_id"][0]
    client = store.get_oauth_client(client_id)
    assert client.redirect_uris == [callback] and client.auth_method in ("none", "client_secret_basic",
                                                                         "client_secret_post")
    issued = [t for t in store.list_oauth_tokens(OWNER["id"]) if t["client_id"] == client_id]
    assert {t["kind"] for t in issued} == {"access", "refresh"}
    browser.close()
