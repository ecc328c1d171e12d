"""A repository with a known history for the history routes and pages, built with real git.

``main``: c1 (Alice, the first commit, tagged ``v1.0``) → c2 (Bob, +02:00: edits, a rename with
an edit, a binary change, a new file) → c3 (Alice: one more edit) → m (a ``--no-ff`` merge of
``feature``, whose f1 by Carol edits ``src/util.py`` and adds ``feature.txt``).
``big`` (from c1): b1 adds ``data/big.txt`` (`BIG_LINES` lines, more than blame covers) and
``data/huge.txt`` (more diff text than a diff may hold).
"""

from __future__ import annotations

import os
import subprocess

ALICE = ("Alice Smith", "alice@example.com")
BOB = ("Bob Jones", "bob@example.org")
CAROL = ("Carol", "carol@example.net")
APP_V1 = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(1, 9))
APP_V2 = APP_V1.replace("return 3", "return 30").replace("return 7", "return 70")
APP_V3 = APP_V2.replace("def f5():", "def f5(x=None):")
GUIDE = "# Guide\n\nStart the server.\nThen send requests.\nThat is all.\n"
BIG_LINES = 20_005
HUGE_BYTES = 2_200_000


def git(repo: str, *args: str, author=ALICE, when: str = "2024-01-10T10:00:00Z", stdin: bytes | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1], "GIT_COMMITTER_NAME": author[0],
           "GIT_COMMITTER_EMAIL": author[1], "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True, env=env,
                          input=stdin).stdout.decode("utf-8", "replace")


def write(repo: str, files: dict[str, str | bytes]) -> None:
    for path, data in files.items():
        full = os.path.join(repo, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())


def commit(repo: str, message: str, author=ALICE, when: str = "2024-01-10T10:00:00Z") -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-F", "-", author=author, when=when, stdin=message.encode())
    return git(repo, "rev-parse", "HEAD").strip()


def make_history_repo(root: str) -> dict[str, str]:
    """The repository described above; returns the shas by name (c1, c2, c3, f1, m, b1)."""
    os.makedirs(root)
    git(root, "init", "-q", "-b", "main")
    write(root, {"src/app.py": APP_V1, "README.md": "# Hist\n", "docs/guide.md": GUIDE,
                 "data/logo.png": b"\x89PNG\r\n\x1a\n\0\0binary", "sp ace/ünï.txt": "unicode\n", "empty.txt": ""})
    shas = {"c1": commit(root, "Initial import", ALICE, "2024-01-10T10:00:00Z")}
    git(root, "tag", "v1.0")
    write(root, {"src/app.py": APP_V2, "data/logo.png": b"\x89PNG\r\n\x1a\n\0\0binary v2",
                 "src/util.py": "def util():\n    return 'util'\n"})
    os.remove(os.path.join(root, "docs/guide.md"))
    write(root, {"docs/manual.md": GUIDE.replace("Then send", "Then, send")})
    shas["c2"] = commit(root, "Rework the app\n\nThe body says why.\nOn two lines.", BOB, "2024-02-15T12:30:00+02:00")
    git(root, "checkout", "-q", "-b", "feature")
    write(root, {"src/util.py": "def util():\n    return 'feature util'\n", "feature.txt": "feature\n"})
    shas["f1"] = commit(root, "Feature work", CAROL, "2024-03-01T08:00:00Z")
    git(root, "checkout", "-q", "main")
    write(root, {"src/app.py": APP_V3})
    shas["c3"] = commit(root, "Let f5 take an argument", ALICE, "2024-03-05T09:00:00Z")
    git(root, "merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature", when="2024-03-10T10:00:00Z")
    shas["m"] = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "-b", "big", shas["c1"])
    write(root, {"data/big.txt": "".join(f"line {i}\n" for i in range(1, BIG_LINES + 1)),
                 "data/huge.txt": "".join(f"{i:09d} {'x' * 60}\n" for i in range(HUGE_BYTES // 70))})
    shas["b1"] = commit(root, "Add big files", BOB, "2024-04-01T00:00:00Z")
    git(root, "checkout", "-q", "main")
    return shas
