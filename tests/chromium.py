"""The Chromium the browser tests drive (through Playwright for Python), from Debian.

Debian's `chromium-headless-shell` first: Chromium's headless build without the browser's UI layer,
the one Playwright itself runs for headless tests. It renders pages, runs their scripts and
takes screenshots as `chromium` does, for about half the CPU: a browser module of the suite
(tests/web/test_web_codenav.py) took 45.9 CPU-s with `chromium` and 23.9 with the headless shell,
and the whole suite is CPU-bound on 2 cores. Debian's full `chromium` stays usable where the shell
is missing.
"""

from __future__ import annotations

import shutil

#: The executables, best first.
CANDIDATES = ("chromium-headless-shell", "chromium", "chromium-browser")
#: Flags for a container without a sandbox or a GPU.
ARGS = ["--no-sandbox", "--disable-gpu"]


def executable() -> str:
    """The path of the first of `CANDIDATES` on PATH (an assertion that says how to get one)."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("chromium is missing: `make deps` installs chromium-headless-shell from Debian")


def launch_chromium(playwright):
    """A headless browser of `executable()` from a started Playwright (`sync_playwright()`'s)."""
    return playwright.chromium.launch(executable_path=executable(), headless=True, args=ARGS)
