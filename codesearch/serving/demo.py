"""The embedded default: a config that works offline, over local git repositories it creates.

`codesearch serve` without a config creates ``<data dir>/demo/`` with a few git repositories
made from source code that is on every machine running codesearch (codesearch's own package
and some packages of Python's standard library), and serves them through a `git` connection
with a ``file://`` glob, exactly as a user's local-repository config would.
"""

from __future__ import annotations

import json
import os
import shutil
import sysconfig

import codesearch
from codesearch.git.process import Git

#: Standard-library packages copied into demo repositories (small, real, well known).
STDLIB_PACKAGES = ("json", "http", "urllib", "email", "asyncio")

#: who the demo commits are by (through git's config, so the user's own config plays no part)
_GIT_IDENTITY = (("user.name", "codesearch"), ("user.email", "demo@localhost"))


def _make_repo(target: str, source: str) -> None:
    if os.path.isdir(os.path.join(target, ".git")):
        return
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)
    git = Git(cwd=target, config=_GIT_IDENTITY, timeout_s=120)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "demo snapshot"]):
        git.run(args, check=True)


def demo_config(data_dir: str) -> str:
    """Create the demo repositories (once) and return the path of a config file serving them."""
    demo = os.path.join(data_dir, "demo")
    os.makedirs(demo, exist_ok=True)
    _make_repo(os.path.join(demo, "codesearch"), os.path.dirname(codesearch.__file__))
    stdlib = sysconfig.get_paths()["stdlib"]
    for pkg in STDLIB_PACKAGES:
        if os.path.isdir(os.path.join(stdlib, pkg)):
            _make_repo(os.path.join(demo, f"python-{pkg}"), os.path.join(stdlib, pkg))
    path = os.path.join(data_dir, "demo-config.json")
    config = {
        "$schema": "https://raw.githubusercontent.com/sourcebot-dev/sourcebot/main/schemas/v3/index.json",
        "connections": {"demo": {"type": "git", "url": f"file://{demo}/*"}},
    }
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
    return path
