"""The results page as the server writes it (codesearch/web/results_page.py): the marks of match
ranges, the links, the escaping of repository text, and the order in which the parts leave."""

from __future__ import annotations

import asyncio
import html as html_lib
import json
import random
import re
import urllib.parse
from pathlib import Path

import pytest

from codesearch.web import results_page
from codesearch.web.snippets import SnippetBudget
from codesearch.web.results_page import (
    OUTCOME_SLOT,
    RESULTS_SLOT,
    Links,
    RepoNames,
    first_match_anchor,
    marked,
    match_count,
    page_stream,
    ranges_by_line,
    render_file,
    safe_href,
)


def rng(l1, c1, l2, c2):
    return {"start": {"lineNumber": l1, "column": c1}, "end": {"lineNumber": l2, "column": c2}}


# ----------------------------------------------------------------------------- marks

@pytest.mark.parametrize("ranges,expected", [
    ([], {}),
    ([rng(3, 5, 3, 9)], {3: [(4, 8)]}),
    ([rng(3, 5, 5, 2)], {3: [(4, float("inf"))], 4: [(0, float("inf"))], 5: [(0, 1)]}),
    ([rng(3, 5, 4, 1)], {3: [(4, float("inf"))]}),          # ends with line 3's newline
    ([rng(2, 1, 2, 1)], {}),                                 # empty
    ([rng(1, 1, 1, 3), rng(1, 5, 1, 6)], {1: [(0, 2), (4, 5)]}),
])
def test_ranges_by_line(ranges, expected):
    assert ranges_by_line(ranges) == expected


@pytest.mark.parametrize("text,intervals,expected", [
    ("abcdef", [], [("abcdef", False)]),
    ("abcdef", [(1, 3)], [("a", False), ("bc", True), ("def", False)]),
    ("abcdef", [(0, float("inf"))], [("abcdef", True)]),
    ("abcdef", [(4, 2)], [("abcdef", False)]),                # backwards: nothing
    ("abcdef", [(2, 4), (1, 3)], [("a", False), ("bcd", True), ("ef", False)]),  # overlapping
    ("abc", [(5, 9)], [("abc", False)]),                       # past the end
    ("", [(0, 1)], [("", False)]),
    ("a😀b😀c", [(1, 2), (3, 4)], [("a", False), ("😀", True), ("b", False), ("😀", True), ("c", False)]),
])
def test_marked(text, intervals, expected):
    assert marked(text, intervals) == expected


def test_marked_against_a_character_mask():
    """Differential: the pieces are the text, and a character is in a marked piece exactly when
    some interval covers it (an oracle of one flag per character)."""
    r = random.Random(7)
    for _ in range(2000):
        text = "".join(r.choice("ab😀 <&") for _ in range(r.randint(0, 12)))
        intervals = [(a, a + r.randint(-1, 5)) for a in (r.randint(0, 14) for _ in range(r.randint(0, 3)))]
        if r.random() < 0.2:
            intervals.append((r.randint(0, 10), float("inf")))
        pieces = marked(text, intervals)
        assert "".join(p for p, _ in pieces) == text
        mask = [any(lo <= i < hi for lo, hi in intervals) for i in range(len(text))]
        got = [hit for p, hit in pieces for _ in p]
        assert got == mask, (text, intervals, pieces)


@pytest.mark.parametrize("f,count,anchor", [
    ({"fileName": {"text": "a.py"}, "chunks": []}, 0, ""),
    ({"fileName": {"text": "a.py", "matchRanges": [rng(1, 1, 1, 2)]}, "chunks": []}, 1, ""),
    ({"fileName": {"text": "a"}, "chunks": [{"matchRanges": [rng(4, 1, 4, 3), rng(9, 1, 9, 2)]}]}, 2, "#L4"),
    ({"fileName": {"text": "a"}, "chunks": [{"matchRanges": []}, {"matchRanges": [rng(4, 2, 6, 3)]}]}, 1, "#L4-L6"),
    ({"fileName": {"text": "a"}, "chunks": [{"matchRanges": [rng(4, 2, 5, 1)]}]}, 1, "#L4"),  # to line 4's newline
])
def test_match_count_and_first_match_anchor(f, count, anchor):
    assert match_count(f) == count
    assert first_match_anchor(f) == anchor


# ----------------------------------------------------------------------------- links

@pytest.mark.parametrize("url,expected", [
    ("/browse/x", "/browse/x"),
    ("https://github.com/a/b", "https://github.com/a/b"),
    ("HTTP://example.com/", "HTTP://example.com/"),
    ("//evil.example/x", None),
    ("/\\evil.example/x", None),
    ("javascript:alert(1)", None),
    ("data:text/html,x", None),
    ("https:///nohost", None),
    ("relative/path", None),
    ("", None),
    (None, None),
    (42, None),
])
def test_safe_href(url, expected):
    assert safe_href(url) == expected


@pytest.mark.parametrize("links,web_url,expected", [
    (Links("", "http://cs.example", "q"), "http://cs.example/browse/r@main/-/blob/a.py", "/browse/r@main/-/blob/a.py"),
    (Links("/cs", "http://cs.example/cs", "q"), "http://cs.example/cs/browse/r@main/-/blob/a.py",
     "/cs/browse/r@main/-/blob/a.py"),
    (Links("/cs", "http://other", "q"), "http://cs.example/browse/r@main/-/blob/a", "/cs/browse/r@main/-/blob/a"),
    (Links("", "", "q"), "https://github.com/a/b/blob/main/x", "https://github.com/a/b/blob/main/x"),
    (Links("", "", "q"), "javascript:alert(1)", None),
    (Links("", "", "q"), None, None),
])
def test_links_browse(links, web_url, expected):
    assert links.browse(web_url) == expected


@pytest.mark.parametrize("links,terms", [
    (Links("", "", "a b&c"), "?q=a+b%26c"),
    (Links("", "", "x", regex=True), "?q=x&regex=1"),
    (Links("", "", "x", regex=True, case=True), "?q=x&regex=1&case=1"),
])
def test_links_carry_the_query(links, terms):
    assert links.terms() == terms


def test_repository_names_shown():
    names = RepoNames()
    names.learn([{"name": "git.local/a/demo", "displayName": "demo"}, {"name": "github.com/x/y", "displayName": ""}])
    assert names.label("git.local/a/demo") == "demo" and names.label("github.com/x/y") == "github.com/x/y"
    names.learn([{"name": "git.local/b/demo", "displayName": "demo"}])  # two share "demo": full names
    assert names.label("git.local/a/demo") == "git.local/a/demo" and names.label("unknown") == "unknown"


# ----------------------------------------------------------------------------- one file

HOSTILE = '<script>alert(1)</script>"\'><img src=x onerror=alert(2)>'


def hostile_file(**extra):
    return {
        "repository": f"git.local/{HOSTILE}", "repositoryId": 1, "language": HOSTILE,
        "fileName": {"text": f"dir/{HOSTILE}.py", "matchRanges": [rng(1, 5, 1, 12)]},
        "webUrl": f"http://cs.example/browse/git.local/x@main/-/blob/{HOSTILE}",
        "externalWebUrl": "javascript:alert(3)", "branches": [f"refs/heads/{HOSTILE}"],
        "chunks": [{"content": f"line one {HOSTILE}\nline two", "contentStart": {"lineNumber": 7},
                    "matchRanges": [rng(7, 10, 7, 18)]}],
        "score": 12.5, "order": [1, 0, 3], **extra,
    }


def test_repository_text_is_escaped_everywhere():
    out = render_file(hostile_file(), Links("", "http://cs.example", "q"), RepoNames())
    assert "<script" not in out and "<img" not in out and "javascript:" not in out
    assert "onerror=alert" not in out.replace("onerror=alert(2)&gt;", "")  # only as escaped text
    for tag in re.findall(r"<(\w+)", out):
        assert tag in {"section", "header", "span", "a", "div", "code", "mark"}, tag
    text = html_lib.unescape(re.sub(r"<[^>]+>", "", out))
    assert f"line one {HOSTILE}" in text and "line two" in text


def test_one_file_as_the_page_draws_it():
    f = hostile_file(repository="git.local/demo", language="Python", externalWebUrl="https://github.com/a/b",
                     branches=["refs/heads/main", "refs/tags/v1"])
    names = RepoNames()
    names.learn([{"name": "git.local/demo", "displayName": "demo"}])
    out = render_file(f, Links("/cs", "http://cs.example", "q"), names)
    head = out[: out.index("</header>")]
    assert 'data-score="12.5" data-order="1,0,3" data-matches="2"' in out
    assert '<span class="file-repo" title="git.local/demo">demo</span>' in head
    assert '<span class="badge lang">Python</span>' in head
    assert '<span class="badge rev" title="refs/heads/main, refs/tags/v1">main</span>' in head
    assert '<span class="muted small">2 matches</span>' in head
    assert 'href="https://github.com/a/b"' in head and 'rel="noopener noreferrer"' in head
    lines = re.findall(r'<div class="(cline(?: hit)?)" data-href="([^"]+)"><a class="ln" href="\2">(\d+)</a>', out)
    assert [(c, n) for c, _, n in lines] == [("cline hit", "7"), ("cline", "8")]
    assert lines[0][1].startswith("/cs/browse/git.local/x@main/-/blob/") and lines[0][1].endswith("?q=q#L7")
    assert out.count("<mark>") == 2  # one in the name, one in line 7


# ----------------------------------------------------------------------------- the stream

PAGE = f"<html><body><div id=results>{RESULTS_SLOT}</div>{OUTCOME_SLOT}<p>tail</p></body></html>"


def chunk(*paths, infos=()):
    files = [{"repository": "git.local/demo", "fileName": {"text": p}, "chunks": [], "score": 1, "order": [0, 0, i]}
             for i, p in enumerate(paths)]
    return {"type": "chunk", "files": files, "repositoryInfo": list(infos)}


def test_each_answer_leaves_as_it_arrives_and_leaving_early_stops_the_search():
    async def run():
        release = asyncio.Event()
        closed = []

        async def events():
            try:
                yield chunk("first.py", infos=[{"name": "git.local/demo", "displayName": "demo"}])
                await release.wait()
                yield chunk("second.py")
                yield {"type": "final", "accumulatedStats": {"duration": 5}, "isSearchExhaustive": True}
            finally:
                closed.append(True)

        out = page_stream(PAGE, events(), Links("", "", "q"))
        head = await out.__anext__()
        assert head.endswith("<div id=results>")
        first = await asyncio.wait_for(out.__anext__(), 5)  # before the second answer exists
        assert "first.py" in first and "second.py" not in first
        release.set()
        rest = [part async for part in out]
        assert "second.py" in rest[0] and rest[-1].endswith("<p>tail</p></body></html>")
        outcome = json.loads(re.search(r'id="search-outcome">(.*?)</script>', rest[-1]).group(1))
        assert outcome == {"stats": {"duration": 5}, "exhaustive": True, "hints": [],
                           "repositoryInfo": [{"name": "git.local/demo", "displayName": "demo"}]}
        assert closed == [True]

        closed.clear()
        release.clear()
        out = page_stream(PAGE, events(), Links("", "", "q"))
        await out.__anext__()
        await out.__anext__()
        await out.aclose()  # the browser went away while the search was running
        assert closed == [True]

    asyncio.run(run())


@pytest.mark.parametrize("events,expected", [
    ([{"type": "error", "error": {"statusCode": 400, "message": "bad"}}], {"error": {"statusCode": 400, "message": "bad"}}),
    ([], {"error": {"message": "the search ended early"}}),
    ([{"type": "final", "accumulatedStats": {}, "isSearchExhaustive": False,
       "hints": [{"kind": "x", "message": f"</script>{HOSTILE}"}]}],
     {"stats": {}, "exhaustive": False, "hints": [{"kind": "x", "message": f"</script>{HOSTILE}"}]}),
])
def test_the_outcome_cannot_break_out_of_its_script(events, expected):
    async def run():
        async def gen():
            for e in events:
                yield e

        return "".join([p async for p in page_stream(PAGE, gen(), Links("", "", "q"))])

    page = asyncio.run(run())
    script = re.search(r'<script type="application/json" id="search-outcome">(.*?)</script>', page, re.S).group(1)
    assert "<" not in script and ">" not in script
    assert json.loads(script) == {**expected, "repositoryInfo": []}
    assert page.endswith("<p>tail</p></body></html>")


def test_an_answer_that_cannot_be_drawn_ends_the_search_and_the_page_is_complete():
    async def run():
        closed, abandoned = [], []

        async def events():
            try:
                yield chunk("good.py")
                yield {"type": "chunk", "files": [{"fileName": {"text": "bad.py"},
                                                    "chunks": [{"content": "x", "matchRanges": [{"oops": 1}]}]}],
                       "repositoryInfo": ["not a dict"]}
                yield chunk("never.py")
            finally:
                closed.append(True)

        parts = [p async for p in page_stream(PAGE, events(), Links("", "", "q"), on_close=lambda: abandoned.append(1))]
        return "".join(parts), closed, abandoned

    page, closed, abandoned = asyncio.run(run())
    assert "good.py" in page and "bad.py" not in page and "never.py" not in page
    outcome = json.loads(re.search(r'id="search-outcome">(.*?)</script>', page).group(1))
    assert outcome["error"] == {"message": "some results could not be shown"}
    assert page.endswith("<p>tail</p></body></html>") and closed == [True] and abandoned == [1]


def test_the_first_file_reaches_the_server_loop_before_the_others_are_drawn():
    """Serve's `send` only appends a part to a queue that a task of the replica's event loop reads.
    The page's first file must reach that task on its own, while the rest of the answer is drawn
    (highlighting: up to the page's budget), not together with it: the rest is drawn off the loop."""
    async def run():
        queue, batches, arrived = [], [], asyncio.Event()

        async def shipper():  # what Serve's MessageQueue reader does: take whatever was queued
            while True:
                await arrived.wait()
                arrived.clear()
                batches.append(list(queue))
                queue.clear()

        async def events():
            yield chunk(*(f"f{i:02d}.py" for i in range(40)))
            yield {"type": "final", "accumulatedStats": {}, "isSearchExhaustive": True}

        ship = asyncio.create_task(shipper())
        async for part in page_stream(PAGE, events(), Links("", "", "q")):
            queue.append(part)
            arrived.set()
        await asyncio.sleep(0)
        ship.cancel()
        return batches

    batches = asyncio.run(run())
    files = [set(re.findall(r"f\d\d\.py", "".join(batch))) for batch in batches]
    first = next(i for i, names in enumerate(files) if "f00.py" in names)
    assert files[first] == {"f00.py"}, files  # on its way before the other 39 were drawn
    assert set().union(*files[first + 1 :]) == {f"f{i:02d}.py" for i in range(1, 40)}


def test_the_rest_of_an_answer_leaves_in_slices_and_a_page_left_stops_drawing():
    """After the first file, an answer's files are drawn a few milliseconds' worth at a time
    (`RENDER_SLICE_S`), each slice a part of its own, in the answer's order; a browser that leaves
    (the user searched again) stops the drawing at the next slice, not at the end of the answer."""
    drawn_files = []
    real = results_page.render_file

    def counting(f, *args, **kwargs):
        drawn_files.append(f["fileName"]["text"])
        return real(f, *args, **kwargs)

    async def run(leave_after: int | None):
        async def events():
            yield chunk(*(f"f{i:02d}.py" for i in range(40)))
            yield {"type": "final", "accumulatedStats": {}, "isSearchExhaustive": True}

        parts = []
        out = page_stream(PAGE, events(), Links("", "", "q"))
        async for part in out:
            parts.append(part)
            if leave_after is not None and len(parts) == leave_after:
                await out.aclose()
                break
        return parts

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(results_page, "render_file", counting)
        mp.setattr(results_page, "RENDER_SLICE_S", 0.0)  # one file per slice
        parts = asyncio.run(run(None))
        names = [sorted(set(re.findall(r"f\d\d\.py", p))) for p in parts]
        assert [n for n in names if n] == [[f"f{i:02d}.py"] for i in range(40)]
        drawn_files.clear()
        asyncio.run(run(4))  # the head, the first file, two slices: then the browser leaves
        assert drawn_files == ["f00.py", "f01.py", "f02.py"], drawn_files


@pytest.mark.parametrize("slice_s,files,expected_parts", [
    (0.0, 5, [1, 1, 1, 1, 1]),     # at least one file per slice, however short the slice
    (60.0, 5, [5]),                # a long slice: the whole answer in one part
])
def test_a_slice_draws_files_in_order_then_late_copies(slice_s, files, expected_parts):
    drawn = [(chunk(f"f{i}.py")["files"][0], []) for i in range(files)]
    late = {"h1": [{"repository": "git.local/demo", "fileName": {"text": "copy.py"}}]}
    sizes, left, late_left, html = [], drawn, late, ""
    while left or late_left:
        before = len(left)
        part, left, late_left = results_page._render_slice(left, late_left, Links("", "", "q"), RepoNames(),
                                                           SnippetBudget(), seconds=slice_s)
        sizes.append(before - len(left))
        html += part
    assert sizes[: len(expected_parts)] == expected_parts
    order = list(dict.fromkeys(re.findall(r"f\d\.py", html)))
    assert order == [f"f{i}.py" for i in range(files)] and html.rindex("copy.py") > html.rindex("f4.py")


def test_leaving_before_the_first_answer_still_stops_the_searchers():
    """Closed at its first part, the page stream never started the events generator (whose own
    cleanup then never runs): `on_close` (StartedSearch.abandon) is what stops the searchers."""
    async def run():
        abandoned = []

        async def events():
            yield chunk("a.py")

        out = page_stream(PAGE, events(), Links("", "", "q"), on_close=lambda: abandoned.append(1))
        await out.__anext__()
        await out.aclose()
        return abandoned

    assert asyncio.run(run()) == [1]


@pytest.mark.parametrize("content,texts", [
    ("one\r\ntwo\r\n", ["one", "two", ""]),          # CRLF line ends: no trace of the CR
    ("a\rb\nc", ["a\u240db", "c"]),                   # a lone CR: shown, the line stays one line
])
def test_carriage_returns_do_not_break_lines(content, texts):
    f = {"repository": "r", "fileName": {"text": "f"}, "chunks": [{"content": content, "contentStart": {"lineNumber": 1}}]}
    out = render_file(f, Links("", "", "q"), RepoNames())
    assert "\r" not in out
    assert [html_lib.unescape(t) for t in re.findall(r'<code class="ctext">(.*?)</code>', out)] == texts


# ----------------------------------------------------------------------------- highlighted snippets

from codesearch.web import highlight  # noqa: E402
from codesearch.web.snippets import MAX_CHUNK_CHARS, SnippetBudget, snippet_html  # noqa: E402

SNIPPETS = [  # (path, language, lines of a chunk)
    ("orm/query.py", "Python", ["class QuerySet(object):", '    def filter(self, x="<b>", y=\'&\'):  # QuerySet', ""]),
    ("web/app.js", "JavaScript", ["const qs = new QuerySet(); // <script>", "  return `${qs}`;"]),
    ("lib/q.go", "Go", ["func (q *QuerySet) Filter() {}", "\tvar s = \"QuerySet\""]),
    ("Makefile", "", ["all: QuerySet", "\t@echo QuerySet"]),
]


def same_entities(html: str) -> str:
    """Quotes as one spelling (Pygments leaves them as they are, markupsafe writes entities)."""
    return html.replace("&#34;", '"').replace("&quot;", '"').replace("&#39;", "'")


def strip_tags(html: str) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", "", html))


STYLE_CSS = Path(highlight.__file__).parent / "static" / "style.css"


def coloured_in_style_css() -> set[str]:
    """The token classes the pages' stylesheet gives a rule (read from the file, not from the
    code that writes it)."""
    return set(re.findall(r"\.ctext \.([\w-]+) \{", STYLE_CSS.read_text()))


def seen(html: str, coloured: set[str]) -> str:
    """`html` as it shows: a span none of whose classes the stylesheet colours is left out (its text kept)."""
    return re.sub(r'<span class="([^"]*)">([^<]*)</span>',
                  lambda m: m[0] if coloured.intersection(m[1].split()) else m[2], html)


def test_the_pages_stylesheet_holds_todays_token_colours():
    """`static/style.css` carries the token colours Pygments gives today (`python -m
    codesearch.web.highlight` rewrites them after an upgrade), and only colours a reader sees:
    no rule for whitespace or for the page's own text colour."""
    css = STYLE_CSS.read_text()
    assert highlight.style_css_with_tokens(css) == css, "run: python -m codesearch.web.highlight"
    assert {"k", "nf", "s2", "c1"} <= coloured_in_style_css()
    assert not {"n", "p", "w"} & coloured_in_style_css()
    # the text colour the token rules leave to the page is the page's own (--fg, light then dark)
    assert re.findall(r"--fg: (#[0-9a-f]{6})", css) == [highlight.PAGE_TEXT[highlight.LIGHT_STYLE],
                                                         highlight.PAGE_TEXT[highlight.DARK_STYLE]]


@pytest.mark.parametrize("path,language,lines", SNIPPETS)
def test_snippets_are_highlighted_as_the_file_page_highlights(path, language, lines):
    """Differential against the file page's highlighter: without marks, a snippet's lines show as
    the file page's lines of the same text (entities spelled alike; the snippet leaves out the
    spans the stylesheet does not colour, the file page keeps them for code navigation); with
    marks, the same tokens with each match in a <mark>, the text unchanged."""
    file_page, ok = highlight.highlight_lines(path, language, "\n".join(lines) + "\n")
    assert ok
    coloured = coloured_in_style_css()
    plain = snippet_html(path, language, [[[(line, False)] for line in lines]], SnippetBudget())[0]
    assert [same_entities(str(h)) for h in plain] == [same_entities(seen(h, coloured)) for h in file_page]
    assert not any(seen(str(h), coloured) != str(h) for h in plain)  # no span that shows nothing
    pieces = [marked(line, [(m.start(), m.end()) for m in re.finditer("QuerySet", line)]) for line in lines]
    out = snippet_html(path, language, [pieces], SnippetBudget())[0]
    for line, html in zip(lines, out, strict=True):
        assert strip_tags(str(html)) == line
        assert [strip_tags(m) for m in re.findall(r"<mark>(.*?)</mark>", str(html))] == ["QuerySet"] * line.count("QuerySet")
        assert "<script" not in str(html) and "<b>" not in str(html)
    assert any('<span class="' in str(h) for h in out)


@pytest.mark.parametrize("path,language,lines,budget_s,why", [
    ("a.py", "Python", ["x = 1  # QuerySet"], 0.0, "the page's budget is spent"),
    ("a.unknownext", "", ["x = 1  # QuerySet"], 1.0, "no lexer for the file"),
    ("a.py", "Python", ["\ufeffx = 'QuerySet'"], 1.0, "the lexer would drop a byte order mark"),
    ("a.py", "Python", ["# QuerySet " + "x" * MAX_CHUNK_CHARS], 1.0, "a chunk too big"),
])
def test_snippets_fall_back_to_plain_text_with_marks(path, language, lines, budget_s, why):
    pieces = [marked(line, [(m.start(), m.end()) for m in re.finditer("QuerySet", line)]) for line in lines]
    out = snippet_html(path, language, [pieces], SnippetBudget(budget_s))[0]
    for line, html in zip(lines, out, strict=True):
        assert "<span" not in str(html), why
        assert strip_tags(str(html)) == line and str(html).count("<mark>QuerySet</mark>") == 1, why


def test_the_budget_is_spent_by_the_time_highlighting_takes():
    """Choosing the lexer is charged too (a language's first file imports its lexer)."""
    ticks = iter(range(100))
    budget = SnippetBudget(3.5, clock=lambda: float(next(ticks)))  # the lexer and each chunk "take" one second
    chunks = [[marked("x = 1", [])] for _ in range(5)]
    out = snippet_html("a.py", "Python", chunks, budget)
    assert ["<span" in str(c[0]) for c in out] == [True, True, True, False, False]


def test_a_file_with_more_matches_than_shown_says_so():
    f = hostile_file(repository="git.local/demo", language="Python", moreMatches=41, moreMatchesExact=True)
    out = render_file(f, Links("", "http://cs.example", "q"), RepoNames(), SnippetBudget())
    assert 'data-matches="43"' in out and '<span class="muted small">43 matches</span>' in out
    more = re.search(r'<p class="more-matches" data-expand="([^"]+)" data-more-shown="41"><a href="[^"]+\?q=q#L7">'
                     r"41 more matches in this file</a></p>", out)
    assert more, out  # the link (without JavaScript), and where the script fetches the 41 (at most 200 in all)
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(html_lib.unescape(more.group(1))).query) == {
        "q": ["q"], "repo": ["git.local/demo"], "path": [f"dir/{HOSTILE}.py"], "branch": [f"refs/heads/{HOSTILE}"]}
    assert html_lib.unescape(more.group(1)).startswith("/search/file?")
    big = render_file({**f, "moreMatches": 900}, Links("", "", "q"), RepoNames())
    assert 'data-more-shown="198"' in big  # 2 shown, 198 more: the most a file shows is 200
    out = render_file({**f, "moreMatches": 1000, "moreMatchesExact": False}, Links("", "", "q"), RepoNames())
    assert "1000+ more matches in this file" in out
    assert "more-matches" not in render_file(hostile_file(), Links("", "", "q"), RepoNames())


#: (query, regex, what the narrowed query is, or the error): the page's query ANDed with the file's
#: repository and path, whatever the query's own text (brackets, quotes, backslashes, `or`).
NARROWED = [
    ("QuerySet", False, "QuerySet repo:^git\\.local/demo$ file:^src/a\\x20b\\(1\\)\\.py$"),
    ("a or b", False, "(a or b) repo:^git\\.local/demo$ file:^src/a\\x20b\\(1\\)\\.py$"),
    ("foo(", False, "foo( repo:^git\\.local/demo$ file:^src/a\\x20b\\(1\\)\\.py$"),
    ('"hello', False, '"hello repo:^git\\.local/demo$ file:^src/a\\x20b\\(1\\)\\.py$'),
    ("(foo|bar)baz", True, "(foo|bar)baz repo:^git\\.local/demo$ file:^src/a\\x20b\\(1\\)\\.py$"),
    ("(a or b", False, "InvalidArgument"),  # no way to AND to it without changing its meaning
    ("archived:maybe", False, "QueryParseError"),
]


@pytest.mark.parametrize("query,regex,expected", NARROWED)
def test_a_query_narrowed_to_one_file(query, regex, expected):
    from codesearch.errors import CodesearchError
    from codesearch.query.ast import And, FileName, Repo
    from codesearch.query.parser import parse
    from codesearch.web.more_matches import narrowed_query

    try:
        got = narrowed_query(query, "git.local/demo", "src/a b(1).py", regex, False)
    except CodesearchError as e:
        got = type(e).__name__
    assert got == expected
    if got not in ("InvalidArgument", "QueryParseError"):
        tree = parse(got, is_regex=regex)
        assert isinstance(tree, And) and tree.children[-2:] == (
            Repo("^git\\.local/demo$"), FileName("^src/a\\x20b\\(1\\)\\.py$", False))


def test_a_name_as_a_regex_matches_exactly_that_name():
    from codesearch.query.regex import compile_regex
    from codesearch.web.more_matches import regex_literal

    for name in ["src/a b(1).py", 'we"ird\\name [x]{2}.+*?|^$.txt', "ünï/cödé\u00a0x.go", "a\tb"]:
        rx = compile_regex(regex_literal(name), True)
        assert rx.search(name.encode()) and not rx.search(("x" + name).encode()) and not rx.search((name + "x").encode())
        assert " " not in regex_literal(name) and '"' not in regex_literal(name)


@pytest.mark.parametrize("line,total,size,expected", [
    (1, 0, 4, (1, 0)),        # an empty file
    (1, 3, 4, (1, 3)),        # the whole file fits
    (1, 10, 4, (1, 4)),
    (5, 10, 4, (3, 6)),       # the line in the middle
    (10, 10, 4, (7, 10)),     # near the end: the last lines
    (99, 10, 4, (7, 10)),     # past the end: clamped
    (-3, 10, 4, (1, 4)),
])
def test_the_preview_window(line, total, size, expected):
    from codesearch.web.preview import window

    assert window(line, total, size) == expected
