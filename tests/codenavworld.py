"""The code-navigation tests' world: `tests.mcpworld`'s two repositories plus a hostile one,
indexed by the real indexer, and the oracles the answers are checked against.

``git.local/hostile`` (local, indexed in place) has a path and ctags symbol names made of HTML
(a Markdown heading is a ctags symbol): pages must show them as text, never run them.

Oracles, computed from git and universal-ctags alone (never from the index):

* `ctags_definitions`: (repo, path, line) of every tag named `name` that ctags reports for the
  text files at the default branch, each file tagged on its own, in the languages the product
  tags (`codesearch.index.language.wants_symbols`: code and markup, not prose or data);
* `word_grep`: (repo, path, line, column) of every whole-word occurrence (`mcpworld.brute_grep`
  with the references' regex).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

from codesearch.index.language import detect, wants_symbols
from codesearch.runtime.workers import RepoIndexer, RuntimeOptions
from codesearch.store.models import INDEXED
from tests.mcpworld import DEMO, WIDGETS, _git, _write, build, git_files, git_show

HOSTILE = "git.local/hostile"
XSS = "<img src=x onerror=window.__xss=1>"
HOSTILE_FILES = {
    f"docs/{XSS}.md": f"# {XSS}\n\nsee {XSS} here\n",
    "README.md": f"# {XSS}\n\nA heading is not a definition (prose gets no symbols).\n",
    "src/evil.py": "def evil_fn():\n    return \"</script><script>window.__xss=2</script>\"\n\n\nevil_fn()\n",
    f"src/{XSS}.py": f"from evil import evil_fn\n\nevil_fn()  # \"{XSS}\"\n",
    # one name, two definitions
    "src/twice_a.py": "def twice():\n    return 1\n",
    "src/twice_b.py": "def twice():\n    return 2\n\n\nprint(twice())\n",
    # an HTML id is a ctags symbol: a definition whose name is markup
    "web/page.html": f'<html><body><a id="{XSS}">x</a></body></html>\n',
}


def build_world(base: str) -> dict:
    w = build(base)
    store = w["store"]
    root = os.path.join(base, "src", "hostile")
    os.makedirs(root)
    _git(root, "init", "-q", "-b", "main")
    _write(root, HOSTILE_FILES)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "hostile")
    store.upsert_connection("local2", "git", {"type": "git", "url": "file://" + root})
    ids = store.upsert_repos("local2", [dict(name=HOSTILE, display_name="hostile", code_host_type="genericGitHost",
                                              clone_url="file://" + root, local_path=root, default_branch="main")]).ids
    store.enqueue_index_job(ids[HOSTILE])
    indexer = RepoIndexer(w["data"], "codenav-indexer", RuntimeOptions(heartbeat_s=0.05))
    try:
        while indexer.run_once():
            pass
    finally:
        indexer.close()
    row = store.get_repo(ids[HOSTILE])
    assert row.index_status == INDEXED, row.last_error
    w["ids"].update(ids)
    w["git_dirs"][HOSTILE] = os.path.join(root, ".git")
    return w


def _text_files(git_dirs: dict[str, str], ref: str = "main"):
    for repo, git_dir in git_dirs.items():
        for path in git_files(git_dir, ref):
            data = git_show(git_dir, ref, path)
            if b"\0" not in data[:8000]:
                yield repo, path, data


def ctags_definitions(git_dirs: dict[str, str], name: str) -> set[tuple[str, str, int]]:
    out = set()
    with tempfile.TemporaryDirectory() as tmp:
        for repo, path, data in _text_files(git_dirs):
            if not wants_symbols(detect(path, data)):
                continue
            full = os.path.join(tmp, "f", path.rsplit("/", 1)[-1])
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
            res = subprocess.run(["ctags", "-x", "--_xformat=%N\t%n", "--extras=-{anonymous}", "-f", "-", full],
                                 capture_output=True, check=True)
            for line in res.stdout.decode("utf-8", "replace").splitlines():
                tag, _, n = line.rpartition("\t")
                if tag == name:
                    out.add((repo, path, int(n)))
            os.remove(full)
    return out


def word_grep(git_dirs: dict[str, str], name: str) -> set[tuple[str, str, int, int]]:
    left = r"\b" if re.match(r"\w", name) else ""
    right = r"\b" if re.search(r"\w$", name) else ""
    rx = re.compile(left + re.escape(name) + right)
    out = set()
    for repo, path, data in _text_files(git_dirs):
        for n, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
            for m in rx.finditer(line):
                out.add((repo, path, n, m.start() + 1))
    return out


__all__ = ["DEMO", "HOSTILE", "WIDGETS", "XSS", "build_world", "ctags_definitions", "word_grep"]
