"""Copies and the ``matches`` budget across the answers of a stream (codesearch/app/search.py
`StreamMerger`, codesearch/search/duplicates.py): with ``foldDuplicates`` a copy of a file already
sent, in this answer or an earlier one, is sent without being charged; without it, every file is."""

from __future__ import annotations

import pytest

from codesearch.search.engine import PartialResult, PresentedFile
from codesearch.search.options import SearchOptions
from codesearch.app.search import StreamMerger


def presented(name: str, content: str, matches: int, order: int) -> PresentedFile:
    chunk = {"content": "x", "contentStart": {"byteOffset": 0, "lineNumber": 1, "column": 1}, "symbols": [],
             "matchRanges": [{"start": {"byteOffset": 0, "lineNumber": 1, "column": 1},
                              "end": {"byteOffset": 1, "lineNumber": 1, "column": 2}}] * matches}
    file = {"fileName": {"text": name, "matchRanges": []}, "repository": f"git.local/{name}", "repositoryId": order,
            "webUrl": f"http://x/browse/{name}", "language": "Text", "branches": ["HEAD"], "chunks": [chunk],
            "contentHash": content}
    return PresentedFile(100, (0, 0, order), matches, file)


def answer(*files: PresentedFile) -> PartialResult:
    return PartialResult(files=list(files), total_matches=sum(f.match_count for f in files))


#: answers (file name, content, matches) → the names sent per answer, folded and not
CASES = [
    # a copy in a later answer is free when folded: the budget of 2 still holds b
    ([[("a", "1", 1)], [("a-copy", "1", 1), ("b", "2", 1)]], 2, [["a"], ["a-copy", "b"]], [["a"], ["a-copy"]]),
    # copies in the same answer, after and before the budget ends
    ([[("a", "1", 1), ("a2", "1", 1), ("b", "2", 1), ("a3", "1", 5)]], 2, [["a", "a2", "b", "a3"]], [["a", "a2"]]),
    # a copy of a file not sent (over the budget) is not free
    ([[("a", "1", 1)], [("b", "2", 1), ("b-copy", "2", 1)]], 1, [["a"], []], [["a"], []]),
]


@pytest.mark.parametrize("answers, matches, folded, unfolded", CASES)
def test_copies_are_free_only_when_folded(answers, matches, folded, unfolded):
    for fold, want in ((True, folded), (False, unfolded)):
        merger = StreamMerger(SearchOptions(matches=matches, fold_copies=fold), 0)
        got = []
        order = 0
        for files in answers:
            parts = []
            for name, content, n in files:
                order += 1
                parts.append(presented(name, content, n, order))
            got.append([f["fileName"]["text"] for f in merger.chunk(answer(*parts))["files"]])
        assert got == want, fold
