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
import subprocess
import sysconfig

import codesearch

#: Standard-library packages copied into demo repositories (small, real, well known).
STDLIB_PACKAGES = ("json", "http", "urllib", "email", "asyncio")

_GIT_ENV = {"GIT_AUTHOR_NAME": "codesearch", "GIT_AUTHOR_EMAIL": "demo@localhost",
            "GIT_COMMITTER_NAME": "codesearch", "GIT_COMMITTER_EMAIL": "demo@localhost"}


def _make_repo(target: str, source: str) -> None:
    if os.path.isdir(os.path.join(target, ".git")):
        return
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)
    env = {**os.environ, **_GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "demo snapshot"]):
        subprocess.run(["git", *args], cwd=target, env=env, check=True, capture_output=True)


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
