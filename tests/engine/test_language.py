"""Language detection: `detect` answers what enry's whole `get_language` answers.

`detect` skips enry's content strategies when a file's head cannot change the answer
(codesearch/index/language.py). The oracle is enry itself, called the slow way on the same
bytes: on a table of files that exercise each strategy (shebangs, both kinds of modeline,
ambiguous extensions decided by content, names known as a whole, binary heads), and on every
file of real trees (the installed packages of this environment: Python, C, Rust, JavaScript,
data and docs).
"""

from __future__ import annotations

import sys
from pathlib import Path

import enry
import pytest

from codesearch.index.language import CONTENT_SAMPLE, detect, language_of_name

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
    ("name", "language"),
    [("a.py", "Python"), ("Makefile", "Makefile"), ("a.h", ""), ("a.txt", ""), ("a.unknown-ext", "")],
)
def test_a_name_decides_only_when_it_names_one_language(name: str, language: str) -> None:
    assert language_of_name(name) == language
