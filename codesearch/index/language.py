"""Language detection in GitHub Linguist names, and how much a file matters for ranking.

Uses go-enry (the Linguist port Zoekt uses) through `enry-python`: file name, extension,
shebang, modelines and, for ambiguous extensions, a look at the content. Only the first
`CONTENT_SAMPLE` bytes are shown to enry: its classifier costs time in proportion to the
content, and the head of a file decides.
"""

from __future__ import annotations

import functools
import re

import enry

from codesearch.index.attributes import NONE, Linguist

#: The language of every file that is not content-indexed (docs/indexing.md#what-gets-indexed).
SKIPPED = "skipped"
CONTENT_SAMPLE = 1024


def detect(path: str, content: bytes | None) -> str:
    """The Linguist name of the file's language, or "" when unknown."""
    name = path.rsplit("/", 1)[-1]
    try:
        return enry.get_language(name, content[:CONTENT_SAMPLE] if content else b"") or ""
    except Exception:  # a failure of the native detector must never fail an index build
        return ""


# Path rules for ranking, after Linguist's vendor.yml / documentation.yml and common test
# layouts. Plain regexes: enry's own classifiers cost ~45 µs a call each, too much per file.
_VENDOR = re.compile(
    r"(^|/)(node_modules|bower_components|vendor|vendors|third[_-]?party|external|extern|deps|Godeps|"
    r"\.yarn|\.cargo|site-packages|dist-packages|__pycache__)/|(^|/)\.[^/]+$|\.min\.(js|css)$|-min\.js$|\.(map|lock)$"
)
_TEST = re.compile(
    r"(^|/)(tests?|testing|testdata|spec|specs|__tests__|__mocks__|fixtures?)/|(^|/)test_[^/]*$|_tests?\.[^/.]+$|"
    r"\.(test|spec)\.[^/.]+$|(Test|Tests|Spec)\.[^/.]+$"
)
_DOCS = re.compile(
    r"(^|/)(docs?|documentation|examples?|samples?|demos?)/|(^|/)(README|CHANGELOG|CHANGES|HISTORY|NEWS|LICEN[CS]E|COPYING|"
    r"AUTHORS|CONTRIBUTING)[^/]*$|\.(md|markdown|rst|txt|adoc)$",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=1024)
def wants_symbols(language: str) -> bool:
    """True for languages worth running ctags on: Linguist's programming and markup types.

    Data (JSON, SVG, XML, YAML) and prose (Markdown, text) hold no definitions people search
    for, and make up much of a repository's bytes; skipping them keeps ctags off the build's
    critical path.
    """
    if not language or language == SKIPPED:
        return False
    try:
        return enry.get_language_type(language) in ("programming", "markup")
    except Exception:
        return False


def rank_class(path: str, linguist: Linguist = NONE) -> int:
    """0 for ordinary source files, higher for files that should rank lower.

    1: tests and documentation, 2: vendored and generated code and dot-files. Shards store
    documents in this order, so early termination keeps the results people want first.
    `linguist` (the file's ``.gitattributes`` overrides, `codesearch.index.attributes`) has the
    last word: ``linguist-vendored`` or ``linguist-generated`` makes a file rank 2,
    ``-linguist-vendored`` takes a path out of the vendored rule, and ``linguist-documentation``
    (or its unset form) does the same for the documentation rule.
    """
    if linguist.vendored or linguist.generated:
        return 2
    if linguist.vendored is None and _VENDOR.search(path):
        return 2
    if _TEST.search(path):
        return 1
    if linguist.documentation is not None:
        return 1 if linguist.documentation else 0
    return 1 if _DOCS.search(path) else 0
