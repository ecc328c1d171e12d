"""Language detection: `detect` answers what enry's whole `get_language` answers.

`detect` skips enry's content strategies when a file's head cannot change the answer
(codesearch/index/language.py). The oracle is enry itself, called the slow way on the same
bytes: on a table of files that exercise each strategy (shebangs, both kinds of modeline,
ambiguous extensions decided by content, names known as a whole, binary heads), and on every
file of real trees (the installed packages of this environment: Python, C, Rust, JavaScript,
data and docs).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path

import enry
import pytest

from codesearch.index.attributes import NONE, Linguist
from codesearch.index.language import CONTENT_SAMPLE, detect, name_candidates, rank_class

CASES = [
    # (path, content): each strategy of enry's, and the shortcut's edges
    ("a.py", b"import os\n"),
    ("src/main.rs", b"fn main() {}\n"),
    ("lib/x.h", b"#include <vector>\nclass A { public: int x; };\n"),
    ("lib/y.h", b"#import <Foundation/Foundation.h>\n@interface A : NSObject\n@end\n"),
    ("lib/z.h", b"int f(void);\n"),
    ("notes.txt", b"hello\n"),
    ("page.html", b"<!doctype html><p>hi</p>\n"),
    ("README.md", b"# Title\n"),
    ("x.ts", b"export const a: number = 1;\n"),
    ("x.ts", b'<?xml version="1.0"?>\n<TS version="2.1"></TS>\n'),
    ("x.m", b"function y = f(x)\n  y = x;\nend\n"),
    ("x.m", b"#import <Foundation/Foundation.h>\n@implementation A\n@end\n"),
    ("Makefile", b"all:\n\ttrue\n"),
    ("Dockerfile", b"FROM debian\n"),
    ("CMakeLists.txt", b"project(x)\n"),
    ("run", b"#!/usr/bin/env python3\nprint(1)\n"),
    ("run.txt", b"#!/bin/sh\necho\n"),
    ("run", b"  #!/bin/sh\necho\n"),
    ("run", b"\xef\xbb\xbf#!/bin/sh\necho\n"),
    ("script", b"echo hi\n"),
    ("a.py", b"# -*- mode: ruby -*-\nputs 1\n"),
    ("a.txt", b"/* -*- C++ -*- */\nint x;\n"),
    ("a.py", b"x = 1\n# vim: set ft=ruby:\n"),
    ("a.c", b"/* vim: set filetype=cpp : */\nint x;\n"),
    ("a.c", b"// vi: syntax=python\nint x;\n"),
    ("a.c", b"int left = 1; int shift =2;\n"),
    ("a.js", b"var a = 1;\0\0\0"),
    ("empty.py", b""),
    ("no_extension", b"plain words\n"),
    ("archive.tar.gz", b"x"),
    (".bashrc", b"alias ll='ls -l'\n"),
    ("x.PY", b"import os\n"),
    ("weird.unknown-ext", b"data\n"),
]


@pytest.mark.parametrize(("path", "content"), CASES)
def test_each_strategy_agrees_with_enry(path: str, content: bytes) -> None:
    assert detect(path, content) == (enry.get_language(path.rsplit("/", 1)[-1], content[:CONTENT_SAMPLE]) or "")


@pytest.mark.slow  # over 1 s of the fast lane: `make test` runs it (tests/conftest.py, SLOW_MODULES)
def test_every_installed_file_agrees_with_enry() -> None:
    root = Path(sys.prefix) / "lib"
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())[:20_000]
    assert len(files) > 5_000
    wrong = []
    for p in files:
        head = p.read_bytes()[:CONTENT_SAMPLE]
        want = enry.get_language(p.name, head) or ""
        if detect(str(p), head) != want:
            wrong.append((str(p), want, detect(str(p), head)))
    assert wrong == []


@pytest.mark.parametrize(
    ("name", "candidates"),
    [
        ("a.py", ("Python",)),  # by extension
        ("Makefile", ("Makefile",)),  # by file name
        ("CMakeLists.txt", ("CMake",)),  # the file name before the extension
        (".bashrc", ("Shell",)),
        ("a.h", ("C", "C++", "Objective-C")),  # several: the content decides
        ("a.txt", ("Adblock Filter List", "Text", "Vim Help File")),
        ("a.unknown-ext", ()),  # none: the content alone
    ],
)
def test_the_name_strategies_leave_enrys_candidates(name: str, candidates: tuple[str, ...]) -> None:
    assert name_candidates(name) == candidates


# The ranking rules as they were written over the whole path (one regex a rule): the oracle of
# `rank_class`, which splits each rule into a folder part and a name part.
_WHOLE_VENDOR = re.compile(
    r"(^|/)(node_modules|bower_components|vendor|vendors|third[_-]?party|external|extern|deps|Godeps|"
    r"\.yarn|\.cargo|site-packages|dist-packages|__pycache__)/|(^|/)\.[^/]+$|\.min\.(js|css)$|-min\.js$|\.(map|lock)$"
)
_WHOLE_TEST = re.compile(
    r"(^|/)(tests?|testing|testdata|spec|specs|__tests__|__mocks__|fixtures?)/|(^|/)test_[^/]*$|_tests?\.[^/.]+$|"
    r"\.(test|spec)\.[^/.]+$|(Test|Tests|Spec)\.[^/.]+$"
)
_WHOLE_DOCS = re.compile(
    r"(^|/)(docs?|documentation|examples?|samples?|demos?)/|(^|/)(README|CHANGELOG|CHANGES|HISTORY|NEWS|LICEN[CS]E|COPYING|"
    r"AUTHORS|CONTRIBUTING)[^/]*$|\.(md|markdown|rst|txt|adoc)$",
    re.IGNORECASE,
)


def _whole_path_rank(path: str, linguist: Linguist) -> int:
    if linguist.vendored or linguist.generated:
        return 2
    if linguist.vendored is None and _WHOLE_VENDOR.search(path):
        return 2
    if _WHOLE_TEST.search(path):
        return 1
    if linguist.documentation is not None:
        return 1 if linguist.documentation else 0
    return 1 if _WHOLE_DOCS.search(path) else 0


_TRICKY_PATHS = [
    "a.py", ".env", "src/.hidden", ".github/workflows/ci.yml", "x/.yarn/a.js", "vendor", "vendor/a.go",
    "a/vendors/b", "myvendor/a.go", "third-party/x.c", "thirdparty.c", "a.min.js", "a.min.css/b", "jquery-min.js",
    "a.js.map", "Cargo.lock", "lock/a", "test_a.py", "a/test_b/c.py", "tests/a.py", "a/testdata", "a_test.go",
    "a_tests.rs", "a_test.d/b", "a.test.ts", "a.spec.js", "FooTest.java", "FooTests.cs", "FooSpec.scala",
    "Test.java", "latest.py", "contest/a.c", "docs/a.c", "Docs/a.c", "doc", "README", "readme.rst", "a/ReadMe.md",
    "CHANGES.txt", "LICENSE-MIT", "licence", "notes.TXT", "examples/x", "samples", "demo/a", "Demos/b.c",
    "a/b/c/d/e.f", "a.b/c", "/abs/test/x", "a//b", "x/.min.js", "a.min.js/", "deps/tests/docs/a.md",
]


@functools.cache
def _tree_paths() -> list[str]:
    out: list[str] = []
    for root in (Path(__file__).resolve().parents[2] / "codesearch", Path(sys.prefix) / "lib"):
        for folder, _dirs, names in os.walk(root):
            out.extend(os.path.relpath(os.path.join(folder, n), root) for n in names)
            if len(out) > 12_000:
                return out
    return out


@pytest.mark.parametrize("linguist", [NONE, Linguist(vendored=False), Linguist(documentation=False),
                                      Linguist(documentation=True), Linguist(generated=True)])
def test_ranks_agree_with_the_whole_path_rules(linguist: Linguist) -> None:
    """`rank_class` (folder rules cached per folder, name rules per file) ranks every path as the
    rules written over the whole path do: a table of tricky paths, and the paths of this package
    and of the installed packages (site-packages, tests, docs, dot-files, minified files)."""
    paths = _TRICKY_PATHS + _tree_paths()
    wrong = [(p, rank_class(p, linguist), _whole_path_rank(p, linguist)) for p in paths
             if rank_class(p, linguist) != _whole_path_rank(p, linguist)]
    assert wrong == []
