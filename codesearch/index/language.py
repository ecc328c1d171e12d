"""Language detection in GitHub Linguist names, and how much a file matters for ranking.

Uses go-enry (the Linguist port Zoekt uses) through `enry-python`: file name, extension,
shebang, modelines and, for ambiguous extensions, a look at the content. Only the first
`CONTENT_SAMPLE` bytes are shown to enry: its classifier costs time in proportion to the
content, and the head of a file decides.

enry's answer for most files depends on the file's name alone, yet each call runs its modeline
regexes over the content (about 40 µs a file here; a 10 GB build has 1.2 million files). enry
decides in this order: modeline, file name, shebang, extension, XML, man page, content
heuristics, classifier; a strategy that gives exactly one language ends the search, several
are handed on. So when the head holds no shebang, no possible modeline and no NUL byte,
`detect` asks enry's name strategies once per file name (cached, `name_candidates`): one
language is enry's answer; several go to enry's content heuristics alone, and one language
from them is enry's answer too (a `.h` file's always is: 122 µs a file through the whole chain,
a third less this way). Anything else goes through the whole of enry. The tests
(tests/engine/test_language.py) check the shortcuts against enry on every file of a tree; the
1 GB corpus and this machine's packages (127,399 files) gave no difference.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import enry
from enry.definitions import ffi, go_str_slice_to_py, lib

from codesearch.index.attributes import NONE, Linguist

#: The language of every file that is not content-indexed (docs/indexing.md#what-gets-indexed).
SKIPPED = "skipped"
CONTENT_SAMPLE = 1024


#: The ``ft=`` / ``filetype=`` / ``syntax=`` (any case) a Vim modeline needs to name a language,
#: looked for in the lowered head (`_maybe_modeline`).
_VIM_LANGUAGE = re.compile(rb"(?:filetype|ft|syntax)\s*=")


def _maybe_modeline(sample: bytes) -> bool:
    """Whether the head could hold a modeline enry reads: Emacs's ``-*- … -*-``, or what a Vim
    modeline needs to name a language. A superset of enry's own patterns (a match only sends the
    file down enry's whole path), in plain substring tests first: a case-insensitive regex over
    every head cost 23 µs a file, more than the shortcut saves."""
    if b"-*-" in sample:
        return True
    return b"=" in sample and _VIM_LANGUAGE.search(sample.lower()) is not None


def detect(path: str, content: bytes | None) -> str:
    """The Linguist name of the file's language, or "" when unknown: enry's answer."""
    name = path.rsplit("/", 1)[-1]
    sample = content[:CONTENT_SAMPLE] if content else b""
    try:
        if not (sample.startswith(b"#!") or b"\0" in sample or _maybe_modeline(sample)):
            candidates = name_candidates(name)
            if len(candidates) == 1:
                return candidates[0]
            if candidates:
                # several: enry's next strategies (XML, man page) cannot make them one, its
                # content heuristics may (a `.h` file's always do: Objective-C, C++ or C)
                by_content = _strategy(lib.GetLanguagesByContent, name, sample)
                if len(by_content) == 1:
                    return by_content[0]
        return enry.get_language(name, sample) or ""
    except Exception:  # a failure of the native detector must never fail an index build
        return ""


def _strategy(function: Any, name: str, sample: bytes = b"") -> list[str]:
    """The languages one of enry's strategies gives, called through the library: the binding's
    own wrappers return only the first."""
    languages: list[str] = go_str_slice_to_py(lib, function(name.encode(), sample, len(sample), ffi.NULL))
    return languages


@functools.lru_cache(maxsize=16384)
def name_candidates(name: str) -> tuple[str, ...]:
    """The languages enry holds for `name` after its file-name and extension strategies when the
    content holds no modeline and no shebang: one is its answer; several are left for the
    content to decide among; none, for the content alone."""
    by_name = _strategy(lib.GetLanguagesByFilename, name)
    if len(by_name) == 1:
        return (by_name[0],)
    by_extension = _strategy(lib.GetLanguagesByExtension, name)
    return tuple(by_extension or by_name)


# Path rules for ranking, after Linguist's vendor.yml / documentation.yml and common test
# layouts. Plain regexes: enry's own classifiers cost ~45 µs a call each, too much per file. Each
# rule is in two parts: the folders a path may pass through (one whole folder name), decided once
# per folder (`_folder_classes`, cached: a repository has far fewer folders than files), and the
# file's own name, decided per file by three short regexes over the name alone. The three rules
# over the whole path cost ~10 µs a file.
_VENDOR_FOLDER = re.compile(
    r"(^|/)(node_modules|bower_components|vendor|vendors|third[_-]?party|external|extern|deps|Godeps|"
    r"\.yarn|\.cargo|site-packages|dist-packages|__pycache__)/"
)
_VENDOR_NAME = re.compile(r"^\.|\.min\.(js|css)$|-min\.js$|\.(map|lock)$")
_TEST_FOLDER = re.compile(r"(^|/)(tests?|testing|testdata|spec|specs|__tests__|__mocks__|fixtures?)/")
_TEST_NAME = re.compile(r"^test_|_tests?\.[^.]+$|\.(test|spec)\.[^.]+$|(Test|Tests|Spec)\.[^.]+$")
_DOCS_FOLDER = re.compile(r"(^|/)(docs?|documentation|examples?|samples?|demos?)/", re.IGNORECASE)
_DOCS_NAME = re.compile(
    r"^(README|CHANGELOG|CHANGES|HISTORY|NEWS|LICEN[CS]E|COPYING|AUTHORS|CONTRIBUTING)|\.(md|markdown|rst|txt|adoc)$",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=65536)
def _folder_classes(folder: str) -> tuple[bool, bool, bool]:
    """Whether a path under `folder` (with its trailing "/") is vendored, a test, documentation by
    the folder rules."""
    return (
        _VENDOR_FOLDER.search(folder) is not None,
        _TEST_FOLDER.search(folder) is not None,
        _DOCS_FOLDER.search(folder) is not None,
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
    cut = path.rfind("/") + 1
    vendor, test, docs = _folder_classes(path[:cut]) if cut else (False, False, False)
    name = path[cut:]
    if linguist.vendored is None and (vendor or _VENDOR_NAME.search(name)):
        return 2
    if test or _TEST_NAME.search(name):
        return 1
    if linguist.documentation is not None:
        return 1 if linguist.documentation else 0
    return 1 if docs or _DOCS_NAME.search(name) else 0
