"""Copies: the same content in several files (forks, vendored code), told apart and folded.

Each presented file carries ``contentHash``, the git blob id of its content (`codesearch.index.recency`),
when its shard records it. Files with the same ``contentHash`` are copies of one another. ``POST
/api/search`` keeps every file (Sourcebot's shape) and marks each copy with ``duplicateOf``, a pointer
to the first file of the answer with that content (`mark_copies`); the results page shows that file
once, with the others behind "also in N repositories" (`codesearch.web.results_page`).

A search that folds copies (`SearchOptions.fold_copies`, the results page's) keeps a copy without
charging it to the ``matches`` budget (`Folding`): a page of 100 matches holds 100 matches of distinct
contents, plus their copies, at most as many copies as the budget (so the work stays bounded). Which
files are searched at all is the caller's visibility (`codesearch.search.visibility`): a copy in a
repository the caller cannot see is never found, so it is neither shown nor counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Folding:
    """The contents a search has kept so far (across the answers of its searchers), and how many more
    copies it may keep free of the budget."""

    free: int
    seen: set[str] = field(default_factory=set)
    #: match ranges of the copies kept free
    free_matches: int = 0

    def keeps_free(self, content: str | None, matches: int) -> bool:
        """Whether a file of `content` is a copy of one kept, and may be kept without charge (then
        it is counted as such)."""
        if not content or content not in self.seen or self.free <= 0:
            return False
        self.free -= 1
        self.free_matches += matches
        return True

    def kept(self, content: str | None) -> None:
        """A file of `content` was kept, charged to the budget."""
        if content:
            self.seen.add(content)


def mark_copies(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`files` (an answer's, in its order) with ``duplicateOf`` on each file whose ``contentHash`` an
    earlier one has: the repository, repository id, path and web URL of that first one."""
    first: dict[str, dict[str, Any]] = {}
    out = []
    for f in files:
        h = f.get("contentHash")
        if not h:
            out.append(f)
            continue
        original = first.get(h)
        if original is None:
            first[h] = f
            out.append(f)
            continue
        pointer = {
            "repository": original["repository"],
            "repositoryId": original["repositoryId"],
            "fileName": original["fileName"]["text"],
            "webUrl": original["webUrl"],
        }
        out.append({**f, "duplicateOf": pointer})
    return out
