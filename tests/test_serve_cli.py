"""`codesearch serve` as a user runs it: a real process, its own Ray instance, the offline demo,
real HTTP on 127.0.0.1, keys from the CLI, and a clean stop on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args, env) -> str:
    out = subprocess.run([sys.executable, "-m", "codesearch.cli", *args], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_serve_demo_end_to_end(tmp_path):
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "DATA_DIR": str(tmp_path)}
    env.pop("FORCE_ENABLE_ANONYMOUS_ACCESS", None)
    env.pop("RAY_ADDRESS", None)
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "codesearch.cli", "serve", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                if httpx.get(f"{base}/api/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
            time.sleep(1)
        _cli("users", "create", "admin@example.com", env=env)
        key = _cli("keys", "create", "--user", "admin@example.com", env=env).strip()
        body = {"query": "sym:^urlsplit$", "matches": 10}
        assert httpx.post(f"{base}/api/search", json=body, timeout=30).status_code == 401
        r = httpx.post(f"{base}/api/search", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert r.status_code == 200, r.text
        files = {(f["repository"].rsplit("/", 1)[-1], f["fileName"]["text"]) for f in r.json()["files"]}
        assert ("python-urllib", "parse.py") in files
        repos = httpx.get(f"{base}/api/repos", headers={"X-Sourcebot-Api-Key": key}, timeout=30)
        assert repos.status_code == 200 and int(repos.headers["X-Total-Count"]) >= 2
        log_text = (tmp_path / "serve.log").read_text()
        assert "serving at" in log_text and "offline demo" in log_text
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        log.close()
    assert code == 0, (tmp_path / "serve.log").read_text()[-3000:]
    assert "shutting down" in (tmp_path / "serve.log").read_text()
