"""A directory's files as the index reads them (`DirectorySource`): every regular file, in the order
of a top-down `os.walk` with sorted names, without links, devices or ``.git``. Checked against
that walk, written here the plain way, on a tree with each kind of entry, and on a real tree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from codesearch.index.sources import DirectorySource


def walked(root: str) -> list[tuple[str, int]]:
    """The reference: `os.walk`, sorted, regular files only (`lstat`), ``.git`` and linked folders left out."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git" and not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            if os.path.isfile(full) and not os.path.islink(full):
                out.append((os.path.relpath(full, root).replace(os.sep, "/"), os.lstat(full).st_size))
    return out


def listed(root: str) -> list[tuple[str, int]]:
    return [(f.path, f.size) for f in DirectorySource(root).files()]


def test_each_kind_of_entry(tmp_path: Path) -> None:
    files = {"b.py": "bb", "a.py": "a", "B.txt": "B", "z/y/x.c": "xyz", "z/a.h": "", "m/n.go": "n" * 50,
             ".git/config": "no", "sub/.git/HEAD": "no", "deep/" + "/".join("d" * 30) + "/leaf.rs": "leaf",
             "space name/é ü.md": "u"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "link.py").symlink_to(tmp_path / "a.py")
    (tmp_path / "linkdir").symlink_to(tmp_path / "z")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "fifo")
    got = listed(str(tmp_path))
    assert got == walked(str(tmp_path))
    names = [p for p, _ in got]
    assert "link.py" not in names and "fifo" not in names and not any(".git" in p or "linkdir" in p for p in names)
    assert names[:3] == ["B.txt", "a.py", "b.py"]  # a folder's files first, by name
    assert ("space name/é ü.md", 1) in got and ("m/n.go", 50) in got


@pytest.mark.slow  # over 1 s of the fast lane: `make test` runs it (tests/conftest.py, SLOW_MODULES)
def test_a_real_tree() -> None:
    """The test environment's library folder (~50,000 files). The suite's other processes write
    bytecode into its ``__pycache__`` folders while it is listed twice (a clean run once found one
    more ``.pyc`` in the second listing): those folders are left out of the comparison."""
    root = str(Path(sys.prefix) / "lib")

    def steady(entries: list[tuple[str, int]]) -> list[tuple[str, int]]:
        return [(path, size) for path, size in entries if "__pycache__" not in path.split("/")]

    got = steady(listed(root))
    assert len(got) > 5_000 and got == steady(walked(root))
