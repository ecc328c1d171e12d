"""Copies folded on the results page as the server writes it (codesearch/web/result_copies.py): per
answer, the first file of a content is drawn with its copies of the same answer in a disclosure;
copies of a content drawn by an earlier answer come as a disclosure of their own, naming it."""

from __future__ import annotations

import asyncio
import html as html_lib
import re

import pytest

from codesearch.web.result_copies import CopyFolder
from codesearch.web.results_page import OUTCOME_SLOT, RESULTS_SLOT, Links, page_stream

PAGE = f"<html><body><div id=results>{RESULTS_SLOT}</div>{OUTCOME_SLOT}</body></html>"
HOSTILE = '<script>alert(1)</script>"\'><img src=x onerror=alert(2)>'


def f(repo: str, path: str, content: str | None) -> dict:
    out = {"repository": repo, "repositoryId": 1, "fileName": {"text": path}, "chunks": [], "score": 1,
           "order": [0, 0, 0], "webUrl": f"http://cs.example/browse/{repo}@main/-/blob/{path}"}
    if content:
        out["contentHash"] = content
    return out


@pytest.mark.parametrize("answers, drawn, late", [
    # no content hash (an older shard): never folded
    ([[f("a", "x", None), f("b", "x", None)]], [[("a", "x", []), ("b", "x", [])]], [{}]),
    # the same answer: the first file of a content, its copies inside it
    ([[f("a", "u", "1"), f("b", "v", "2"), f("c", "u", "1"), f("d", "w", "1")]],
     [[("a", "u", [("c", "u"), ("d", "w")]), ("b", "v", [])]], [{}]),
    # a later answer: its copies of contents drawn before stand alone; its new contents are drawn
    ([[f("a", "u", "1")], [f("b", "u", "1"), f("c", "z", "3"), f("d", "u", "1"), f("e", "z", "3")]],
     [[("a", "u", [])], [("c", "z", [("e", "z")])]], [{}, {"1": [("b", "u"), ("d", "u")]}]),
])
def test_fold_table(answers, drawn, late):
    folder = CopyFolder()
    for answer, want_drawn, want_late in zip(answers, drawn, late, strict=True):
        got_drawn, got_late = folder.fold(answer)
        assert [(x["repository"], x["fileName"]["text"], [(c["repository"], c["fileName"]["text"]) for c in cs])
                for x, cs in got_drawn] == want_drawn
        assert {h: [(c["repository"], c["fileName"]["text"]) for c in cs] for h, cs in got_late.items()} == want_late


def render(answers: list[list[dict]]) -> str:
    async def events():
        for files in answers:
            yield {"type": "chunk", "files": files, "repositoryInfo": []}
        yield {"type": "final", "accumulatedStats": {}, "isSearchExhaustive": True}

    async def run() -> str:
        return "".join([part async for part in page_stream(PAGE, events(), Links("/cs", "http://cs.example", "q"))])

    return asyncio.run(run())


def test_the_page_draws_a_content_once_with_its_copies_behind_a_disclosure():
    out = render([[f("git.local/a", "u.py", "1"), f("git.local/b", "u.py", "1"), f("git.local/b", "v.py", "1")],
                  [f("git.local/c", "u.py", "1")]])
    sections = re.findall(r"<section class=\"file\".*?</section>", out, re.S)
    assert len(sections) == 1 and 'data-content="1"' in sections[0]
    inside = re.search(r"<details class=\"copies\">.*?</details>", sections[0], re.S).group(0)
    assert "also in <span class=\"copies-count\">1 repository</span>" in inside
    assert re.findall(r'<a class="copy-path" href="([^"]+)">([^<]+)</a>', inside) == [
        ("/cs/browse/git.local/b@main/-/blob/u.py?q=q", "u.py"), ("/cs/browse/git.local/b@main/-/blob/v.py?q=q", "v.py")]
    late = out[out.index("</section>"):]
    assert '<details class="copies" data-copy-of="1">' in late and "git.local/c" in late


def test_copies_escape_repository_text():
    out = render([[f("git.local/a", "u.py", "1"), f(f"git.local/{HOSTILE}", f"{HOSTILE}.py", "1")],
                  [f(f"git.local/{HOSTILE}", "late.py", HOSTILE)], [f("x", "y", HOSTILE)]])
    assert "<img" not in out
    for tag in re.findall(r"<(\w+)", out):
        assert tag in {"html", "body", "div", "section", "header", "span", "a", "code", "mark", "details", "summary",
                       "ul", "li", "script"}, tag
    assert out.count("<script") == 1  # the outcome's JSON only
    assert f"{HOSTILE}.py" in html_lib.unescape(re.sub(r"<[^>]+>", "", out))
