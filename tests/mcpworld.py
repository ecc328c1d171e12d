"""A small real world for the MCP and tool tests: two git repositories with history, indexed by
the real repo indexer (`RepoIndexer`: mirror, index, record the result in the store) into a
store, with their git data where the service looks for it.

- ``git.local/demo``: a local (non-bare) repository indexed in place: three commits by two
  authors on three dates, a lightweight tag ``v1.0`` on the first commit, a ``feature`` branch
  that is not indexed (and newer than ``main``), a binary file, a 1200-line file, a file with
  a 5000-character line and, under ``data/gen``, a dozen files of ``token_…`` lines that make
  ``grep token_`` about 50 KB (the answer budget's test).
- ``github.com/acme/widgets``: mirrored by the indexer over real smart HTTP on 127.0.0.1
  (`GitHttpServer`) into ``<data>/repos/<id>``, as synced repos are. Its listing claims a
  ``pushed_at`` (``HOST_PUSHED_AT``) later than its real newest commit: the index must win.

`brute_grep` is the oracle: Python's `re` over every text file at the default branch.
"""

from __future__ import annotations

import os
import re
import subprocess

from codesearch.git.mirror import MirrorStore
from codesearch.runtime.workers import RepoIndexer, RuntimeOptions
from codesearch.store import Store
from codesearch.store.models import INDEXED
from tests.githttp import GitHttpServer, make_bare_repo

DEMO = "git.local/demo"
WIDGETS = "github.com/acme/widgets"
HOST_PUSHED_AT = "2024-05-01T00:00:00Z"

APP_V1 = """import os

class Server:
    def handle_request(self, body):
        return body.upper()


def main():
    server = Server()
    return server.handle_request("hello")
"""
APP_V2 = APP_V1.replace("        return body.upper()", "        if not body:\n            return ''\n        return body.upper()")
DEMO_V1 = {
    "src/app.py": APP_V1,
    "src/util/strings.py": "def shout(text):\n    return text.upper() + '!'\n\n\ndef whisper(text):\n    return text.lower()\n",
    "src/util/__init__.py": "",
    "README.md": "# Demo\n\nCall handle_request to handle a request.\n",
    "docs/guide.md": "Guide: start the Server, then send requests.\n",
    "data/big.txt": "".join(f"line {i} of the big file\n" for i in range(1, 1201)),
    "data/wide.txt": "short line\n" + "x" * 5000 + "\nafter the wide line\n",
    # bulk for the answer budget: `grep token_` matches 50 shown lines in each of 12 files (about 50 KB)
    **{f"data/gen/part_{f:02d}.txt": "".join(f"token_{f:02d}_{i:03d} = alpha beta gamma delta epsilon zeta eta theta\n"
                                             for i in range(80)) for f in range(12)},
}
LOGO = b"\x89PNG\r\n\x1a\n\0\0\0binary handle_request\0"
WIDGET_FILES = {
    "README.md": "# Widgets\n",
    "src/widget.py": "from demo import shout\n\nclass Widget:\n    def handle_request(self):\n        return shout('widget')\n",
    "src/deep/nested/util.go": "package nested\n\nfunc Foo() int { return 1 }\n",
    "web/index.ts": "export function render(): string { return 'widget'; }\n",
}


def _git(repo: str, *args: str, author: tuple[str, str] = ("Alice", "alice@example.com"), date: str = "2024-01-10T10:00:00Z",
         stdin: bytes | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1], "GIT_COMMITTER_NAME": author[0],
           "GIT_COMMITTER_EMAIL": author[1], "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True, env=env, input=stdin).stdout.decode()


def _write(root: str, files: dict[str, str | bytes]) -> None:
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode())


def make_demo_repo(root: str) -> str:
    os.makedirs(root)
    _git(root, "init", "-q", "-b", "main")
    _write(root, {**DEMO_V1, "assets/logo.png": LOGO})
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "Initial import")
    _git(root, "tag", "v1.0")
    _write(root, {"src/app.py": APP_V2, "src/new.py": "from src.util.strings import shout\n\nVALUE = shout('new')\n"})
    os.remove(os.path.join(root, "docs/guide.md"))
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "Fix: handle empty input\n\nThe handler crashed on empty bodies.",
         author=("Bob", "bob@example.com"), date="2024-03-05T09:30:00Z")
    _git(root, "checkout", "-q", "-b", "feature")
    _write(root, {"src/feature.py": "def feature_only_marker():\n    return 'feature'\n"})
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "Feature work", date="2024-04-01T08:00:00Z")
    _git(root, "checkout", "-q", "main")
    return root


def publish_as_a_service(prefix: str, world: dict, searchers: int) -> None:
    """What a running service tells notebooks about its searchers `prefix` (`Client.ray`): its
    data directory and state database, and its permission rule's settings (here: off)."""
    from codesearch import permissions
    from codesearch.runtime import registry
    from codesearch.runtime.searchers import publish_deployment

    store = world["store"]
    permissions.write_settings(store, permissions.PermissionSettings(enabled=False))
    publish_deployment(prefix, data_dir=world["data"], searchers=searchers, instance=store.instance_id(),
                       database=store.database)
    registry.put_permissions_enabled(prefix, False)


def build(base: str) -> dict:
    """Create the repos, the store (an owner with an API key) and the index under `base`."""
    data = os.path.join(base, "data")
    store = Store.open(data)
    owner = store.create_user("owner@example.com", "Owner")
    _key_id, key = store.create_api_key(owner.id, "mcp tests")
    demo = make_demo_repo(os.path.join(base, "src", "demo"))
    upstream = os.path.join(base, "upstream")
    make_bare_repo(upstream, "acme/widgets.git", WIDGET_FILES)
    with GitHttpServer(upstream) as server:
        store.upsert_connection("local", "git", {"type": "git", "url": "file://" + demo})
        store.upsert_connection("acme", "github", {"type": "github", "orgs": ["acme"]})
        ids = store.upsert_repos("local", [dict(name=DEMO, display_name="demo", code_host_type="genericGitHost",
                                                clone_url="file://" + demo, local_path=demo, default_branch="main")]).ids
        ids.update(store.upsert_repos("acme", [dict(
            name=WIDGETS, display_name="acme/widgets", code_host_type="github",
            clone_url=server.url("acme/widgets.git"), web_url=f"https://{WIDGETS}",
            file_url_template=f"https://{WIDGETS}/blob/{{branch}}/{{path}}", default_branch="main",
            pushed_at=HOST_PUSHED_AT)]).ids)
        # one run per repository: each gets shards of its own, so two searchers each hold one
        # (one run would build both into one shard, `codesearch.runtime.index_batch`), and the
        # tests that merge the answers of several searchers have several to merge
        indexer = RepoIndexer(data, "mcpworld-indexer", RuntimeOptions(heartbeat_s=0.05))
        try:
            for name in (DEMO, WIDGETS):
                store.enqueue_index_job(ids[name])
                while indexer.run_once():
                    pass
        finally:
            indexer.close()
    for name in (DEMO, WIDGETS):
        row = store.get_repo(ids[name])
        assert row.index_status == INDEXED, f"{name}: {row.last_error}"
    mirror = MirrorStore(os.path.join(data, "repos")).path_for(ids[WIDGETS])
    return {"data": data, "index": os.path.join(data, "index"), "store": store, "key": key, "ids": ids, "demo": demo,
            "mirror": mirror, "git_dirs": {DEMO: os.path.join(demo, ".git"), WIDGETS: mirror}}


def git_show(git_dir: str, ref: str, path: str) -> bytes:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{ref}:{path}"], capture_output=True, check=True).stdout


def git_files(git_dir: str, ref: str = "main") -> list[str]:
    out = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "-z", "--name-only", ref],
                         capture_output=True, check=True).stdout.decode()
    return sorted(p for p in out.split("\0") if p)


def brute_grep(git_dirs: dict[str, str], pattern: str, ref: str = "main",
               path_filter=lambda p: True) -> set[tuple[str, str, int]]:
    """(repo, path, line) of every line matching `pattern` in the text files at `ref`."""
    rx = re.compile(pattern)
    out = set()
    for repo, git_dir in git_dirs.items():
        for path in git_files(git_dir, ref):
            if not path_filter(path):
                continue
            data = git_show(git_dir, ref, path)
            if b"\0" in data:
                continue
            for n, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
                if rx.search(line):
                    out.add((repo, path, n))
    return out


def parse_grep(text: str) -> set[tuple[str, str, int]]:
    """(repo, path, line) of a grep-style tool answer (docs/mcp-tools.md#grep)."""
    out, repo, path = set(), None, None
    for line in text.split("\n"):
        m = re.match(r"^\[(.+?)\] (.+):$", line)
        if m:
            repo, path = m.group(1), m.group(2)
            continue
        m = re.match(r"^  (\d+): ", line)
        if m and repo is not None:
            out.add((repo, path, int(m.group(1))))
    return out
