"""A file read through the front doors (``GET /api/source``, ``read_file``, the file page) shows
the language the index gives it: a ``.gitattributes`` ``linguist-language`` override at the commit
read, from the file's own directory and the ones above it (docs/indexing.md#linguist-overrides)."""

from __future__ import annotations

import os

import pytest

from codesearch.app.git_reads import FileAtRef, linguist_at
from codesearch.git.objects import resolve_commit
from codesearch.index.attributes import Linguist
from tests.corpus import git

FILES = {
    ".gitattributes": "*.inc linguist-language=PHP\nlib/** linguist-vendored\n",
    "web/.gitattributes": "*.inc linguist-language=Perl\n",
    "a.inc": "<?php ?>\n", "web/b.inc": "print 1;\n", "web/deep/c.inc": "print 2;\n", "lib/x.py": "x = 1\n",
    "sibling/.gitattributes": "*.py linguist-language=Ruby\n", "main.py": "print(1)\n",
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("attrs"))
    git(root, "init", "-q", "-b", "main")
    for name, text in FILES.items():
        os.makedirs(os.path.dirname(os.path.join(root, name)) or root, exist_ok=True)
        with open(os.path.join(root, name), "w") as f:
            f.write(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    first = resolve_commit(os.path.join(root, ".git"), "main")
    with open(os.path.join(root, ".gitattributes"), "w") as f:
        f.write("*.inc linguist-language=Go\n")
    git(root, "commit", "-q", "-am", "two")
    return os.path.join(root, ".git"), first, resolve_commit(os.path.join(root, ".git"), "main")


@pytest.mark.parametrize("path,at,want", [
    ("a.inc", "first", Linguist(language="PHP")),
    ("a.inc", "second", Linguist(language="Go")),  # the commit read decides, not the newest
    ("web/b.inc", "first", Linguist(language="Perl")),
    ("web/deep/c.inc", "first", Linguist(language="Perl")),
    ("lib/x.py", "first", Linguist(vendored=True)),
    ("main.py", "first", Linguist()),  # a sibling directory's file does not reach it
])
def test_overrides_at_a_commit(repo, path, at, want):
    git_dir, first, second = repo
    assert linguist_at(git_dir, first if at == "first" else second, path) == want


def test_the_language_shown_is_the_override():
    row = None  # the row plays no part in the language
    assert FileAtRef(row, "a.inc", "main", "0" * 40, b"<?php ?>", Linguist(language="Go")).language == "Go"
    assert FileAtRef(row, "a.py", "main", "0" * 40, b"x = 1\n").language == "Python"
