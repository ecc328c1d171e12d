#!/usr/bin/env python3
"""Build the benchmark corpus: real third-party source trees, pinned, one directory per project.

Usage: python bench/corpus.py [--list] [--only NAME ...] [--quick]

About 940 MB of code in C, C++, Python, Cython, Fortran, Go, Java, Rust, JavaScript and
TypeScript (the table is in bench/README.md), from the three registries this machine reaches:

* PyPI sdists, fetched with
  ``pip download --no-binary :all: --no-deps --no-build-isolation -d DIR NAME==VERSION``;
* npm tarballs, fetched with ``npm pack --ignore-scripts --pack-destination DIR NAME@VERSION``
  (a registry spec: no lifecycle script runs);
* Debian packages that carry a project's source (the Go tree of ``golang-1.19-src``, the JDK's
  ``src.zip`` of ``openjdk-17-source``), fetched with ``apt-get download NAME=VERSION`` (needs a
  prior ``apt-get update``); only the named directory, or the named zip inside the package, is kept.

Each archive is unpacked safely (regular files and directories only: no absolute paths, no
``..``, no links, no device files) into ``bench/.corpus/<name>-<version>/``.  One directory per
project = one "repository" for the engine benchmarks; bench/bench_scale.py cuts the same trees
into N git repositories.  Archives are kept in ``bench/.work/sdists/`` so a rerun downloads
nothing; a project whose directory is complete (marker in ``bench/.work/done/``) is skipped.

Why a stub build backend: ``pip download`` of an sdist always asks the project's PEP 517
backend for its metadata.  With ``--no-build-isolation`` that backend (mesonpy, setuptools,
scikit_build_core, maturin, ...) would have to be installed, and meson-python has no
``prepare_metadata_for_build_wheel`` hook, so pip would fall back to *compiling* scipy/numpy
just to read a version number.  We put a tiny stub on PYTHONPATH (``bench/.work/stub_backends``)
that answers the metadata hook from the sdist's own ``PKG-INFO``: nothing from the downloaded
package is executed, nothing is built, and pip still does the download from PyPI.

Stdlib only.
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / ".corpus"
WORK = HERE / ".work"
SDISTS = WORK / "sdists"
DONE = WORK / "done"
STUBS = WORK / "stub_backends"


@dataclass(frozen=True)
class Project:
    """One pinned project: where it comes from and which part of the archive is its source."""

    name: str
    version: str
    source: str = "pypi"  # "pypi" | "npm" | "debian"
    #: Debian only: the directory inside the package that holds the source (its prefix is
    #: stripped; a ``*`` component matches any one name; several directories separated by ``|``,
    #: the first that matches wins), or a ``.zip`` or a tarball
    #: (``.tar.xz``, ``.tar.gz``, ``.tar.bz2``) inside the package whose members are the source.
    inner: str = ""
    #: A tarball inside a Debian package only: the prefix stripped from its members; None drops
    #: its top-level directory whatever its name (as for sdists), "" keeps the paths as they are.
    inner_strip: str | None = None

    @property
    def dirname(self) -> str:
        return f"{self.name.lower().lstrip('@').replace('/', '-')}-{self.version}"


# Pinned so that every run builds the same corpus.  Languages in the comments; sizes in
# bench/README.md.
PROJECTS: list[Project] = [
    Project("scipy", "1.14.1"),          # C, C++ (boost.math, HiGHS), Fortran, Cython, Python
    Project("numpy", "2.1.3"),           # C, C++ (highway, SVML asm), Python
    Project("grpcio", "1.67.1"),         # C, C++ (core, abseil, boringssl, re2, upb), Python
    Project("Django", "5.1.3"),          # Python, JS, HTML, CSS, .po
    Project("sympy", "1.13.3"),          # Python
    Project("pandas", "2.2.3"),          # Python, Cython, C
    Project("duckdb", "1.1.3"),          # C++ (DuckDB and its third-party code), Python
    Project("grpcio-tools", "1.67.1"),   # C++ (protobuf, protoc), Python
    Project("polars", "1.12.0"),         # Rust, Python
    Project("ruff", "0.7.3"),            # Rust, Python (test fixtures)
    Project("scikit-learn", "1.5.2"),    # Python, Cython, C++
    Project("typescript", "5.6.3", "npm"),   # JavaScript, TypeScript declarations
    Project("three", "0.170.0", "npm"),      # JavaScript
    Project("golang-1.19-src", "1.19.8-2", "debian", inner="usr/share/go-1.19"),   # Go, assembly
    Project("openjdk-17-source", "17.0.21.1+2-1~deb12u1", "debian",
            inner="usr/lib/jvm/openjdk-17/lib/src.zip"),                        # Java, C/C++ (JNI)
]

#: ``--quick``: a small corpus for smoke runs of the benchmarks.
QUICK_PROJECTS = ["numpy"]

# Backend modules that pyproject.toml files name in build-backend.  pip uses
# "setuptools.build_meta:__legacy__" for projects without pyproject.toml.
STUB_MODULES = [
    "mesonpy",
    "setuptools.build_meta",
    "scikit_build_core.build",
    "hatchling.build",
    "flit_core.buildapi",
    "poetry.core.masonry.api",
    "maturin",
    "pdm.backend",
    "Cython.Build",
]

STUB_SOURCE = '''\
"""Stub PEP 517 backend for bench/corpus.py: metadata from PKG-INFO, nothing built."""
import os
import re


def _metadata():
    with open("PKG-INFO", encoding="utf-8", errors="replace") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    text = _metadata()
    name = re.search(r"^Name:\\s*(\\S+)", text, re.M).group(1)
    version = re.search(r"^Version:\\s*(\\S+)", text, re.M).group(1)
    norm = re.sub(r"[-_.]+", "_", name)
    dist_info = f"{norm}-{version}.dist-info"
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w",
              encoding="utf-8") as f:
        f.write(text)
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("bench/corpus.py stub backend builds nothing")


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError("bench/corpus.py stub backend builds nothing")


class _Legacy:
    get_requires_for_build_wheel = staticmethod(get_requires_for_build_wheel)
    get_requires_for_build_sdist = staticmethod(get_requires_for_build_sdist)
    prepare_metadata_for_build_wheel = staticmethod(prepare_metadata_for_build_wheel)
    build_wheel = staticmethod(build_wheel)
    build_sdist = staticmethod(build_sdist)


__legacy__ = _Legacy()
'''


def write_stubs() -> None:
    for mod in STUB_MODULES:
        parts = mod.split(".")
        d = STUBS
        for p in parts:
            d = d / p
            d.mkdir(parents=True, exist_ok=True)
            init = d / "__init__.py"
            if not init.exists():
                init.write_text("")
        (d / "__init__.py").write_text(STUB_SOURCE)



# ----------------------------------------------------------------------------- download


def _archive_stems(p: Project) -> list[str]:
    """How the archive's file name starts, by source (case- and separator-insensitive)."""
    norm = p.name.lower().lstrip("@").replace("/", "-").replace("-", "_")
    if p.source == "debian":
        return [f"{norm}_{p.version.replace(':', '%3a').replace('-', '_')}_"]
    return [f"{norm}_{p.version.replace('-', '_')}."]


ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip", ".deb")


def find_archive(p: Project, archives: Path = SDISTS) -> Path | None:
    stems = _archive_stems(p)
    for f in sorted(archives.iterdir()) if archives.exists() else []:
        stem = f.name.lower().replace("-", "_")
        if any(stem.startswith(s) for s in stems) and f.name.endswith(ARCHIVE_SUFFIXES):
            return f
    return None


def _pip_download(p: Project, archives: Path) -> None:
    write_stubs()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(STUBS) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
           "--no-build-isolation", "--disable-pip-version-check", "-d", str(archives),
           f"{p.name}=={p.version}"]
    print("  $", " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True, env=env)


def _npm_pack(p: Project, archives: Path) -> None:
    if shutil.which("npm") is None:
        raise SystemExit("npm not found: install Debian's npm (apt-get install npm) for the npm projects")
    cmd = ["npm", "pack", "--ignore-scripts", "--silent", "--pack-destination", str(archives), f"{p.name}@{p.version}"]
    print("  $", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def _apt_download(p: Project, archives: Path) -> None:
    cmd = ["apt-get", "download", f"{p.name}={p.version}"]
    print("  $", " ".join(cmd), f"(in {archives})", flush=True)
    r = subprocess.run(cmd, cwd=archives, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"apt-get download {p.name}={p.version} failed (run apt-get update first?):\n{r.stderr}")


def download(p: Project, archives: Path = SDISTS) -> Path:
    """The project's archive in `archives`, downloaded first when it is not there."""
    found = find_archive(p, archives)
    if found:
        return found
    archives.mkdir(parents=True, exist_ok=True)
    {"pypi": _pip_download, "npm": _npm_pack, "debian": _apt_download}[p.source](p, archives)
    found = find_archive(p, archives)
    if not found:
        raise SystemExit(f"downloading {p.name} {p.version} ({p.source}) left no archive in {archives}")
    return found


# ----------------------------------------------------------------------------- safe unpacking


def _safe_parts(member: str) -> list[str] | None:
    """The member's path components; None if it is absolute or climbs out with ``..``."""
    m = member.replace("\\", "/")
    if m.startswith("/") or (len(m) > 1 and m[1] == ":"):
        return None
    parts = [x for x in m.split("/") if x not in ("", ".")]
    if any(x == ".." for x in parts):
        return None
    return parts


#: What to strip from an archive's member names: None drops the top-level directory whatever its
#: name (sdists, npm tarballs); a list of prefixes (path components, ``*`` matching any one name)
#: drops the first that matches and leaves out members under none of them.
Strip = list[list[str]] | None


def _relative(member: str, strip: Strip) -> Path | None:
    """Where a member lands below the project directory, or None to leave it out."""
    parts = _safe_parts(member)
    if parts is None:
        return None
    if strip is None:
        rest = parts[1:]
    else:
        for prefix in strip:
            if len(parts) > len(prefix) and all(s in ("*", x) for s, x in zip(prefix, parts)):
                rest = parts[len(prefix):]
                break
        else:
            return None
    return Path(*rest) if rest else None


def _prefixes(spec: str) -> list[list[str]]:
    """``"usr/share/nodejs|usr/lib/nodejs"`` → ``[["usr", "share", "nodejs"], ["usr", "lib", "nodejs"]]``."""
    return [_safe_parts(d) or [] for d in spec.split("|")]


class _Unpacker:
    """Writes regular files below `root`; counts what it leaves out."""

    def __init__(self, root: Path):
        self.root = root
        self.skipped = 0

    def write(self, rel: Path | None, src) -> None:
        if rel is None:
            self.skipped += 1
            return
        out = self.root / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        with src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)

    def from_zip(self, zf: zipfile.ZipFile, strip: Strip) -> None:
        for info in zf.infolist():
            if info.is_dir():
                continue
            mode = (info.external_attr >> 16) & 0o170000
            if mode and mode != 0o100000:  # symlink or other non-regular
                self.skipped += 1
                continue
            rel = _relative(info.filename, strip)
            self.write(rel, zf.open(info) if rel is not None else None)

    def from_tar(self, tf: tarfile.TarFile, strip: Strip) -> None:
        for member in tf:
            if member.isdir():
                continue
            rel = _relative(member.name, strip) if member.isfile() else None
            self.write(rel, tf.extractfile(member) if rel is not None else None)


TARBALL_SUFFIXES = (".tar.xz", ".tar.gz", ".tgz", ".tar.bz2")


def _unpack_deb(deb: Path, inner: str, u: _Unpacker, inner_strip: str | None = None) -> None:
    """The package's data tar comes from ``dpkg-deb --fsys-tarfile`` (streamed); `inner` names a
    directory to keep (prefix stripped), one zip to unpack as it is, or one tarball to unpack
    with `inner_strip` stripped (streamed too: the Linux tarball unpacks to 1.4 GB)."""
    inner_parts = _safe_parts(inner) or []
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tf:
            if inner.endswith(TARBALL_SUFFIXES):
                strip = None if inner_strip is None else _prefixes(inner_strip)
                for member in tf:
                    if member.isfile() and _safe_parts(member.name) == inner_parts:
                        with tarfile.open(fileobj=tf.extractfile(member), mode="r|*") as inner_tf:
                            u.from_tar(inner_tf, strip=strip)
                        break
                else:
                    raise SystemExit(f"{deb.name} has no {inner}")
            elif inner.endswith(".zip"):
                for member in tf:
                    if member.isfile() and _safe_parts(member.name) == inner_parts:
                        with tempfile.TemporaryFile() as tmp:
                            shutil.copyfileobj(tf.extractfile(member), tmp)
                            tmp.seek(0)
                            with zipfile.ZipFile(tmp) as zf:
                                u.from_zip(zf, strip=[[]])
                        break
                else:
                    raise SystemExit(f"{deb.name} has no {inner}")
            else:
                u.from_tar(tf, strip=_prefixes(inner))
    finally:
        if proc.stdout:
            proc.stdout.close()
        if proc.wait() not in (0, -13):  # -13: SIGPIPE when we stop reading after the zip
            raise SystemExit(f"dpkg-deb --fsys-tarfile {deb.name} failed")


class EmptyArchive(Exception):
    """An archive with no regular file where the project's source should be."""


def unpack(archive: Path, dest: Path, project: Project | None = None, verbose: bool = True) -> int:
    """`archive` unpacked safely into `dest` (replaced whole, or left as it was on an error);
    returns the number of members left out."""
    tmp = dest.with_name(dest.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    u = _Unpacker(tmp)
    if archive.name.endswith(".deb"):
        _unpack_deb(archive, project.inner if project else "", u, project.inner_strip if project else None)
    elif archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            u.from_zip(zf, strip=None)
    else:
        with tarfile.open(archive) as tf:
            u.from_tar(tf, strip=None)
    if not any(tmp.iterdir()):
        tmp.rmdir()
        raise EmptyArchive(f"{archive.name}: nothing unpacked")
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    if u.skipped and verbose:
        print(f"  left out {u.skipped} links/special/unsafe/outside members", flush=True)
    return u.skipped


def tree_size(root: Path) -> tuple[int, int]:
    total = files = 0
    for dirpath, _dirnames, filenames in os.walk(root):
        for fn in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, fn))
            except OSError:
                continue
            total += st.st_size
            files += 1
    return total, files


def selected(only: list[str] | None, quick: bool) -> list[Project]:
    names = {n.lower() for n in (only or (QUICK_PROJECTS if quick else []))}
    return [p for p in PROJECTS if not names or p.name.lower() in names]


def ensure(projects: list[Project]) -> list[Path]:
    """Download and unpack what is missing; the project directories, in PROJECTS order."""
    CORPUS.mkdir(parents=True, exist_ok=True)
    DONE.mkdir(parents=True, exist_ok=True)
    out = []
    for p in projects:
        dest = CORPUS / p.dirname
        marker = DONE / p.dirname
        if not (marker.exists() and dest.is_dir()):
            print(f"[{p.name} {p.version} ({p.source})]", flush=True)
            archive = download(p)
            print(f"  unpacking {archive.name} -> {dest.relative_to(HERE.parent)}", flush=True)
            try:
                unpack(archive, dest, p)
            except EmptyArchive as e:
                raise SystemExit(str(e)) from None
            marker.write_text(archive.name + "\n")
        out.append(dest)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the pinned projects and exit")
    ap.add_argument("--only", nargs="*", help="only these project names")
    ap.add_argument("--quick", action="store_true", help=f"only the smoke-run corpus ({', '.join(QUICK_PROJECTS)})")
    args = ap.parse_args()
    if args.list:
        for p in PROJECTS:
            print(f"{p.source:<7} {p.name}=={p.version}")
        return 0
    projects = selected(args.only, args.quick)
    dirs = ensure(projects)
    grand = grand_files = 0
    for p, dest in zip(projects, dirs):
        size, files = tree_size(dest)
        grand += size
        grand_files += files
        print(f"  {p.dirname:<40} {p.source:<7} {size / 1e6:9.1f} MB {files:8d} files")
    print(f"corpus: {CORPUS}  total {grand / 1e6:.1f} MB ({grand / 2**20:.1f} MiB), {grand_files} files, {len(dirs)} projects")
    if not args.only and not args.quick and grand < 900e6:
        print("WARNING: corpus is below 900 MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
