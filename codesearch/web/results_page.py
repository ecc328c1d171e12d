"""The search results page, written on the server while the searchers answer.

``GET /search`` answers with one streamed HTML document. The page up to the results list is sent
at once (the browser draws the header, the query bar and "Searching…" and fetches the cached
static files meanwhile); then each searcher's answer, as it arrives, is sent as the HTML of its
files (`render_file`); then what the search concluded (`outcome_script`: the statistics, whether
it is exhaustive, the hints of an empty search, an error) and the rest of the page.

Why on the server: the first results are in the document the browser is already reading, so
they show without waiting for the page's scripts to load and run or for a second request (the
results stream the page used to ask for from its script). On this machine that was most of the
time to the first result (docs/web-ui.md#time-to-first-result). The page works without JavaScript;
``static/search-page.js`` adds ranking across answers, the facets, the summary and the hints.

The markup of one file is the one the page's script used to build (``.file``, ``.file-head``,
``.chunk``, ``.cline``…); each ``section.file`` also carries what the script needs to rank and
count it without reading its text: ``data-score``, ``data-order`` (the tie-break of equal scores,
``searcher,shard,document``) and ``data-matches``. Repository text only reaches the page through
Jinja's autoescaping; links pass `safe_href`.
"""

from __future__ import annotations

import logging
import math
import time
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from jinja2.utils import htmlsafe_json_dumps
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from codesearch.web.first_results import Waiting, gate
from codesearch.web.result_copies import CopyFolder, File, render_copies
from codesearch.web.snippets import SnippetBudget, plain_line, snippet_html
from codesearch.web.templating import template

log = logging.getLogger(__name__)

#: The most match ranges a file of the results shows once its "Show N more matches" is pressed
#: (its further matches, fetched from `codesearch.web.more_matches`); the rest are counted and
#: linked to the file page.
EXPANDED_FILE_MATCHES = 200
#: The route of a file's further matches (`codesearch.web.more_matches`).
MORE_MATCHES_PATH = "/search/file"
#: Seconds of drawing per part of the page after its first file (`_render_slice`): a part leaves
#: as soon as it is drawn, and a page its browser left (a new search) costs at most one more.
RENDER_SLICE_S = 0.004

#: A file to draw and its copies in the same answer (`CopyFolder.fold`).
Drawn = tuple[File, list[File]]

#: Marks the places of the results and of the search's outcome in the rendered page.
RESULTS_SLOT = "<!--codesearch:results-->"
OUTCOME_SLOT = "<!--codesearch:outcome-->"


def ranges_by_line(ranges: Iterable[dict[str, Any]] | None) -> dict[int, list[tuple[int, float]]]:
    """Match ranges (1-based lines and character columns, end exclusive) as, per line, the
    ``[from, to)`` character intervals they cover; ``to`` is infinity for a range that runs on to
    the next line."""
    out: dict[int, list[tuple[int, float]]] = {}
    for r in ranges or ():
        s, e = r["start"], r["end"]
        for ln in range(s["lineNumber"], e["lineNumber"] + 1):
            lo = s["column"] - 1 if ln == s["lineNumber"] else 0
            hi = e["column"] - 1 if ln == e["lineNumber"] else math.inf
            if hi > lo:
                out.setdefault(ln, []).append((lo, hi))
    return out


def marked(text: str, intervals: Iterable[tuple[int, float]] | None) -> list[tuple[str, bool]]:
    """`text` cut into ``(piece, is_match)`` pieces by `intervals` (character positions: code
    points, as the API counts columns); intervals that overlap or touch make one match."""
    pieces: list[tuple[str, bool]] = []
    pos = 0
    for lo0, hi0 in sorted(intervals or ()):
        lo, hi = max(lo0, pos), min(hi0, len(text))
        if hi <= lo:
            continue
        hi = int(hi)
        if lo > pos:
            pieces.append((text[pos:lo], False))
        if pieces and pieces[-1][1] and lo == pos:  # overlapping or touching the last mark: one mark
            pieces[-1] = (pieces[-1][0] + text[lo:hi], True)
        else:
            pieces.append((text[lo:hi], True))
        pos = hi
    if pos < len(text) or not pieces:
        pieces.append((text[pos:], False))
    return pieces


def match_count(f: dict[str, Any]) -> int:
    """The match ranges of one file: in its name and in its chunks."""
    n = len((f.get("fileName") or {}).get("matchRanges") or ())
    return n + sum(len(c.get("matchRanges") or ()) for c in f.get("chunks") or ())


def first_match_anchor(f: dict[str, Any]) -> str:
    """The file view's anchor for the lines of the file's first match: ``#L4``, or ``#L4-L6``
    when it spans lines (a match that ends with a newline ends on the line before)."""
    for c in f.get("chunks") or ():
        ranges = c.get("matchRanges") or ()
        if not ranges:
            continue
        start, end = ranges[0]["start"], ranges[0]["end"]
        last = end["lineNumber"]
        if end["column"] == 1 and last > start["lineNumber"]:
            last -= 1
        return f"#L{start['lineNumber']}-L{last}" if last > start["lineNumber"] else f"#L{start['lineNumber']}"
    return ""


def safe_href(url: object) -> str | None:
    """`url` if a link may point there: a path of this site or an http(s) URL (never
    ``javascript:``, ``data:``, nor ``//host`` or ``/\\host``, which browsers read as another site)."""
    if not isinstance(url, str) or not url:
        return None
    if url.startswith("/"):
        return None if url[1:2] in ("/", "\\") else url
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return None
    return url if parts.scheme.lower() in ("http", "https") and parts.netloc else None


@dataclass
class Links:
    """How one results page links to files: the file view under this site's root, carrying the
    query so that the file view highlights its terms."""

    root: str
    public_url: str
    query: str
    regex: bool = False
    case: bool = False

    def browse(self, web_url: object) -> str | None:
        """A file's page on this site: the ``/browse/…`` part of its webUrl (which carries the
        configured public URL) under this page's root."""
        if not isinstance(web_url, str):
            return None
        if self.public_url and web_url.startswith(self.public_url + "/browse/"):
            return self.root + web_url[len(self.public_url) :]
        i = web_url.find("/browse/")
        return self.root + web_url[i:] if i >= 0 else safe_href(web_url)

    def file_href(self, f: dict[str, Any]) -> str | None:
        """A file's page on this site, carrying the query (None when it has no web URL here)."""
        page = self.browse(f.get("webUrl"))
        return page + self.terms() if page else None

    def terms(self) -> str:
        return "?" + urllib.parse.urlencode(self._params())

    def more_matches(self, f: dict[str, Any]) -> str:
        """The address of `f`'s further matches for this search (`MORE_MATCHES_PATH`): the
        query, the file's repository, path and first branch."""
        params = self._params()
        params["repo"] = str(f.get("repository") or "")
        params["path"] = str((f.get("fileName") or {}).get("text") or "")
        branches = f.get("branches") or ()
        if branches:
            params["branch"] = str(branches[0])
        return self.root + MORE_MATCHES_PATH + "?" + urllib.parse.urlencode(params)

    def _params(self) -> dict[str, str]:
        params = {"q": self.query}
        if self.regex:
            params["regex"] = "1"
        if self.case:
            params["case"] = "1"
        return params


@dataclass
class RepoNames:
    """The names repositories are shown by: a repository's display name (the folder of a local
    repository, the path after the host of a hosted one) unless another repository seen in the
    same search has it too; then the full name, which tells them apart."""

    #: full name -> display name, as the answers gave them
    display: dict[str, str] = field(default_factory=dict)
    #: display name -> the full names that have it
    holders: dict[str, set[str]] = field(default_factory=dict)

    def learn(self, infos: Iterable[dict[str, Any]] | None) -> None:
        for r in infos or ():
            if isinstance(r, dict) and r.get("name"):
                name = str(r["name"])
                self.display[name] = shown = str(r.get("displayName") or name)
                self.holders.setdefault(shown, set()).add(name)

    def label(self, name: str) -> str:
        shown = self.display.get(name)
        return shown if shown is not None and len(self.holders[shown]) == 1 else name

    def infos(self) -> list[dict[str, str]]:
        """The repositories seen, for the page's script (which relabels them once all are known)."""
        return [{"name": name, "displayName": shown} for name, shown in self.display.items()]


def file_view(f: dict[str, Any], links: Links, names: RepoNames, budget: SnippetBudget | None = None) -> dict[str, Any]:
    """What ``_result_file.html`` draws for one file of a chunk: its lines highlighted while the
    page's `budget` lasts (`codesearch.web.snippets`; without one, plain), with their marks; the
    matches it was found with beyond those shown (``moreMatches``, the page's per-file cap) and
    where the page's script fetches them (`Links.more_matches`)."""
    page = links.browse(f.get("webUrl"))
    base = page + links.terms() if page else None
    name = f.get("fileName") or {"text": ""}
    name_marks = [(r["start"]["column"] - 1, r["end"]["column"] - 1) for r in name.get("matchRanges") or ()]
    branches = [str(b) for b in f.get("branches") or ()]
    branch = branches[0].removeprefix("refs/heads/").removeprefix("refs/tags/") if branches else ""
    repo = str(f.get("repository") or "")
    chunks: list[list[dict[str, Any]]] = []
    for c in f.get("chunks") or ():
        by_line = ranges_by_line(c.get("matchRanges"))
        start = (c.get("contentStart") or {}).get("lineNumber") or 1
        lines = []
        for i, text in enumerate(str(c.get("content") or "").split("\n")):
            ln = start + i
            # an HTML parser reads a carriage return as a line break: drop the one of a CRLF line
            # end, show any other as the return symbol (a line of the file stays one line)
            text = text.removesuffix("\r").replace("\r", "\u240d")
            lines.append(
                {
                    "n": ln,
                    "hit": ln in by_line,
                    "href": f"{base}#L{ln}" if base else None,
                    "pieces": marked(text, by_line.get(ln)),
                }
            )
        chunks.append(lines)
    path = str(name.get("text") or "")
    lang = str(f.get("language") or "")
    pieces = [[line["pieces"] for line in lines] for lines in chunks]
    htmls = snippet_html(path, lang, pieces, budget) if budget is not None else None
    for k, lines in enumerate(chunks):
        for i, line in enumerate(lines):
            line["html"] = htmls[k][i] if htmls is not None else plain_line(line["pieces"])
    more = f.get("moreMatches")
    more = more if isinstance(more, int) and not isinstance(more, bool) and more > 0 else 0
    shown = match_count(f)
    score = f.get("score")
    return {
        "repo": repo,
        "repo_label": names.label(repo),
        "lang": lang,
        "href": base + first_match_anchor(f) if base else None,
        "name": marked(path, name_marks),
        "branch": branch,
        "branches": ", ".join(branches),
        "matches": shown + more,
        "more": more,
        "more_exact": f.get("moreMatchesExact") is not False,
        # "Show N more matches": the address of the file's further matches, and how many it brings
        "more_url": links.more_matches(f) if more and base else None,
        "more_shown": max(0, min(more, EXPANDED_FILE_MATCHES - shown)),
        "external": safe_href(f.get("externalWebUrl")),
        "score": score if isinstance(score, (int, float)) and not isinstance(score, bool) else 0,
        "order": ",".join(str(int(x)) for x in f.get("order") or () if isinstance(x, (int, float))),
        "chunks": chunks,
        # what the script sorts by (`sort`) and folds copies by (`codesearch.web.result_copies`)
        "path": str(name.get("text") or ""),
        "time": str(f.get("lastCommitTime") or ""),
        "content": str(f.get("contentHash") or ""),
    }


def render_file(
    f: dict[str, Any],
    links: Links,
    names: RepoNames,
    budget: SnippetBudget | None = None,
    copies: list[dict[str, Any]] | None = None,
) -> str:
    """One file of the results as HTML (``section.file``), with the disclosure of its `copies`."""
    view = file_view(f, links, names, budget)
    folded = Markup(render_copies(view["content"], copies, links.file_href, names.label, late=False)) if copies else ""
    return template("_result_file.html").render(f=view, copies=folded)


def outcome_script(outcome: dict[str, Any]) -> Markup:
    """What the search concluded, for the page's script: a JSON script element, escaped as
    Jinja's ``tojson`` escapes (no text in it can close the element)."""
    return Markup('<script type="application/json" id="search-outcome">{}</script>').format(
        htmlsafe_json_dumps(outcome, separators=(",", ":"))
    )


def split_page(html: str) -> tuple[str, str, str]:
    """A rendered results page cut at its two slots: (up to the results, between the results and
    the outcome, the rest)."""
    head, rest = html.split(RESULTS_SLOT, 1)
    middle, tail = rest.split(OUTCOME_SLOT, 1)
    return head, middle, tail


async def page_stream(
    html: str,
    events: AsyncGenerator[dict[str, Any], None],
    links: Links,
    on_close: Callable[[], None] | None = None,
    waiting: Waiting | None = None,
) -> AsyncIterator[str]:
    """The results page `html` (rendered with both slots) with the search's `events`
    (`codesearch.app.search.search_events`) written into it as they arrive. Closing the stream (the
    browser went away) closes `events` and calls `on_close` (`StartedSearch.abandon`: the
    searchers still at work stop), whenever that happens. A file that cannot be drawn ends the
    search with an error in the outcome; the page is always complete.

    `waiting` (`codesearch.web.first_results`) is this page before its first result, done once
    that is sent; after it, each slice of the rest waits its turn behind the pages of this replica
    still waiting for theirs."""
    head, middle, tail = split_page(html)
    turns = gate().pages()
    try:
        yield head
        names = RepoNames()
        folder = CopyFolder()
        budget = SnippetBudget()
        first = True  # the page's first file leaves alone: the others are drawn while it travels
        outcome: dict[str, Any] = {"error": {"message": "the search ended early"}}
        async with aclosing(events) as answers:
            async for event in answers:
                kind = event.get("type")
                if kind == "chunk":
                    try:  # (a browser that leaves raises GeneratorExit at the yield: not caught here)
                        drawn, late = _fold_chunk(event, names, folder)
                        if first and drawn:  # the page's first file leaves alone, drawn at once
                            f, copies = drawn.pop(0)
                            first = False
                            yield render_file(f, links, names, budget, copies)
                            if waiting is not None:
                                waiting.done()
                        # the others are drawn in a worker thread: the replica's event loop, which
                        # ships what was yielded (Serve's queue of a response's parts is read by a
                        # task of that loop), is free meanwhile, for this page's first file and for
                        # other requests. A few milliseconds' worth at a time (`RENDER_SLICE_S`):
                        # each slice leaves as soon as it is drawn, and a browser that leaves
                        # (another search) stops the drawing at the next slice, not at the page's end
                        while drawn or late:
                            await turns.turn()  # (a page still before its first result goes first)
                            html, drawn, late = await run_in_threadpool(
                                _render_slice, drawn, late, links, names, budget
                            )
                            yield html
                    except Exception:  # noqa: BLE001 - a bad answer must not cut the page off
                        log.exception("results page: an answer could not be drawn")
                        outcome = {"error": {"message": "some results could not be shown"}}
                        break
                elif kind == "final":
                    outcome = {
                        "stats": event.get("accumulatedStats") or {},
                        "exhaustive": bool(event.get("isSearchExhaustive")),
                        "hints": event.get("hints") or [],
                    }
                    if "missingRepositories" in event:  # part of the index unreadable: the page says so
                        outcome["missing"] = event["missingRepositories"]
                elif kind == "error":
                    outcome = {"error": event.get("error") or {}}
        outcome["repositoryInfo"] = names.infos()
        yield "".join((middle, outcome_script(outcome), tail))  # not `+`: str + Markup escapes the str
    finally:
        if waiting is not None:
            waiting.done()
        if on_close is not None:
            on_close()


def _fold_chunk(
    event: dict[str, Any], names: RepoNames, folder: CopyFolder
) -> tuple[list[Drawn], dict[str, list[File]]]:
    """One ``chunk`` event's files to draw, copies folded (`codesearch.web.result_copies`), and the
    late copies of files drawn before; its repositories' names learnt first."""
    names.learn(event.get("repositoryInfo"))
    return folder.fold(list(event.get("files") or ()))


def _render_slice(
    drawn: list[Drawn],
    late: dict[str, list[File]],
    links: Links,
    names: RepoNames,
    budget: SnippetBudget,
    seconds: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[str, list[Drawn], dict[str, list[File]]]:
    """The HTML of the files to draw (with their copies), then of late copies, as one part, for
    `seconds` (`RENDER_SLICE_S`; at least one file): ``(html, files left, late copies left)``."""
    limit = RENDER_SLICE_S if seconds is None else seconds
    html: list[str] = []
    start = clock()
    drawn, late = list(drawn), dict(late)
    while drawn and (not html or clock() - start < limit):
        f, copies = drawn.pop(0)
        html.append(render_file(f, links, names, budget, copies))
    while late and not drawn and (not html or clock() - start < limit):
        hash_, copies = next(iter(late.items()))
        del late[hash_]
        html.append(render_copies(hash_, copies, links.file_href, names.label, late=True))
    return "".join(html), drawn, late
