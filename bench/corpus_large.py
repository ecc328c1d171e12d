#!/usr/bin/env python3
"""Build the large benchmark corpus (issue 25): 13.9 GB of real third-party code, pinned, as
6,457 git repositories, one of them a 2.6 GB monorepo.

Usage:
    nice -n 10 python bench/corpus_large.py              # everything into /work/corpus-large
    python bench/corpus_large.py --out DIR               # somewhere else
    python bench/corpus_large.py --list                  # the pinned projects (sizes once unpacked)
    python bench/corpus_large.py --no-repos              # download and unpack only
    python bench/corpus_large.py --repin                 # rewrite the Debian library pins from apt's lists

What it holds (the table with sizes is in bench/README.md):

* everything bench/corpus.py holds (its 15 projects, the same pins);
* the big source trees Debian 12 ships as packages: Linux 6.1, GCC 12, GCC 11, the Arm GCC
  toolchain, glibc, binutils, gdb, rustc 1.96 and 1.63, Free Pascal, Boost's headers, ...
  (`DEBIAN_TREES`; a tarball inside the package is unpacked, see corpus.Project.inner);
* Debian's Go, Rust, JavaScript and Ruby libraries, one repository each: every
  ``golang-*-dev`` (its ``usr/share/gocode/src``), ``librust-*-dev`` (its crate directory),
  ``node-*`` (``usr/share/nodejs``) and ``ruby-*`` (its gem directory) package, pinned in
  bench/corpus_large_debian.txt (`FAMILIES`);
* more PyPI sdists and npm packages (`PYPI`, `NPM`), fetched like corpus.py's.

Everything goes below ``--out`` (default /work/corpus-large, outside any work tree so that it
survives checkouts and merges):

    archives/          the downloaded .deb, sdists and npm tarballs (a rerun downloads nothing)
    src/<name>-<ver>/  each project unpacked safely (corpus.unpack: regular files only)
    repos/<name>       one bare git repository per project, one commit on main, made with
                       git fast-import from src/ (bench/gitrepos.py); the projects of
                       `MONOREPO_PROJECTS` are together in ONE repository, repos/`MONOREPO`,
                       each in a folder of its own
    state/             markers: what is unpacked (with its size), empty, made
    manifest.json      every repository: path, files, bytes, projects; the totals

``{"type": "git", "url": "file:///work/corpus-large/repos/*"}`` serves them all;
``codesearch index /work/corpus-large/repos/NAME`` indexes one.

Download, unpacking and repository making are skipped for what a marker says is done, so a
rerun after an interruption resumes. Unpacking and fast-import run `--jobs` at a time (2: the
machine has 2 cores) under ``nice`` (`--nice`, 10). Stdlib only, plus git, dpkg-deb, apt-get,
pip and npm, like corpus.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402  (the pinned small corpus, download and safe unpacking)
from corpus import Project  # noqa: E402
from gitrepos import corpus_files, fast_import, tree_files  # noqa: E402

DEFAULT_OUT = Path("/work/corpus-large")
PINS = HERE / "corpus_large_debian.txt"
#: The corpus must hold at least this much source (bytes after unpacking) and this many repositories.
MIN_BYTES = 10e9
MIN_REPOS = 5000
MIN_MONOREPO_BYTES = 2e9


def deb(name: str, version: str, inner: str, inner_strip: str | None = None) -> Project:
    return Project(name, version, "debian", inner=inner, inner_strip=inner_strip)


#: Debian packages that carry a whole project's source tree (versions: `apt-cache madison`).
DEBIAN_TREES: list[Project] = [
    deb("linux-source-6.1", "6.1.192-3", "usr/src/linux-source-6.1.tar.xz"),  # C, assembly, Rust, DTS
    deb("gcc-12-source", "12.2.0-14+deb12u1", "usr/src/gcc-12/gcc-12.2.0-dfsg.tar.xz"),  # C, C++, Ada, Fortran, Go, D
    deb("glibc-source", "2.36-9+deb12u14", "usr/src/glibc/glibc-2.36.tar.xz"),  # C, assembly
    deb("binutils-source", "2.40-2", "usr/src/binutils/binutils-2.40.tar.xz"),  # C, assembly tests
    deb("gdb-source", "13.1-3", "usr/src/gdb.tar.xz"),  # C++, C, Python, Tcl (testsuite)
    deb("gcc-11-source", "11.3.0-12", "usr/src/gcc-11/gcc-11.3.0-dfsg.tar.xz"),
    deb("gcc-arm-none-eabi-source", "15:12.2.rel1-1", "usr/src/gcc-arm-none-eabi-source.tar.xz", inner_strip=""),
    deb("rust-web-src", "1.96.0+dfsg1-1~deb12u2", "usr/src/rustc-1.96.0"),  # Rust (compiler, std, tools)
    deb("rust-src", "1.63.0+dfsg1-2", "usr/src/rustc-1.63.0"),  # Rust (std library)
    deb("fpc-source-3.2.2", "3.2.2+dfsg-20", "usr/share/fpcsrc/3.2.2"),  # Pascal
    deb("acl2-books-source", "8.5dfsg-5", "usr/share/acl2-8.5dfsg/books"),  # Lisp
    deb("libboost1.81-dev", "1.81.0-5+deb12u1", "usr/include"),  # C++ headers
    deb("bluez-source", "5.66-1+deb12u2", "usr/src/bluez.tar.bz2"),  # C
    deb("bazel-bootstrap-source", "4.2.3+ds-9", "usr/src/bazel-bootstrap"),  # Java, C++, Starlark
    deb("erlang-src", "1:25.2.3+dfsg-1+deb12u4", "usr/lib/erlang/lib"),  # Erlang
    deb("xorg-server-source", "2:21.1.7-3+deb12u13", "usr/src/xorg-server.tar.xz"),  # C
    deb("openvswitch-source", "3.1.0-2+deb12u1", "usr/src/openvswitch/openvswitch.tar.gz"),  # C, Python
    deb("libcgal-dev", "5.5.1-2", "usr/include"),  # C++ headers
    deb("sbcl-source", "2:2.2.9-1", "usr/share/sbcl-source"),  # Common Lisp
    deb("castle-game-engine-src", "7.0~alpha.2+dfsg1-5", "usr/src/castle-game-engine-7.0"),  # Pascal
    deb("vim-runtime", "2:9.0.1378-2+deb12u2", "usr/share/vim/vim90"),  # Vim script
    deb("juce-modules-source-data", "7.0.5+ds-1", "usr/share/juce/modules"),  # C++
]

#: The monorepo: these projects in one repository, a folder each (Linux and the GNU toolchain, 2.6 GB).
MONOREPO = "gnu-linux-toolchain"
MONOREPO_PROJECTS = ["linux-source-6.1", "gcc-12-source", "glibc-source", "binutils-source", "gdb-source"]


@dataclass(frozen=True)
class Family:
    """Debian library packages named `prefix`…: each one repository of the files below `inner`."""

    prefix: str
    inner: str  # corpus.Project.inner: directories separated by "|", "*" matching any one name
    language: str
    suffix: str = ""  # the package name ends so (golang-*-dev: the libraries, not the programs)


FAMILIES = [
    Family("golang-", "usr/share/gocode/src", "Go", suffix="-dev"),
    Family("librust-", "usr/share/cargo/registry/*", "Rust", suffix="-dev"),
    Family("node-", "usr/share/nodejs|usr/lib/nodejs", "JavaScript, TypeScript"),
    Family(
        "ruby-",
        "usr/share/rubygems-integration/all/gems/*|usr/lib/*/rubygems-integration/*/gems/*|usr/lib/ruby/vendor_ruby",
        "Ruby",
    ),
]

PYPI: list[Project] = [
    Project("opencv-python", "4.10.0.84"),  # C++ (OpenCV and its 3rdparty), Python
    Project("wxPython", "4.2.2"),  # C++ (wxWidgets), Python
    Project("ansible", "10.6.0"),  # Python, YAML (the collections)
    Project("llama_cpp_python", "0.3.1"),  # C++, CUDA, Metal (llama.cpp, ggml), Python
    Project("pybullet", "3.2.6"),  # C++ (Bullet), Python
    Project("botocore", "1.35.50"),  # Python, JSON service models
    Project("matplotlib", "3.9.2"),  # Python, C++
    Project("scikit-image", "0.24.0"),  # Python, Cython
    Project("statsmodels", "0.14.4"),  # Python, Cython
    Project("biopython", "1.84"),  # Python, C
    Project("astropy", "6.1.4"),  # Python, C (cfitsio, wcslib)
    Project("salt", "3007.1"),  # Python
    Project("transformers", "4.46.2"),  # Python
    Project("onnx", "1.17.0"),  # C++, Python, protobuf
    Project("jupyterlab", "4.3.0"),  # TypeScript/JavaScript bundles, Python
    Project("plotly", "5.24.1"),  # Python, JavaScript
    Project("bokeh", "3.6.1"),  # Python, JavaScript
    Project("pygame", "2.6.1"),  # C, Python
    Project("tables", "3.10.1"),  # C (c-blosc), Cython, Python
    Project("pysam", "0.22.1"),  # C (htslib, samtools, bcftools), Cython
    Project("gevent", "24.2.1"),  # C (libev, libuv, c-ares), Cython, Python
    Project("uvloop", "0.21.0"),  # C (libuv), Cython
    Project("igraph", "0.11.8"),  # C (igraph core), Python
    Project("numba", "0.60.0"),  # Python, C
    Project("llvmlite", "0.43.0"),  # Python, C++
    Project("Cython", "3.0.11"),  # Python, Cython, C
    Project("mypy", "1.13.0"),  # Python (and typeshed's stubs)
    Project("SQLAlchemy", "2.0.36"),  # Python, Cython
    Project("networkx", "3.4.2"),  # Python
    Project("Sphinx", "8.1.3"),  # Python
    Project("pygments", "2.18.0"),  # Python (lexers), test files in every language
    Project("lxml", "5.3.0"),  # Cython, C, Python
    Project("cryptography", "43.0.3"),  # Python, Rust
    Project("pydantic_core", "2.23.4"),  # Rust, Python
    Project("tokenizers", "0.20.3"),  # Rust, Python
    Project("twisted", "24.10.0"),  # Python
    Project("dask", "2024.10.0"),  # Python
    Project("xarray", "2024.10.0"),  # Python
    Project("black", "24.10.0"),  # Python
    Project("pylint", "3.3.1"),  # Python
    Project("tornado", "6.4.1"),  # Python
    Project("pyinstaller", "6.11.0"),  # Python, C (bootloader)
    Project("h5py", "3.12.1"),  # Python, Cython
    Project("nltk", "3.9.1"),  # Python
    Project("spacy", "3.8.2"),  # Python, Cython
    Project("gensim", "4.3.3"),  # Python, Cython
    Project("sentencepiece", "0.2.0"),  # C++ (and protobuf-lite, abseil), Python
    Project("jax", "0.4.35"),  # Python
    Project("protobuf", "5.28.3"),  # Python, C
    Project("kivy", "2.3.0"),  # Python, Cython, C
    Project("psycopg2", "2.9.10"),  # C, Python
    Project("pyzmq", "26.2.0"),  # Cython, C, Python
    Project("setuptools", "75.3.0"),  # Python
    Project("pip", "24.3.1"),  # Python (and its vendored packages)
]

# Not here: sdists whose build backend lives in the sdist itself (pillow's _custom_build): pip would
# run the downloaded code to read the metadata, which corpus.py's stub backend exists to avoid.

NPM: list[Project] = [
    Project("monaco-editor", "0.52.0", "npm"),
    Project("pdfjs-dist", "4.8.69", "npm"),
    Project("aws-sdk", "2.1692.0", "npm"),
    Project("googleapis", "144.0.0", "npm"),
    Project("@angular/core", "18.2.11", "npm"),
    Project("@angular/compiler", "18.2.11", "npm"),
    Project("next", "15.0.3", "npm"),
    Project("echarts", "5.5.1", "npm"),
    Project("plotly.js", "2.35.2", "npm"),
    Project("mathjax", "3.2.2", "npm"),
    Project("ace-builds", "1.36.2", "npm"),
    Project("cesium", "1.123.0", "npm"),
    Project("@babylonjs/core", "7.0.0", "npm"),
    Project("antd", "5.21.0", "npm"),
    Project("@tensorflow/tfjs", "4.22.0", "npm"),
    Project("firebase", "11.0.1", "npm"),
    Project("playwright-core", "1.48.2", "npm"),
    Project("mermaid", "11.4.0", "npm"),
    Project("ckeditor5", "43.0.0", "npm"),
    Project("highlight.js", "11.10.0", "npm"),
    Project("katex", "0.16.11", "npm"),
    Project("@mui/material", "6.1.6", "npm"),
    Project("vue", "3.5.12", "npm"),
    Project("svelte", "5.0.0", "npm"),
    Project("react-dom", "18.3.1", "npm"),
    Project("react", "18.3.1", "npm"),
    Project("rxjs", "7.8.1", "npm"),
    Project("lodash", "4.17.21", "npm"),
    Project("webpack", "5.96.1", "npm"),
    Project("eslint", "9.14.0", "npm"),
    Project("prettier", "3.3.3", "npm"),
    Project("@babel/core", "7.26.0", "npm"),
    Project("@babel/parser", "7.26.2", "npm"),
    Project("@babel/types", "7.26.0", "npm"),
    Project("@types/node", "22.9.0", "npm"),
    Project("d3", "7.9.0", "npm"),
    Project("jquery", "3.7.1", "npm"),
    Project("bootstrap", "5.3.3", "npm"),
    Project("@fortawesome/fontawesome-free", "6.6.0", "npm"),
    Project("moment", "2.30.1", "npm"),
    Project("chart.js", "4.4.6", "npm"),
    Project("leaflet", "1.9.4", "npm"),
    Project("ol", "10.2.1", "npm"),
    Project("pixi.js", "8.5.2", "npm"),
    Project("socket.io", "4.8.1", "npm"),
    Project("express", "4.21.1", "npm"),
    Project("vite", "5.4.10", "npm"),
    Project("rollup", "4.24.0", "npm"),
    Project("esbuild-wasm", "0.24.0", "npm"),
    Project("sql.js", "1.12.0", "npm"),
    Project("tinymce", "7.5.0", "npm"),
]


# ----------------------------------------------------------------------------- the projects


def family_of(name: str) -> Family | None:
    for f in FAMILIES:
        if name.startswith(f.prefix) and name.endswith(f.suffix) and "+" not in name:
            return f
    return None


def pinned_libraries(pins: Path = PINS) -> list[Project]:
    """The Debian library packages of bench/corpus_large_debian.txt ("NAME VERSION" lines)."""
    out = []
    for n, line in enumerate(pins.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        fam = family_of(fields[0]) if len(fields) == 2 else None
        if fam is None:
            raise SystemExit(
                f"{pins}:{n}: expected 'NAME VERSION' of a {', '.join(f.prefix + '*' for f in FAMILIES)} package"
            )
        out.append(deb(fields[0], fields[1], fam.inner))
    return out


def group_of(p: Project) -> str:
    """Which row of the summary a project counts in."""
    if p.name in MONOREPO_PROJECTS:
        return f"monorepo {MONOREPO}"
    if p in corpus.PROJECTS:
        return "bench/corpus.py's projects"
    fam = family_of(p.name) if p.source == "debian" else None
    if fam and p not in DEBIAN_TREES:
        return f"Debian {fam.prefix}*{fam.suffix} ({fam.language})"
    return {"debian": "Debian source trees", "pypi": "PyPI sdists", "npm": "npm packages"}[p.source]


def all_projects() -> list[Project]:
    projects = DEBIAN_TREES + corpus.PROJECTS + PYPI + NPM + pinned_libraries()
    seen: set[str] = set()
    for p in projects:
        if p.dirname in seen:
            raise SystemExit(f"{p.name} {p.version} is pinned twice")
        seen.add(p.dirname)
    missing = set(MONOREPO_PROJECTS) - {p.name for p in DEBIAN_TREES}
    if missing:
        raise SystemExit(f"MONOREPO_PROJECTS names projects that DEBIAN_TREES does not pin: {sorted(missing)}")
    return projects


# ----------------------------------------------------------------------------- layout and markers


class Layout:
    def __init__(self, out: Path):
        self.out = out
        self.archives = out / "archives"
        self.src = out / "src"
        self.repos = out / "repos"
        self.unpacked = out / "state" / "unpacked"
        self.empty = out / "state" / "empty"
        self.made = out / "state" / "repos"
        self.manifest = out / "manifest.json"

    def mkdirs(self) -> None:
        for d in (self.archives, self.src, self.repos, self.unpacked, self.empty, self.made):
            d.mkdir(parents=True, exist_ok=True)

    def size_of(self, p: Project) -> dict | None:
        """What the unpack marker of `p` recorded ({"archive", "bytes", "files"}), None if not unpacked."""
        marker = self.unpacked / p.dirname
        if marker.exists() and (self.src / p.dirname).is_dir():
            return json.loads(marker.read_text())
        return None


def say(msg: str) -> None:
    print(msg, flush=True)


# ----------------------------------------------------------------------------- download


def _deb_key(name: str, version: str) -> str:
    """How apt-get download names the file: NAME_VERSION_ARCH.deb, ':' as %3a."""
    return f"{name}_{version.replace(':', '%3a')}_"


def _debs_in(archives: Path) -> dict[str, Path]:
    """The .deb files in `archives` by their NAME_VERSION_ prefix (neither holds a "_")."""
    return {"_".join(f.name.split("_")[:2]) + "_": f for f in archives.iterdir() if f.name.endswith(".deb")}


def download_all(projects: list[Project], lay: Layout) -> tuple[dict[str, Path], list[str]]:
    """Every project's archive (downloading the missing ones), by dirname; and the projects that
    could not be fetched. Debian packages in batches of one apt-get call (a failed batch is
    retried one package at a time, to name the package at fault)."""
    todo = [p for p in projects if lay.size_of(p) is None and not (lay.empty / p.dirname).exists()]
    have = _debs_in(lay.archives)
    found: dict[str, Path] = {}
    debs: list[Project] = []
    for p in todo:
        if p.source == "debian":
            hit = have.get(_deb_key(p.name, p.version))
            if hit:
                found[p.dirname] = hit
            else:
                debs.append(p)
    failed: list[str] = []
    t0 = time.monotonic()
    for i in range(0, len(debs), 200):
        batch = debs[i : i + 200]
        specs = [f"{p.name}={p.version}" for p in batch]
        r = subprocess.run(["apt-get", "download", *specs], cwd=lay.archives, capture_output=True, text=True)
        if r.returncode != 0:
            for p, spec in zip(batch, specs, strict=True):
                one = subprocess.run(["apt-get", "download", spec], cwd=lay.archives, capture_output=True, text=True)
                if one.returncode != 0:
                    failed.append(p.dirname)
                    say(f"  apt-get download {spec} failed: {one.stderr.strip().splitlines()[-1:]}")
        say(f"  apt-get download: {min(i + 200, len(debs))}/{len(debs)} packages, {time.monotonic() - t0:.0f} s")
    if debs:
        have = _debs_in(lay.archives)
        for p in debs:
            hit = have.get(_deb_key(p.name, p.version))
            if hit:
                found[p.dirname] = hit
            elif p.dirname not in failed:
                failed.append(p.dirname)
    for p in todo:
        if p.source != "debian":
            try:
                found[p.dirname] = corpus.download(p, lay.archives)
            except (SystemExit, subprocess.CalledProcessError) as e:
                say(f"  {p.source} {p.name} {p.version}: download failed: {e}")
                failed.append(p.dirname)
    return found, failed


# ----------------------------------------------------------------------------- unpacking


def _unpack_one(archive: Path, p: Project, lay: Layout) -> tuple[str, str, int, int]:
    """In a worker process: unpack, measure, write the marker. (dirname, "ok"|"empty", bytes, files)."""
    dest = lay.src / p.dirname
    try:
        corpus.unpack(archive, dest, p, verbose=False)
    except corpus.EmptyArchive:
        (lay.empty / p.dirname).write_text(archive.name + "\n")
        return p.dirname, "empty", 0, 0
    size, files = corpus.tree_size(dest)
    (lay.unpacked / p.dirname).write_text(json.dumps({"archive": archive.name, "bytes": size, "files": files}) + "\n")
    return p.dirname, "ok", size, files


def unpack_all(projects: list[Project], archives: dict[str, Path], lay: Layout, jobs: int) -> list[str]:
    """Unpack what is not yet, biggest archives first; returns the dirnames that came out empty."""
    todo = [p for p in projects if p.dirname in archives and lay.size_of(p) is None]
    todo.sort(key=lambda p: -archives[p.dirname].stat().st_size)
    empty, t0, done_bytes = [], time.monotonic(), 0
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_unpack_one, archives[p.dirname], p, lay) for p in todo]
        for k, fut in enumerate(as_completed(futures), 1):
            dirname, status, size, _files = fut.result()
            done_bytes += size
            if status == "empty":
                empty.append(dirname)
            if size > 200e6 or k % 500 == 0 or k == len(todo):
                say(
                    f"  unpacked {k}/{len(todo)} ({dirname}: {size / 1e6:.0f} MB), {done_bytes / 1e9:.2f} GB "
                    f"in {time.monotonic() - t0:.0f} s"
                )
    return empty


# ----------------------------------------------------------------------------- repositories


@dataclass
class RepoSpec:
    name: str
    projects: list[Project]

    def files(self, lay: Layout) -> tuple[Path, list]:
        """(base directory, files below it): a project's own tree, or the monorepo's folders."""
        if self.name == MONOREPO:
            return lay.src, corpus_files([lay.src / p.dirname for p in self.projects])
        return lay.src / self.projects[0].dirname, tree_files(lay.src / self.projects[0].dirname)


def repo_name(p: Project) -> str:
    """The repository's folder: the project's, with a Debian epoch's ":" as "_" (names and URLs
    of repositories stay plain)."""
    return p.dirname.replace(":", "_")


def repo_specs(projects: list[Project], lay: Layout) -> list[RepoSpec]:
    """One repository per unpacked project, and the monorepo for MONOREPO_PROJECTS."""
    present = [p for p in projects if lay.size_of(p) is not None]
    mono = [p for p in present if p.name in MONOREPO_PROJECTS]
    specs = [RepoSpec(repo_name(p), [p]) for p in present if p.name not in MONOREPO_PROJECTS]
    if mono:
        specs.append(RepoSpec(MONOREPO, mono))
    return specs


def _make_repo(spec: RepoSpec, lay: Layout) -> dict:
    base, files = spec.files(lay)
    path = lay.repos / spec.name
    names = ", ".join(f"{p.name} {p.version}" for p in spec.projects)
    fast_import(path, base, files, f"{names}: the source of the benchmark corpus (bench/corpus_large.py)\n")
    info = {
        "name": spec.name,
        "path": str(path),
        "files": len(files),
        "bytes": sum(f.size for f in files),
        "projects": [p.dirname for p in spec.projects],
    }
    (lay.made / spec.name).write_text(json.dumps(info) + "\n")
    return info


def make_repos(specs: list[RepoSpec], lay: Layout, jobs: int) -> list[dict]:
    """Make the repositories that have no marker, biggest first; every repository's info."""
    infos, todo = {}, []
    for s in specs:
        marker = lay.made / s.name
        if marker.exists() and (lay.repos / s.name).is_dir():
            infos[s.name] = json.loads(marker.read_text())
        else:
            todo.append(s)
    todo.sort(key=lambda s: -sum((lay.size_of(p) or {"bytes": 0})["bytes"] for p in s.projects))
    t0, done_bytes = time.monotonic(), 0
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # each thread feeds one git fast-import process
        futures = {pool.submit(_make_repo, s, lay): s for s in todo}
        for k, fut in enumerate(as_completed(futures), 1):
            info = fut.result()
            infos[info["name"]] = info
            done_bytes += info["bytes"]
            if info["bytes"] > 200e6 or k % 500 == 0 or k == len(todo):
                say(
                    f"  repositories {k}/{len(todo)} ({info['name']}: {info['bytes'] / 1e6:.0f} MB), "
                    f"{done_bytes / 1e9:.2f} GB in {time.monotonic() - t0:.0f} s"
                )
    return [infos[s.name] for s in specs]


# ----------------------------------------------------------------------------- pins


def repin(lay: Layout) -> int:
    """Rewrite PINS from apt's package lists (run apt-get update first): the newest version of
    every package of FAMILIES, less those an earlier run into `lay` found empty."""
    avail = subprocess.run(["apt-cache", "dumpavail"], check=True, capture_output=True, text=True).stdout
    versions: dict[str, list[str]] = {}
    for record in avail.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in record.splitlines() if ": " in line and not line[0].isspace())
        name = fields.get("Package", "")
        if family_of(name) and "Version" in fields:
            versions.setdefault(name, []).append(fields["Version"])
    empty_names = {d.name for d in lay.empty.iterdir()} if lay.empty.is_dir() else set()
    lines = [
        "# Debian 12 library packages of bench/corpus_large.py (FAMILIES), NAME VERSION, written by --repin",
        "# from apt's lists; packages whose library directory holds no file are left out.",
    ]
    kept = 0
    for name in sorted(versions):
        newest = versions[name][0]
        for v in versions[name][1:]:
            if subprocess.run(["dpkg", "--compare-versions", v, "gt", newest]).returncode == 0:
                newest = v
        if deb(name, newest, "").dirname in empty_names:
            continue
        lines.append(f"{name} {newest}")
        kept += 1
    PINS.write_text("\n".join(lines) + "\n")
    say(f"{PINS}: {kept} packages ({len(versions) - kept} left out as empty)")
    return 0


# ----------------------------------------------------------------------------- reports


def print_table(projects: list[Project], lay: Layout, every: bool) -> tuple[int, int]:
    """Per project (when `every`) and per group: MB and files of what is unpacked."""
    groups: dict[str, list[int]] = {}
    if every:
        say(f"{'source':<7} {'project':<58} {'version':<34} {'MB':>9} {'files':>8}  group")
    for p in projects:
        size = lay.size_of(p)
        g = groups.setdefault(group_of(p), [0, 0, 0, 0])  # projects, unpacked, bytes, files
        g[0] += 1
        if size:
            g[1] += 1
            g[2] += size["bytes"]
            g[3] += size["files"]
        if every:
            mb = f"{size['bytes'] / 1e6:9.1f}" if size else "        -"
            files = f"{size['files']:8d}" if size else "       -"
            say(f"{p.source:<7} {p.name:<58} {p.version:<34} {mb} {files}  {group_of(p)}")
    say(f"\n{'group':<52} {'projects':>9} {'unpacked':>9} {'MB':>10} {'files':>9}")
    for name, (n, u, b, f) in groups.items():
        say(f"{name:<52} {n:9d} {u:9d} {b / 1e6:10.1f} {f:9d}")
    total_b = sum(g[2] for g in groups.values())
    total_f = sum(g[3] for g in groups.values())
    say(f"{'total':<52} {len(projects):9d} {sum(g[1] for g in groups.values()):9d} {total_b / 1e6:10.1f} {total_f:9d}")
    return total_b, total_f


def _seconds(lay: Layout, now: dict[str, float]) -> dict[str, int]:
    """Seconds spent on each step, added up over the runs that built this corpus (a resumed or
    repeated run adds what it spent)."""
    before = json.loads(lay.manifest.read_text()).get("seconds", {}) if lay.manifest.exists() else {}
    return {k: round(before.get(k, 0) + v) for k, v in now.items()}


def du(path: Path) -> int:
    return corpus.tree_size(path)[0] if path.exists() else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where everything goes (default {DEFAULT_OUT})")
    ap.add_argument("--list", action="store_true", help="print the pinned projects (sizes once unpacked) and exit")
    ap.add_argument("--repin", action="store_true", help=f"rewrite {PINS.name} from apt's lists and exit")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these projects (a trial run)")
    ap.add_argument("--no-repos", action="store_true", help="download and unpack only")
    ap.add_argument("--jobs", type=int, default=2, help="unpacking and fast-import processes at a time (default 2)")
    ap.add_argument("--nice", type=int, default=10, help="niceness added to this process and its children (10)")
    args = ap.parse_args()
    lay = Layout(args.out.resolve())
    if args.repin:
        return repin(lay)
    projects = all_projects()
    if args.only:
        names = {n.lower() for n in args.only}
        projects = [p for p in projects if p.name.lower() in names]
    if args.list:
        print_table(projects, lay, every=True)
        return 0
    if args.nice:
        os.nice(args.nice)
    lay.mkdirs()
    for tool in ("git", "dpkg-deb", "apt-get"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found: bench/corpus_large.py needs git, dpkg-deb, apt-get (and npm)")
    say(f"[corpus-large] {len(projects)} pinned projects into {lay.out}")
    t0 = time.monotonic()
    archives, failed = download_all(projects, lay)
    t_download = time.monotonic() - t0
    say(
        f"[download] {len(archives)} archives to unpack, {len(failed)} failed, {t_download:.0f} s, "
        f"archives {du(lay.archives) / 1e9:.2f} GB"
    )
    t1 = time.monotonic()
    empty = unpack_all(projects, archives, lay, args.jobs)
    t_unpack = time.monotonic() - t1
    say(f"[unpack] {t_unpack:.0f} s, {len(empty)} empty")
    infos: list[dict] = []
    t_repos = 0.0
    if not args.no_repos:
        t2 = time.monotonic()
        infos = make_repos(repo_specs(projects, lay), lay, args.jobs)
        t_repos = time.monotonic() - t2
        say(f"[repos] {len(infos)} repositories, {t_repos:.0f} s")
    total_b, total_f = print_table(projects, lay, every=False)
    all_empty = sorted(p.dirname for p in projects if (lay.empty / p.dirname).exists())
    mono = next((i for i in infos if i["name"] == MONOREPO), None)
    manifest = {
        "out": str(lay.out),
        "repos_dir": str(lay.repos),
        "connection": {"type": "git", "url": f"file://{lay.repos}/*"},
        "bytes": total_b,
        "files": total_f,
        "repositories": len(infos),
        "monorepo": mono,
        "failed": sorted(failed),
        "empty": all_empty,
        "seconds": _seconds(lay, {"download": t_download, "unpack": t_unpack, "repos": t_repos}),
        "repos": infos,
    }
    if infos:
        lay.manifest.write_text(json.dumps(manifest, indent=1) + "\n")
    repo_disk = du(lay.repos)
    say(f"\ncorpus: {lay.src}  {total_b / 1e9:.2f} GB ({total_b / 2**30:.2f} GiB), {total_f} files")
    say(f"archives: {lay.archives}  {du(lay.archives) / 1e9:.2f} GB")
    if infos:
        say(f"repositories: {lay.repos}  {len(infos)} bare repositories, {repo_disk / 1e9:.2f} GB (their packs)")
    if mono:
        say(
            f"monorepo: {mono['path']}  {mono['bytes'] / 1e9:.2f} GB, {mono['files']} files "
            f"({', '.join(mono['projects'])})"
        )
    say(f"times: download {t_download:.0f} s, unpack {t_unpack:.0f} s, repositories {t_repos:.0f} s")
    if failed:
        say(f"WARNING: {len(failed)} pinned projects could not be downloaded: {', '.join(sorted(failed)[:20])}")
    problems = []
    if total_b < MIN_BYTES:
        problems.append(f"the corpus is {total_b / 1e9:.2f} GB, below {MIN_BYTES / 1e9:.0f} GB")
    if infos and len(infos) < MIN_REPOS:
        problems.append(f"{len(infos)} repositories, below {MIN_REPOS}")
    if infos and (mono is None or mono["bytes"] < MIN_MONOREPO_BYTES):
        problems.append(f"the monorepo is below {MIN_MONOREPO_BYTES / 1e9:.0f} GB")
    for p in problems:
        print(f"WARNING: {p}", file=sys.stderr)
    return 1 if problems or failed else 0


if __name__ == "__main__":
    sys.exit(main())
