"""Language detection in GitHub Linguist names, and how much a file matters for ranking.

Uses go-enry (the Linguist port Zoekt uses) through `enry-python`: file name, extension,
shebang, modelines and, for ambiguous extensions, a look at the content. Only the first
`CONTENT_SAMPLE` bytes are shown to enry: its classifier costs time in proportion to the
content, and the head of a file decides.
"""

from __future__ import annotations

import enry

#: The language of every file that is not content-indexed (SPEC §3).
SKIPPED = "skipped"
CONTENT_SAMPLE = 1024


def detect(path: str, content: bytes | None) -> str:
    """The Linguist name of the file's language, or "" when unknown."""
    name = path.rsplit("/", 1)[-1]
    try:
        return enry.get_language(name, content[:CONTENT_SAMPLE] if content else b"") or ""
    except Exception:  # a failure of the native detector must never fail an index build
        return ""


def rank_class(path: str) -> int:
    """0 for ordinary source files, higher for files that should rank lower.

    1: tests and documentation, 2: vendored code and dot-files. Shards store documents in
    this order, so early termination keeps the results people want first.
    """
    try:
        if enry.is_vendor(path) or enry.is_dot_file(path):
            return 2
        if enry.is_test(path) or enry.is_documentation(path):
            return 1
    except Exception:
        return 0
    return 0
