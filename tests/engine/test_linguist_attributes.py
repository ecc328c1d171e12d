"""`.gitattributes` linguist overrides: which rule applies to which file (git's rules), what each
override does (language shown and `lang:`; ranking of vendored, generated and documentation
files), read from the indexed commit and bounded.

What they do here (docs/indexing.md#linguist-overrides): `linguist-language` replaces the
detected language, so the file shows that language and `lang:` finds it under it;
`linguist-vendored` and `linguist-generated` files stay searchable and rank with vendored code
(after ordinary source, tests and docs); `-linguist-vendored` takes a path our vendored rule would
catch back to ordinary source; `linguist-documentation` does the same for the documentation rule.
"""

from __future__ import annotations

import os

import pytest

from codesearch.index import attributes as attrs_mod
from codesearch.index.attributes import Attributes, Linguist, language_name
from codesearch.index.builder import IndexSettings, index_source
from codesearch.index.compact import compact
from codesearch.index.format import format_version
from codesearch.index.language import rank_class
from codesearch.index.shard import Shard
from codesearch.index.sources import GitSource, RepoInfo
from codesearch.search.engine import Searcher
from tests.corpus import git

# ------------------------------------------------------------------------------------ matching

ROOT = """\
# comments and other attributes are ignored
*.inc           linguist-language=PHP text eol=lf
*.rb            linguist-language=cpp
/build.tpl      linguist-language=Go
lib/*.js        linguist-generated
third_party/**  linguist-vendored
third_party/ours/** -linguist-vendored
**/fixtures/*.json linguist-generated=true
api/*.json      linguist-generated=false
notes/**        linguist-documentation
docs/**         -linguist-documentation
*.x             linguist-language=NoSuchLanguage
dir/            linguist-vendored
!neg.txt        linguist-vendored
[attr]mine      linguist-vendored
"""
NESTED = """\
*.inc    linguist-language=Perl
*.txt    linguist-vendored
reset.js !linguist-generated
"""
FILES = {".gitattributes": ROOT, "pkg/.gitattributes": NESTED}

MATCHES = [
    # (path, overrides)
    ("a.inc", Linguist(language="PHP")),
    ("deep/down/a.inc", Linguist(language="PHP")),  # no "/" in the pattern: any depth
    ("pkg/a.inc", Linguist(language="Perl")),  # a deeper file overrides the root one
    ("pkg/sub/a.inc", Linguist(language="Perl")),
    ("x.rb", Linguist(language="C++")),  # an alias, as Linguist reads it
    ("build.tpl", Linguist(language="Go")),
    ("sub/build.tpl", Linguist()),  # "/build.tpl" is anchored at the root
    ("lib/app.js", Linguist(generated=True)),
    ("lib/sub/app.js", Linguist()),  # "*" stops at "/"
    ("src/lib/app.js", Linguist()),  # a pattern with "/" is relative to its file's directory
    ("third_party/x/y.c", Linguist(vendored=True)),
    ("third_party/ours/y.c", Linguist(vendored=False)),  # the later line wins
    ("a/fixtures/b.json", Linguist(generated=True)),
    ("fixtures/b.json", Linguist(generated=True)),  # a leading "**/" matches no directory too
    ("api/x.json", Linguist(generated=False)),
    ("notes/n.md", Linguist(documentation=True)),
    ("docs/guide.md", Linguist(documentation=False)),
    ("a.x", Linguist()),  # a language Linguist does not know: no override
    ("dir/f.c", Linguist()),  # a directory pattern never matches a file
    ("neg.txt", Linguist()),  # negated patterns are refused by git
    ("pkg/readme.txt", Linguist(vendored=True)),
    ("readme.txt", Linguist()),  # the nested file's rules stay below it
    ("plain.c", Linguist()),
]


def attributes(files: dict[str, str]) -> Attributes:
    a = Attributes()
    for path, text in files.items():
        a.add_file(path, text.encode())
    return a


@pytest.mark.parametrize("path,want", MATCHES)
def test_which_rule_applies(path, want):
    assert attributes(FILES).of(path) == want


def test_nested_files_override_whatever_order_they_come_in():
    assert attributes(dict(reversed(FILES.items()))).of("pkg/a.inc").language == "Perl"


def test_unspecified_forgets_an_earlier_setting():
    a = attributes({".gitattributes": "*.js linguist-generated\n", "pkg/.gitattributes": NESTED})
    assert a.of("pkg/reset.js") == Linguist() and a.of("pkg/other.js") == Linguist(generated=True)


@pytest.mark.parametrize("value,name", [
    ("PHP", "PHP"), ("php", "PHP"), ("JAVA", "Java"), ("cpp", "C++"), ("c++", "C++"), ("csharp", "C#"),
    ("c#", "C#"), ("golang", "Go"), ("Emacs-Lisp", "Emacs Lisp"), ("protocol-buffer", "Protocol Buffer"),
    ("objective-c", "Objective-C"), ("NoSuchLanguage", None), ("", None),
])
def test_language_names_and_aliases(value, name):
    assert language_name(value) == name


def test_reading_is_bounded(monkeypatch):
    monkeypatch.setattr(attrs_mod, "MAX_RULES", 3)
    monkeypatch.setattr(attrs_mod, "MAX_FILES", 2)
    a = attributes({".gitattributes": "".join(f"*.e{i} linguist-vendored\n" for i in range(5)),
                    "a/.gitattributes": "*.c linguist-vendored\n", "b/.gitattributes": "*.c linguist-vendored\n"})
    assert len(a.rules) == 3 and a.of("x.e2").vendored and not a.of("x.e3").vendored
    assert any("more than 3 linguist rules" in w for w in a.warnings)
    assert any("more than 2 .gitattributes files" in w for w in a.warnings)
    assert not a.of("b/x.c").vendored


# ------------------------------------------------------------------------------------ ranking

RANKS = [
    # (path, overrides, rank): 0 source, 1 tests and docs, 2 vendored, generated and dot-files
    ("src/main.go", Linguist(), 0),
    ("src/main.go", Linguist(vendored=True), 2),
    ("src/client.pb.go", Linguist(generated=True), 2),
    ("vendor/lib.go", Linguist(), 2),
    ("vendor/lib.go", Linguist(vendored=False), 0),
    ("docs/guide.md", Linguist(), 1),
    ("docs/guide.md", Linguist(documentation=False), 0),
    ("src/design.go", Linguist(documentation=True), 1),
    ("tests/test_x.py", Linguist(documentation=False), 1),  # still a test
    ("vendor/lib.go", Linguist(vendored=False, generated=True), 2),
]


@pytest.mark.parametrize("path,linguist,rank", RANKS)
def test_rank_classes_follow_the_overrides(path, linguist, rank):
    assert rank_class(path, linguist) == rank


# ------------------------------------------------------------------------------------ indexing

REPO_FILES = {
    ".gitattributes": "*.inc linguist-language=PHP\nsrc/gen/** linguist-generated\nvendor/ours/** -linguist-vendored\n",
    "src/main.go": "package main // needle\n",
    "src/gen/client.go": "package gen // needle\n",
    "vendor/ours/lib.go": "package lib // needle\n",
    "vendor/theirs/lib.go": "package lib // needle\n",
    "web/page.inc": "<?php echo 'needle'; ?>\n",
}


def _commit(repo: str, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        full = os.path.join(repo, name)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    base = tmp_path_factory.mktemp("linguist")
    repo = str(base / "repo")
    os.makedirs(repo)
    git(repo, "init", "-q", "-b", "main")
    _commit(repo, REPO_FILES, "initial")
    # what the work tree says but no commit does is not read
    with open(os.path.join(repo, ".gitattributes"), "a") as f:
        f.write("*.go linguist-language=Rust\n")
    other = str(base / "other")
    os.makedirs(other)
    git(other, "init", "-q", "-b", "main")
    _commit(other, {"b.txt": "needle\n"}, "initial")
    index = str(base / "index")
    settings = IndexSettings()
    for path, name in ((repo, "example.com/acme/repo"), (other, "example.com/acme/other")):
        source = GitSource(path, repo=RepoInfo(name=name))
        try:
            stats = index_source(source, index, settings)
        finally:
            source.close()
        assert stats.warnings == []
    return index


def _files(index: str, query: str) -> dict[str, str]:
    resp = Searcher(index).search(query, matches=50)
    return {f["fileName"]["text"]: f["language"] for f in resp["files"]}


def test_linguist_language_is_the_language_shown_and_filtered_on(indexed):
    assert _files(indexed, "needle repo:acme/repo")["web/page.inc"] == "PHP"
    assert set(_files(indexed, "needle lang:PHP")) == {"web/page.inc"}
    assert set(_files(indexed, "needle lang:Go")) == {"src/main.go", "src/gen/client.go", "vendor/ours/lib.go",
                                                       "vendor/theirs/lib.go"}  # the work tree's line is not read
    assert not _files(indexed, "needle lang:Rust")


def _ranks(index: str) -> dict[str, int]:
    out = {}
    for name in os.listdir(index):
        path = os.path.join(index, name)
        if os.path.isfile(path) and format_version(path) is not None:
            shard = Shard(path)
            assert shard.doc_rank is not None
            out.update({shard.doc_path(d): int(shard.doc_rank[d]) for d in range(shard.doc_count)})
    return out


def test_vendored_and_generated_files_stay_searchable_and_rank_last_even_after_compaction(indexed):
    want = {"src/main.go": 0, "vendor/ours/lib.go": 0, "src/gen/client.go": 2, "vendor/theirs/lib.go": 2}
    assert {p: r for p, r in _ranks(indexed).items() if p in want} == want
    order = list(_files(indexed, "needle lang:Go"))
    assert set(order[:2]) == {"src/main.go", "vendor/ours/lib.go"}  # ordinary source first
    assert compact(indexed, IndexSettings()).merged_shards == 2  # the two small repositories: one shard
    assert {p: r for p, r in _ranks(indexed).items() if p in want} == want
    assert set(list(_files(indexed, "needle lang:Go"))[:2]) == {"src/main.go", "vendor/ours/lib.go"}
