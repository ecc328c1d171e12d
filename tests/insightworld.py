"""Small git repositories with a known history, for the insights tests (engine, store, API, pages).

Each repository is made with real git in a temporary folder, one commit per entry of its
history, at the entry's date (committer and author), on ``main``. `ALPHA` migrates from
``oldclient`` to ``newclient`` over 2024; `BETA` starts in March 2024 (points before that have no
commit). The contents cover what a count must get right: several matches on one line, a
match in a file name, a binary file holding the word (skipped, as the index skips it), a
symlink, one blob at two paths, a rename, a deletion, upper and lower case, non-ASCII text.
"""

from __future__ import annotations

import os
import subprocess

from tests.histworld import git

ALPHA_NAME = "example.com/acme/alpha"
BETA_NAME = "example.com/acme/beta"

_OLD_PY = """import oldclient
from oldclient import OldClient

def fetch(url):
    client = oldclient.OldClient(url)  # oldclient oldclient
    return client.get()

class Handler:
    def run(self):
        return oldclient.call()  # TODO: move to newclient
"""

_NEW_PY = """import newclient
from newclient import NewClient

def fetch(url):
    client = newclient.NewClient(url)
    return client.get()

class Handler:
    def run(self):
        return newclient.call()
"""

_README = "# Alpha\n\nUses OldClient (see oldclient docs). Café naïve.\nOLDCLIENT in capitals.\n"

#: (date, files written (None deletes, bytes for binary, ("link", target) for a symlink)).
ALPHA = [
    ("2023-11-20T10:00:00Z", {"README.md": _README, "src/fetch.py": _OLD_PY, "src/util.py": "VALUE = 1\n"}),
    ("2024-01-15T09:30:00Z", {"src/copy.py": _OLD_PY, "logo.bin": b"\x89PNG\0oldclient\0oldclient",
                              "guide/oldclient.md": "the oldclient guide\n", "link.py": ("link", "src/fetch.py")}),
    ("2024-02-10T12:00:00+02:00", {"src/fetch.py": _OLD_PY.replace("oldclient.call()", "newclient.call()")}),
    ("2024-02-28T23:59:59Z", {"src/copy.py": None, "src/moved.py": _OLD_PY}),
    ("2024-04-02T08:00:00Z", {"src/fetch.py": _NEW_PY, "guide/oldclient.md": None,
                              "guide/newclient.md": "newclient\n"}),
    ("2024-06-30T18:00:00Z", {"src/moved.py": _NEW_PY, "README.md": _README.replace("OldClient", "NewClient"),
                              "tests/test_fetch.py": "import newclient\n\ndef test_fetch():\n    assert newclient\n"}),
]

BETA = [
    ("2024-03-03T03:03:03Z", {"main.go": "package main\n\n// oldclient is gone\nfunc main() {}\n",
                              "lib/old.py": "import oldclient\n"}),
    ("2024-05-20T20:00:00Z", {"lib/old.py": "import newclient  # was oldclient\n", "lib/new.py": _NEW_PY}),
]


def make_repo(root: str, history: list[tuple[str, dict]]) -> list[tuple[str, str]]:
    """A repository at `root` with one commit per history entry; returns (date, sha) per commit."""
    os.makedirs(root)
    git(root, "init", "-q", "-b", "main")
    out = []
    for when, files in history:
        for path, data in files.items():
            full = os.path.join(root, path)
            if data is None:
                os.remove(full)
                continue
            os.makedirs(os.path.dirname(full), exist_ok=True)
            if isinstance(data, tuple):
                os.symlink(data[1], full)
                continue
            with open(full, "wb") as f:
                f.write(data if isinstance(data, bytes) else data.encode())
        git(root, "add", "-A", when=when)
        git(root, "commit", "-q", "-m", f"at {when}", when=when)
        out.append((when, git(root, "rev-parse", "HEAD").strip()))
    return out


def make_ticking_repo(root: str, days: int, start: str = "2024-01-01") -> list[str]:
    """A repository with one commit a day for `days` days (noon UTC), each adding the line
    ``tick <n>`` to ``ticks.txt``: at the end of day n (from 0) the file holds n + 1 ticks."""
    from datetime import date, timedelta

    os.makedirs(root)
    git(root, "init", "-q", "-b", "main")
    shas, lines = [], []
    first = date.fromisoformat(start)
    for n in range(days):
        lines.append(f"tick {n}\n")
        with open(os.path.join(root, "ticks.txt"), "w") as f:
            f.write("".join(lines))
        when = f"{first + timedelta(days=n)}T12:00:00Z"
        git(root, "add", "-A", when=when)
        git(root, "commit", "-q", "-m", f"day {n}", when=when)
        shas.append(git(root, "rev-parse", "HEAD").strip())
    return shas


def git_out(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


HOST = "github.com"
GRANTED = "bob-1"


def make_service_world(base: str) -> dict:
    """A data directory whose store knows `ALPHA` (connection ``open``: every signed-in user sees
    it) and `BETA` (connection ``private``, enforcing permissions: only Bob, whose linked account
    the host granted it, sees it), read in place; users Ann (owner), Bob and Carol (members)."""
    from codesearch import permissions
    from codesearch.store import OWNER, Store

    alpha, beta, data = os.path.join(base, "alpha"), os.path.join(base, "beta"), os.path.join(base, "data")
    history = {ALPHA_NAME: make_repo(alpha, ALPHA), BETA_NAME: make_repo(beta, BETA)}
    store = Store.open(data)
    store.upsert_connection("open", "git", {"type": "git", "url": "file://" + alpha})
    store.upsert_connection("private", "github", {"type": "github", "repos": ["acme/beta"]})
    ids = {}
    for conn, name, root, public in (("open", ALPHA_NAME, alpha, True), ("private", BETA_NAME, beta, False)):
        ids.update(store.upsert_repos(conn, [dict(name=name, display_name=name.split("/", 1)[1],
                                                  code_host_type="github", clone_url="file://" + root,
                                                  local_path=root, default_branch="main", public=public,
                                                  external_id=name)], prune=False).ids)
    ann = store.create_user("ann@example.com", "Ann", role=OWNER)
    bob = store.create_user("bob@example.com", "Bob")
    carol = store.create_user("carol@example.com", "Carol")
    store.link_account(bob.id, provider=HOST, provider_type="github", host=HOST, subject=GRANTED, login="bob")
    store.replace_repo_grants(ids[BETA_NAME], HOST, {GRANTED})
    permissions.write_settings(store, permissions.PermissionSettings(enabled=True, connections={
        "open": permissions.ConnectionRule(False, False, None),
        "private": permissions.ConnectionRule(True, False, HOST)}))
    return {"store": store, "data": data, "ids": ids, "history": history, "dirs": {ALPHA_NAME: alpha, BETA_NAME: beta},
            "ann": ann, "bob": bob, "carol": carol}


def identity(store, user):
    """`user` as the service would identify them (bound to the store's permission rule)."""
    from codesearch.permissions import PermissionPolicy

    return PermissionPolicy(lambda: store).identity(user)
