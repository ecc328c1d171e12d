"""The benchmark corpora's building blocks (bench/corpus.py, bench/gitrepos.py): archives are
unpacked safely (nothing lands outside the project's folder, no link or device is made), the
Debian layouts are cut where they should be, and git fast-import commits exactly the files of a
tree, whatever their names hold. No network: the archives are made here."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import corpus  # noqa: E402
import gitrepos  # noqa: E402


def _add(tf: tarfile.TarFile, name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tf.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def _tarball(path: Path, mode: str = "w:gz") -> Path:
    """An sdist-like tarball with one top folder, and every kind of member an unpacker must refuse."""
    with tarfile.open(path, mode) as tf:
        _add(tf, "proj-1.0/ok.txt", b"ok")
        _add(tf, "proj-1.0/sub/deep.c", b"int x;")
        _add(tf, "proj-1.0/../escaped.txt")  # climbs out of the top folder
        _add(tf, "proj-1.0/sub/../../../escaped2.txt")  # climbs out of the project
        _add(tf, "/abs.txt")  # absolute
        _add(tf, "proj-1.0/link", kind=tarfile.SYMTYPE, link="/etc/passwd")
        _add(tf, "proj-1.0/hard", kind=tarfile.LNKTYPE, link="proj-1.0/ok.txt")
        _add(tf, "proj-1.0/dev", kind=tarfile.CHRTYPE)
        _add(tf, "proj-1.0/fifo", kind=tarfile.FIFOTYPE)
    return path


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() or p.is_symlink()  # a link would show here, and fail the comparison
    }


def test_unpack_keeps_regular_files_inside_the_project_only(tmp_path):
    archive = _tarball(tmp_path / "proj-1.0.tar.gz")
    dest = tmp_path / "out" / "proj-1.0"
    skipped = corpus.unpack(archive, dest, verbose=False)
    assert _files(dest) == {"ok.txt": b"ok", "sub/deep.c": b"int x;"}
    assert skipped == 7
    assert sorted(p.name for p in tmp_path.rglob("*escaped*")) == []
    assert not (tmp_path / "out" / "proj-1.0.partial").exists()


def test_unpack_of_an_archive_with_nothing_usable_is_an_error(tmp_path):
    archive = tmp_path / "bad-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        _add(tf, "bad-1.0/link", kind=tarfile.SYMTYPE, link="x")
        _add(tf, "../evil")
    with pytest.raises(corpus.EmptyArchive, match="nothing unpacked"):
        corpus.unpack(archive, tmp_path / "bad-1.0", verbose=False)
    assert list(tmp_path.iterdir()) == [archive]


@pytest.mark.parametrize(
    "member, strip, expected",
    [
        ("proj-1.0/src/a.c", None, "src/a.c"),
        ("./proj-1.0/a.c", None, "a.c"),
        ("proj-1.0", None, None),  # the top folder itself
        ("proj-1.0/../a.c", None, None),
        ("/etc/passwd", None, None),
        ("C:/x/y", None, None),
        ("./usr/share/gocode/src/github.com/a/b/x.go", [["usr", "share", "gocode", "src"]], "github.com/a/b/x.go"),
        ("./usr/share/doc/pkg/copyright", [["usr", "share", "gocode", "src"]], None),  # outside the prefix
        ("./usr/share/cargo/registry/serde-1.0/src/lib.rs", [["usr", "share", "cargo", "registry", "*"]], "src/lib.rs"),
        ("./usr/share/cargo/registry/serde-1.0", [["usr", "share", "cargo", "registry", "*"]], None),
        ("./usr/lib/nodejs/x/index.js", [["usr", "share", "nodejs"], ["usr", "lib", "nodejs"]], "x/index.js"),
        ("./usr/share/nodejs/../../../etc/x", [["usr", "share", "nodejs"]], None),
        ("./a/b.txt", [[]], "a/b.txt"),  # "" strips nothing
    ],
)
def test_member_paths(member, strip, expected):
    got = corpus._relative(member, strip)
    assert (str(got) if got is not None else None) == expected


def _deb(tmp_path: Path, files: dict[str, bytes]) -> Path:
    """A .deb (dpkg-deb --build) whose data holds `files`."""
    root = tmp_path / "debroot"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: demo-source\nVersion: 1.0-1\nArchitecture: all\nMaintainer: t <t@example.com>\nDescription: demo\n"
    )
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    out = tmp_path / "demo-source_1.0-1_all.deb"
    subprocess.run(["dpkg-deb", "--build", "-Zgzip", str(root), str(out)], check=True, capture_output=True)
    return out


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb (Debian)")
@pytest.mark.parametrize(
    "inner, inner_strip, expected",
    [
        ("usr/src/proj.tar.xz", None, {"ok.txt": b"ok", "sub/deep.c": b"int x;"}),  # top folder dropped
        ("usr/src/proj.tar.xz", "", {"proj-1.0/ok.txt": b"ok", "proj-1.0/sub/deep.c": b"int x;"}),
        ("usr/src/proj.tar.xz", "proj-1.0/sub", {"deep.c": b"int x;"}),
        ("usr/share/gocode/src", None, {"example.com/m/m.go": b"package m"}),
        ("usr/share/cargo/registry/*", None, {"src/lib.rs": b"fn f() {}"}),
        ("usr/share/nodejs|usr/share/cargo/registry", None, {"serde-1.0/src/lib.rs": b"fn f() {}"}),
    ],
)
def test_debian_package_layouts(tmp_path, inner, inner_strip, expected):
    deb = _deb(
        tmp_path,
        {
            "usr/src/proj.tar.xz": _tarball(tmp_path / "proj.tar.xz", "w:xz").read_bytes(),
            "usr/share/gocode/src/example.com/m/m.go": b"package m",
            "usr/share/cargo/registry/serde-1.0/src/lib.rs": b"fn f() {}",
            "usr/share/doc/demo-source/copyright": b"c",
        },
    )
    dest = tmp_path / "out"
    corpus.unpack(deb, dest, corpus.Project("demo-source", "1.0-1", "debian", inner, inner_strip), verbose=False)
    assert _files(dest) == expected


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def test_fast_import_commits_exactly_the_tree(tmp_path):
    src = tmp_path / "src"
    names = {
        "plain.c": b"int main;\n",
        "dir/with space.txt": b"spaces\n",
        'dir/q"uote\\back': b"quote and backslash\n",
        "dir/new\nline": b"newline in the name\n",
        "dir/tab\tand\x01ctl": b"control characters\n",
        os.fsdecode(b"latin1-\xe9.txt"): b"not UTF-8\n",
        "utf8-\u00e9\u4e2d.txt": b"UTF-8\n",
        "empty": b"",
        "bin/blob": bytes(range(256)) * 40,
    }
    for rel, data in names.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    (src / ".git").mkdir()  # a nested repository's folder: git refuses such paths
    (src / ".git" / "config").write_bytes(b"[core]\n")
    os.symlink("plain.c", src / "link.c")
    files = gitrepos.tree_files(src)
    assert sorted(f.rel for f in files) == sorted(names)
    repo = tmp_path / "repo"
    assert gitrepos.fast_import(repo, src, files, "msg\n") == len(names)
    listed = [os.fsdecode(n) for n in _git(repo, "ls-tree", "-r", "-z", "--name-only", "main").split(b"\0") if n]
    assert sorted(listed) == sorted(names)
    for rel, data in names.items():
        blob = _git(repo, "rev-parse", f"main:{rel}").strip().decode()
        assert _git(repo, "cat-file", "blob", blob) == data, rel
    assert _git(repo, "symbolic-ref", "HEAD").strip() == b"refs/heads/main"
    assert _git(repo, "rev-parse", "--is-bare-repository").strip() == b"true"
    first = _git(repo, "rev-parse", "main")
    gitrepos.fast_import(repo, src, files, "msg\n")  # the same files give the same commit
    assert _git(repo, "rev-parse", "main") == first
