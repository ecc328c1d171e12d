"""Copies folded on the results page: a content shown once, "also in N repositories" beside it.

The search of the page folds copies (``foldDuplicates``: they do not count against its budget,
`codesearch.search.duplicates`); each file carries its ``contentHash``. Each searcher's answer is
drawn as it arrives (`codesearch.web.results_page`), so the page decides per answer: the first file
of a content (in the answer's order: its rank) is drawn as a result, and the copies of it in the same
answer go into a disclosure inside it (``details.copies``: repository and path links, closed until
asked). Copies that arrive in a later answer than their first file, which is already on the page,
are drawn after the answer as a disclosure of their own that names the content
(``data-copy-of``); the page's script (``static/search-page.js``) moves their links into the first
file's disclosure. Without the script they stay visible, below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codesearch.web.templating import template

#: a file of an answer (``POST /api/search``'s shape)
File = dict[str, Any]


@dataclass
class CopyFolder:
    """The contents drawn on one results page so far."""

    shown: set[str] = field(default_factory=set)

    def fold(self, files: list[File]) -> tuple[list[tuple[File, list[File]]], dict[str, list[File]]]:
        """One answer's files, in order, as (file to draw, its copies in this answer), and the copies of
        contents drawn by earlier answers (by content)."""
        drawn: list[tuple[File, list[File]]] = []
        mine: dict[str, list[File]] = {}
        late: dict[str, list[File]] = {}
        for f in files:
            h = f.get("contentHash")
            if not isinstance(h, str) or not h:
                drawn.append((f, []))
            elif h in self.shown:
                late.setdefault(h, []).append(f)
            elif h in mine:
                mine[h].append(f)
            else:
                mine[h] = []
                drawn.append((f, mine[h]))
        self.shown.update(mine)
        return drawn, late


#: a copy's link on this page (`results_page.Links`), and a repository's shown name (`results_page.RepoNames`)
HrefOf = Callable[[File], str | None]
LabelOf = Callable[[str], str]


def copies_view(content: str, copies: list[File], href: HrefOf, label: LabelOf) -> dict[str, Any]:
    """What ``_result_copies.html`` draws: the copies' repositories and paths, linked."""
    items = []
    for f in copies:
        repo = str(f.get("repository") or "")
        items.append(
            {
                "repo": repo,
                "repo_label": label(repo),
                "path": str((f.get("fileName") or {}).get("text") or ""),
                "href": href(f),
            }
        )
    return {"content": content, "repos": len({i["repo"] for i in items}), "copies": items}


def render_copies(content: str, copies: list[File], href: HrefOf, label: LabelOf, late: bool) -> str:
    """The disclosure of a content's copies (inside its result, or `late`: on its own, for the script)."""
    return template("_result_copies.html").render(c=copies_view(content, copies, href, label), late=late)
