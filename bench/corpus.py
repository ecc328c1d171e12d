#!/usr/bin/env python3
"""Build the benchmark corpus: real source trees unpacked from PyPI sdists.

Usage: python bench/corpus.py [--list] [--only NAME ...]

Every project in PROJECTS is fetched with

    pip download --no-binary :all: --no-deps --no-build-isolation -d DIR NAME==VERSION

and unpacked (safely: regular files and directories only, no absolute paths,
no ``..``, no links) into ``bench/.corpus/<name>-<version>/``.  One directory
per project = one "repository" for the engine.  Archives are kept in
``bench/.work/sdists/`` so a rerun downloads nothing; a project whose
directory is complete (marker in ``bench/.work/done/``) is skipped.

Why a stub build backend: ``pip download`` of an sdist always asks the
project's PEP 517 backend for its metadata.  With ``--no-build-isolation``
that backend (mesonpy, setuptools, scikit_build_core, ...) would have to be
installed, and meson-python has no ``prepare_metadata_for_build_wheel`` hook,
so pip would fall back to *compiling* scipy/numpy just to read a version
number.  We put a tiny stub on PYTHONPATH (``bench/.work/stub_backends``) that
answers the metadata hook from the sdist's own ``PKG-INFO``: nothing from the
downloaded package is executed, nothing is built, and pip still does the
download from PyPI.

Stdlib only.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / ".corpus"
WORK = HERE / ".work"
SDISTS = WORK / "sdists"
DONE = WORK / "done"
STUBS = WORK / "stub_backends"

# Pinned so that every run builds the same corpus.  Unpacked sizes (MB) are
# approximate, measured when the list was chosen; languages in brackets.
PROJECTS: list[tuple[str, str]] = [
    ("scipy", "1.14.1"),          # C, C++ (boost.math, HiGHS), Fortran, Cython, Python
    ("numpy", "2.1.3"),           # C, C++ (highway, SVML asm), Python
    ("grpcio", "1.67.1"),         # C, C++ (core, abseil, boringssl, re2, upb), Python
    ("Django", "5.1.3"),          # Python, JS, HTML, CSS, .po
    ("sympy", "1.13.3"),          # Python
    ("pandas", "2.2.3"),          # Python, Cython, C
]

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


def find_archive(name: str, version: str) -> Path | None:
    norm = name.lower().replace("-", "_")
    for p in sorted(SDISTS.iterdir()) if SDISTS.exists() else []:
        stem = p.name.lower().replace("-", "_")
        if stem.startswith(f"{norm}_{version}.") and (
            p.name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip"))
        ):
            return p
    return None


def download(name: str, version: str) -> Path:
    found = find_archive(name, version)
    if found:
        return found
    SDISTS.mkdir(parents=True, exist_ok=True)
    write_stubs()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(STUBS) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
           "--no-build-isolation", "--disable-pip-version-check", "-d", str(SDISTS),
           f"{name}=={version}"]
    print("  $", " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True, env=env)
    found = find_archive(name, version)
    if not found:
        raise SystemExit(f"pip download of {name}=={version} produced no sdist in {SDISTS}")
    return found


def _safe_rel(member: str) -> Path | None:
    """Member path without its top-level directory; None if unsafe or empty."""
    m = member.replace("\\", "/")
    if m.startswith("/") or (len(m) > 1 and m[1] == ":"):
        return None
    parts = [p for p in m.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return None
    if len(parts) < 2:
        return None
    return Path(*parts[1:])


def unpack(archive: Path, dest: Path) -> None:
    tmp = dest.with_name(dest.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    skipped = 0
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                rel = _safe_rel(info.filename)
                if rel is None or info.is_dir():
                    continue
                mode = (info.external_attr >> 16) & 0o170000
                if mode and mode != 0o100000:  # symlink or other non-regular
                    skipped += 1
                    continue
                out = tmp / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    else:
        with tarfile.open(archive) as tf:
            for member in tf:
                rel = _safe_rel(member.name)
                if rel is None or not member.isfile():
                    if not member.isdir():
                        skipped += 1
                    continue
                out = tmp / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(member)
                with src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    if skipped:
        print(f"  skipped {skipped} links/special/unsafe members", flush=True)


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the pinned projects and exit")
    ap.add_argument("--only", nargs="*", help="only these project names")
    args = ap.parse_args()
    if args.list:
        for name, version in PROJECTS:
            print(f"{name}=={version}")
        return 0
    CORPUS.mkdir(parents=True, exist_ok=True)
    DONE.mkdir(parents=True, exist_ok=True)
    wanted = {n.lower() for n in args.only} if args.only else None
    grand = grand_files = 0
    rows = []
    for name, version in PROJECTS:
        if wanted is not None and name.lower() not in wanted:
            continue
        dirname = f"{name.lower()}-{version}"
        dest = CORPUS / dirname
        marker = DONE / dirname
        if not (marker.exists() and dest.is_dir()):
            print(f"[{name}=={version}]", flush=True)
            archive = download(name, version)
            print(f"  unpacking {archive.name} -> {dest.relative_to(HERE.parent)}", flush=True)
            unpack(archive, dest)
            marker.write_text(archive.name + "\n")
        size, files = tree_size(dest)
        rows.append((dirname, size, files))
        grand += size
        grand_files += files
    for dirname, size, files in rows:
        print(f"  {dirname:<24} {size / 1e6:9.1f} MB {files:8d} files")
    print(f"corpus: {CORPUS}  total {grand / 1e6:.1f} MB ({grand / 2**20:.1f} MiB), {grand_files} files, {len(rows)} projects")
    if wanted is None and grand < 300e6:
        print("WARNING: corpus is below 300 MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
