"""The search side of the web UI (codesearch.web.pages_search, static/search-page.js, the file and tree
views, the repos page, /chat/<id>) in a real headless Chromium against the Serve app on 127.0.0.1.

Two worlds:
- `web` (tests.webworld): the tests.mcpworld repos under ``/web``, anonymous access off, plus a
  repo added here whose files hold ``<script>`` and an ``onerror`` file name (`evil`);
- `runtime` (this module): a config with a local ``git`` connection over ``file:///…/*``, the
  real scheduler and workers, anonymous access on, under ``/webrt``; a repo folder added while
  the home page is open shows up there as queued or indexing, then indexed.

Screenshots of the main pages (light and dark) go to tests/output/screenshots/.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.parse

import httpx
import pytest

from tests.audited import audited
from tests.corpus import make_local_repo
from tests.mcpworld import DEMO, WIDGETS
from tests.webworld import browser, index_local_repo, page_for, shot, web  # noqa: F401  (pytest fixtures)

EVIL = "git.local/evil"
EVIL_HTML = "<!doctype html>\n<p>evil_marker_text</p>\n<script>window.__pwned = 1</script>\n"
EVIL_NAME = "x<img src=y onerror=window.__pwned=3>.txt"
EVIL_FILES = {
    "page.html": EVIL_HTML,
    "notes.md": 'evil_marker_text <img src=z onerror="window.__pwned = 2"> and </code></pre><b>bold</b>\n',
    EVIL_NAME: "evil_marker_text in a file with a bad name\n",
}


# ----------------------------------------------------------------------------- without a browser


def test_browse_urls_round_trip():
    from codesearch.index.sources import RepoInfo
    from codesearch.search.present import web_url
    from codesearch.web.pages_search import parse_browse
    from codesearch.markup.urls import browse_url

    for repo, rev, path in ((DEMO, "main", "src/app.py"), ("host/a@b/c", "release/1.0", "a/-/blob/b c#?.py"),
                            (WIDGETS, "refs/tags/v1.0", EVIL_NAME)):
        url = web_url("http://x/root", RepoInfo(name=repo, id=1), rev, path)
        rest = url.split("/browse/", 1)[1]
        assert parse_browse(rest) == (repo, rev.removeprefix("refs/tags/"), "blob", path)
        assert browse_url("/root", repo, rev, "blob", path) == url.removeprefix("http://x")
    assert parse_browse("git.local/demo") == ("git.local/demo", None, "tree", "")
    assert parse_browse("git.local/demo@v1.0/-/tree/src/util/") == ("git.local/demo", "v1.0", "tree", "src/util")


def test_highlighting_escapes_and_keeps_line_numbers():
    from codesearch.web import highlight

    lines, ok = highlight.highlight_lines("a.html", "HTML", "\n<script>alert(1)</script>\n\n")
    assert ok and len(lines) == 3 and lines[0] == "" and lines[2] == ""
    assert "<script" not in lines[1] and "&lt;" in lines[1]
    # a lone CR (a line break for Pygments, not for the index): plain, same numbering as the search results
    lines, ok = highlight.highlight_lines("a.py", "Python", "a = 1\rb = '<b>'\nc\n")
    assert not ok and lines == ["a = 1\rb = &#39;&lt;b&gt;&#39;", "c"]
    big = "".join(f"x{i}\n" for i in range(highlight.MAX_HIGHLIGHT_LINES + 5))
    lines, ok = highlight.highlight_lines("big.py", "Python", big)
    assert not ok and len(lines) == highlight.MAX_SHOWN_LINES
    css = highlight.stylesheet()
    assert "prefers-color-scheme: dark" in css and ".code .k" in css


# ----------------------------------------------------------------------------- fixtures and helpers


@pytest.fixture(scope="module")
def evil(web):
    """A third repo, indexed into the `web` world, whose contents and file names are HTML."""
    root = os.path.join(os.path.dirname(web["data"]), "src", "evil")
    make_local_repo(root, EVIL_FILES)
    subprocess.run(["git", "branch", "release/1.0"], cwd=root, check=True, capture_output=True)
    repo_id = index_local_repo(web, "evil", EVIL, root, "evil")
    web["pool"].refresh(web["index"])
    return {"root": root, "id": repo_id}


#: Legal git ref names that URLs must carry intact: a leading dash (git would read an option), the
#: browse URL's own separators (@, /), what percent-encoding and query strings use (%, #, +, &, =,
#: ;) and text beyond ASCII.
ODD_REFS = ["-dash", "a@b", "x/y", "ünï/cödé", "100%", "a%2Fb", "a#b", "a+b&c=d", "--x/-y", "semi;colon", "v1.0"]
ODD = "git.local/odd-refs"


@pytest.fixture(scope="module")
def odd_refs(web):
    """A repo with one branch per name of `ODD_REFS` (made with update-ref: `git branch` refuses a
    leading dash), each adding ``branch.txt`` with its own marker, all of them indexed."""
    from codesearch.index.builder import IndexSettings, index_source
    from codesearch.index.sources import GitSource
    from codesearch.store.models import INDEXED
    from codesearch.sync import repo_info
    from tests.corpus import git

    root = os.path.join(os.path.dirname(web["data"]), "src", "odd-refs")
    make_local_repo(root, {"README.md": "odd refs\n"})
    for i, name in enumerate(ODD_REFS):
        git(root, "checkout", "-q", "-B", "scratch", "main")
        with open(os.path.join(root, "branch.txt"), "w") as f:
            f.write(f"round_trip_marker_{i:02d} on {name}\n")
        git(root, "add", "branch.txt")
        git(root, "commit", "-q", "-m", f"branch {i}")
        git(root, "update-ref", f"refs/heads/{name}", "HEAD")
    git(root, "checkout", "-q", "main")
    git(root, "branch", "-q", "-D", "scratch")
    store = web["store"]
    store.upsert_connection("odd", "git", {"type": "git", "url": "file://" + root})
    ids = store.upsert_repos("odd", [dict(name=ODD, display_name="odd-refs", code_host_type="genericGitHost",
                                          clone_url="file://" + root, local_path=root, default_branch="main")]).ids
    row = store.get_repo(ids[ODD])
    source = GitSource(root, repo=repo_info(row, row.id), branch_globs=["**"])
    try:
        index_source(source, web["index"], IndexSettings())
        revisions = {r.ref: r.commit for r in source.revisions}
    finally:
        source.close()
    assert set(revisions) == {"refs/heads/main"} | {f"refs/heads/{n}" for n in ODD_REFS}
    store.update_repo_index_status(row.id, INDEXED, revisions=revisions)
    web["pool"].refresh(web["index"])
    # the service's replica learns the new index version by polling it (`VERSION_POLL_S`)
    deadline = time.monotonic() + 30
    while not api_search(web, "round_trip_marker_00 rev:*")["files"] and time.monotonic() < deadline:
        time.sleep(0.1)
    return {"root": root, "id": row.id}


@pytest.fixture
def owner_page(page_for, web):
    return page_for(web["owner"])


def api_search(web, query: str, **body) -> dict:
    """The same search through the JSON API (the owner's API key)."""
    r = httpx.post(web["url"] + "/api/search", json={"query": query, "matches": 100, "contextLines": 1, **body},
                   headers={"Authorization": f"Bearer {web['key']}"}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def search(page, web, query: str, **params) -> None:
    """Open the results page and wait until the stream is finished."""
    q = urllib.parse.urlencode({"q": query, **params})
    page.goto(f"{web['url']}/search?{q}")
    wait_done(page)


def wait_done(page) -> None:
    page.wait_for_function("() => { const s = document.getElementById('summary');"
                           " return s && (s.dataset.exhaustive || !document.getElementById('search-error').hidden); }")


def summary(page) -> str:
    return page.inner_text("#summary")


def in_viewport(page, selector: str) -> bool:
    return page.evaluate("""(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
        return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; }""", selector)


def shots(page, name: str) -> None:
    """A screenshot in light and one in dark mode."""
    page.emulate_media(color_scheme="light")
    shot(page, name)
    page.emulate_media(color_scheme="dark")
    shot(page, f"{name}-dark")
    page.emulate_media(color_scheme="light")


def pwned(page):
    return page.evaluate("() => window.__pwned")


def visible_sections(page) -> list[dict]:
    return page.evaluate("""() => [...document.querySelectorAll('#results section.file')].filter(s => !s.hidden)
        .map(s => ({repo: s.dataset.repo, lang: s.dataset.lang, path: s.querySelector('.file-path').textContent}))""")


# ----------------------------------------------------------------------------- search


def test_search_streams_highlighted_results(owner_page, web):
    page = owner_page
    page.goto(web["url"] + "/")
    page.fill("input[name=q]", "handle_request")
    page.press("input[name=q]", "Enter")
    page.wait_for_url(re.compile(r"/web/search\?q=handle_request"))
    wait_done(page)
    marks = page.locator("#results mark")
    assert marks.count() > 0
    assert {t.lower() for t in marks.all_inner_texts()} == {"handle_request"}
    expected = api_search(web, "handle_request")
    files = {(f["repository"], f["fileName"]["text"]) for f in expected["files"]}
    shown = {(s["repo"], s["path"]) for s in visible_sections(page)}
    assert shown == files and (DEMO, "src/app.py") in shown and (WIDGETS, "src/widget.py") in shown
    n = expected["stats"]["actualMatchCount"]
    assert re.match(rf"^{n} matches in {len(files)} files\b", summary(page)), summary(page)
    assert "(more exist)" not in summary(page) and page.locator("#more").is_hidden()
    # context lines around the match, with line numbers; the match line is marked as a hit
    app = page.locator("section.file", has=page.locator(".file-path", has_text="src/app.py")).first
    assert app.locator(".cline .ln").first.inner_text().isdigit()
    assert app.locator(".cline.hit").count() >= 1 and app.locator(".cline:not(.hit)").count() >= 1
    assert page.locator("input[name=q]").input_value() == "handle_request"
    shots(page, "results")


def test_the_server_writes_the_results_into_the_page(owner_page, web, browser):
    """The results are in the HTML the server sends (written as the searchers answer,
    codesearch/web/results_page.py): the page asks for no stream of its own, runs no inline
    script, and shows its results with JavaScript turned off."""
    page = owner_page
    asked = []
    page.on("request", lambda r: asked.append(r.url) if "/api/" in r.url else None)
    resp = page.goto(web["url"] + "/search?q=handle_request")
    wait_done(page)
    csp = resp.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src" not in csp and "unsafe-inline" not in csp.split("style-src")[0]
    assert not [u for u in asked if "stream_search" in u or "/api/search" in u], asked
    html = resp.text()
    expected = {(f["repository"], f["fileName"]["text"]) for f in api_search(web, "handle_request")["files"]}
    assert html.count('<section class="file"') == len(expected) and "<mark>handle_request</mark>" in html
    assert '<script type="application/json" id="search-outcome">' in html
    assert {(s["repo"], s["path"]) for s in visible_sections(page)} == expected

    plain = browser.new_context(java_script_enabled=False)
    try:
        plain.add_cookies(page.context.cookies())
        bare = plain.new_page()
        bare.goto(web["url"] + "/search?q=handle_request")
        paths = bare.locator("#results section.file .file-path").all_inner_texts()
        assert sorted(paths) == sorted(path for _, path in expected)
        assert bare.locator("#results mark").count() >= len(expected)
    finally:
        plain.close()


def test_a_page_cut_off_on_its_way_says_so(owner_page, web):
    """A results page that stops after some files (a dropped connection, a replica stopping):
    the files shown stay, the page says the search ended early, and the rest of the page (the
    query bar's context list) is told the search is over."""
    page = owner_page
    url = web["url"] + "/search?q=handle_request"
    whole = page.request.get(url).text()
    cut = whole[: whole.index("</section>") + len("</section>")]  # one file, then nothing
    page.route(url, lambda route: route.fulfill(status=200, content_type="text/html; charset=utf-8", body=cut))
    page.goto(url)
    wait_done(page)
    assert "ended early" in page.inner_text("#search-error")
    assert len(visible_sections(page)) == 1
    assert page.evaluate("() => document.body.dataset.searchDone") == "1"
    page.unroute(url)


def test_results_are_shown_in_rank_order(owner_page, web):
    """Searchers answer in any order; the page keeps the files in rank order (each streamed file
    carries its score), so the defining file of an identifier is on top, as in /api/search."""
    query = "handle_request"
    r = httpx.post(web["url"] + "/api/stream_search", json={"query": query, "matches": 100, "contextLines": 1},
                   headers={"Authorization": f"Bearer {web['key']}"}, timeout=60)
    chunks = [json.loads(line[6:]) for line in r.text.split("\n") if line.startswith('data: {"type":"chunk"')]
    assert len(chunks) == 2  # one per searcher
    score = {(f["repository"], f["fileName"]["text"]): f["score"] for c in chunks for f in c["files"]}
    assert len(set(score.values())) > 1, "the query must rank its files differently"
    search(owner_page, web, query)
    shown = [(s["repo"], s["path"]) for s in visible_sections(owner_page)]
    assert sorted(shown) == sorted(score)
    assert [score[k] for k in shown] == sorted((score[k] for k in shown), reverse=True)
    top = api_search(web, query)["files"][0]
    assert score[shown[0]] == score[(top["repository"], top["fileName"]["text"])] == max(score.values())


def test_regex_and_case_toggles_are_in_the_url(owner_page, web):
    page = owner_page
    search(page, web, "handle_req.est")
    assert "No results" in summary(page)  # a literal dot: nothing matches
    page.click("label.toggle:has(input[name=regex])")
    page.wait_for_url(re.compile(r"regex=1"))
    wait_done(page)
    assert page.locator("#results mark").count() > 0
    assert page.locator("input[name=regex]").is_checked()

    search(page, web, "HANDLE_REQUEST")
    assert page.locator("#results mark").count() > 0  # case-insensitive by default
    page.click("label.toggle:has(input[name=case])")
    page.wait_for_url(re.compile(r"case=1"))
    wait_done(page)
    assert "No results" in summary(page)
    assert page.locator("input[name=case]").is_checked()
    # the URL alone reproduces the search (it can be shared)
    url = page.url
    page.goto(url)
    wait_done(page)
    assert "No results" in summary(page) and page.locator("input[name=case]").is_checked()


@pytest.mark.parametrize("link,query,regex,case,marks", [
    # Sourcebot's links: /search?query=…, its flags, its /~/ (single-tenant) prefix
    ("/search?query=handle_request", "handle_request", False, False, True),
    ("/search?query=handle_req.est&isRegexEnabled=true", "handle_req.est", True, False, True),
    ("/search?query=HANDLE_REQUEST&isCaseSensitivityEnabled=true", "HANDLE_REQUEST", False, True, False),
    ("/~/search?query=HANDLE_REQUEST", "HANDLE_REQUEST", False, False, True),
    ("/~/search?query=handle_req.est&isRegexEnabled=true&isCaseSensitivityEnabled=true", "handle_req.est",
     True, True, True),
    # ours keep working
    ("/search?q=handle_req.est&regex=1", "handle_req.est", True, False, True),
    ("/search?q=handle_req.est", "handle_req.est", False, False, False),
])
def test_sourcebot_search_links_open_the_search(owner_page, web, link, query, regex, case, marks):
    page = owner_page
    page.goto(web["url"] + link)
    wait_done(page)
    assert urllib.parse.urlsplit(page.url).path == "/web/search"
    assert page.locator("input[name=q]").input_value() == query
    assert page.locator("input[name=regex]").is_checked() is regex
    assert page.locator("input[name=case]").is_checked() is case
    assert (page.locator("#results mark").count() > 0) is marks, summary(page)


def test_sourcebot_links_keep_their_matches_and_stay_on_this_site(owner_page, web):
    page = owner_page
    page.goto(web["url"] + '/~/search?query=%22alpha+beta%22&matches=5')
    wait_done(page)  # 5 ranges: one file of 80 matches (the page shows 5 of a file's, counts the rest)
    assert re.match(r"^80 matches in 1 file \(more exist\)", summary(page)), summary(page)
    for sneaky in ("/~//evil.example/x", "/~/%2F%2Fevil.example", "/~/\\evil.example"):
        r = httpx.get(web["url"] + sneaky, follow_redirects=False, timeout=30)
        assert r.status_code == 308 and r.headers["location"].startswith("/web/"), (sneaky, r.headers)


def test_bad_query_shows_the_error_inline(owner_page, web):
    page = owner_page
    search(page, web, "archived:maybe")
    err = page.locator("#search-error")
    assert err.is_visible() and "archived" in err.inner_text()


def test_filter_by_language(owner_page, web):
    page = owner_page
    search(page, web, "handle_request")
    langs = {s["lang"] for s in visible_sections(page)}
    assert "Python" in langs and len(langs) > 1
    python = page.locator(".facet[data-facet=lang][data-value=Python]")
    expected_py = sum(1 for s in visible_sections(page) if s["lang"] == "Python")
    assert python.locator(".count").inner_text() == str(expected_py)
    python.click()
    assert {s["lang"] for s in visible_sections(page)} == {"Python"}
    assert len(visible_sections(page)) == expected_py
    assert "lang=Python" in page.url and python.get_attribute("aria-pressed") == "true"
    shot(page, "results-filtered")
    page.reload()  # the filter is in the URL too
    wait_done(page)
    assert {s["lang"] for s in visible_sections(page)} == {"Python"}
    page.locator(".facet[data-facet=lang][data-value=Python]").click()  # off again
    assert len({s["lang"] for s in visible_sections(page)}) > 1 and "lang=" not in page.url
    # by repository
    page.locator(f".facet[data-facet=repo][data-value='{WIDGETS}']").click()
    assert {s["repo"] for s in visible_sections(page)} == {WIDGETS}


def test_load_more_doubles_matches(owner_page, web):
    """`matches` is the budget of the match ranges shown; the page shows 5 of a file's (and counts
    the rest), so doubling it lists twice the files."""
    page = owner_page
    search(page, web, '"alpha beta"', matches=5)  # a phrase: one match per line, 80 lines in each of 12 files
    assert re.match(r"^80 matches in 1 file \(more exist\)", summary(page)), summary(page)
    assert page.locator("#more").is_visible()
    page.click("#load-more")
    page.wait_for_url(re.compile(r"matches=10"))
    wait_done(page)
    assert re.match(r"^160 matches in 2 files \(more exist\)", summary(page)), summary(page)
    assert page.locator("#results .cline.hit").count() == 10


# ----------------------------------------------------------------------------- files, snippets, preview (issue 29)


def test_a_file_with_many_matches_leaves_room_for_other_files(owner_page, web):
    """Issue 29 item 1: each of the 12 files of `"alpha beta"` has 80 matches. The API spends its
    100 on the first files (Sourcebot's `matches`); the page shows 5 of each file's and lists all
    12, each saying how many more it has, linked to the file page."""
    page = owner_page
    api = api_search(web, '"alpha beta"')
    assert [len(f["chunks"][0]["matchRanges"]) for f in api["files"]] == [80, 20]  # unchanged
    search(page, web, '"alpha beta"')
    assert re.match(r"^960 matches in 12 files\b", summary(page)), summary(page)
    assert "(more exist)" not in summary(page) and page.locator("#more").is_hidden()
    sections = page.locator("#results section.file")
    assert sections.count() == 12
    for i in range(12):
        sec = sections.nth(i)
        assert sec.locator(".cline.hit").count() == 5 and sec.get_attribute("data-matches") == "80"
        more = sec.locator(".more-matches button.more-toggle")
        assert more.inner_text() == "Show 75 more matches" and more.get_attribute("aria-expanded") == "false"
    # without JavaScript (and until the page's script runs) each says so as a link to the file page
    html = page.request.get(page.url).text()
    links = re.findall(r'<p class="more-matches" data-expand="[^"]+" data-more-shown="75"><a href="([^"]+)">'
                       r"75 more matches in this file</a></p>", html)
    assert len(links) == 12 and all("/-/blob/data/gen/part_" in href for href in links)


def test_more_matches_show_in_place(owner_page, web):
    """Issue 29 item 1, Sourcebot's "Show N more matches": pressed (here by the keyboard), the
    button fetches the file's other matches and shows them in the same list, marked as the first
    ones, the page staying put; the focus goes to the first match not shown before. "Show fewer
    matches" goes back (the focus stays on it); pressed again, no second request."""
    page = owner_page
    search(page, web, '"alpha beta"')
    url = page.url
    sec = page.locator("#results section.file").first
    first = sec.locator(".cline.hit .ln").all_inner_texts()
    asked = []
    page.on("request", lambda r: asked.append(r.url) if "/search/file?" in r.url else None)
    toggle = sec.locator("button.more-toggle")
    toggle.focus()
    page.keyboard.press("Enter")
    sec.locator(".cline.hit").nth(79).wait_for()
    lines = sec.locator(".cline.hit .ln").all_inner_texts()
    assert lines == [str(n) for n in range(1, 81)] and lines[:5] == first
    assert sec.locator(".cline.hit mark").all_inner_texts() == ["alpha beta"] * 80
    assert toggle.inner_text() == "Show fewer matches" and toggle.get_attribute("aria-expanded") == "true"
    assert page.evaluate("() => [document.activeElement.className, document.activeElement.textContent]") == ["ln", "6"]
    assert "80 matching lines" in sec.locator(".more-matches [role=status]").inner_text()
    assert page.url == url and len(asked) == 1
    assert page.locator("#results section.file").nth(1).locator(".cline.hit").count() == 5  # the others as they were
    open_preview(page, sec.locator("a.file-path").inner_text(), hit=40)  # a revealed line previews like any
    page.keyboard.press("Escape")
    toggle.click()
    assert sec.locator(".cline.hit .ln").all_inner_texts() == first and toggle.inner_text() == "Show 75 more matches"
    assert page.evaluate("() => document.activeElement.classList.contains('more-toggle')")
    toggle.click()
    assert sec.locator(".cline.hit").count() == 80 and len(asked) == 1
    assert audited(web["store"], "search", details={"file": f"{DEMO}:{sec.get_attribute('data-path')}"})


def test_results_are_links_until_the_page_script_runs(owner_page, web):
    """Issue 29: the page's module is loaded `async` and may come late (here held back by the
    test). A click before it runs is not lost: a result's path, its line numbers and "N more
    matches" are plain links to the file page until the script takes them over; then a click
    previews and the button expands. The file page's "Copy path" stays hidden until its script
    can run it."""
    page = owner_page
    held = []
    script = re.compile(r"/search-page\.js$")
    page.route(script, lambda route: held.append(route))

    def held_count(n: int) -> None:  # (Playwright may run a route's handler after `goto` returns)
        deadline = time.monotonic() + 20
        while len(held) < n and time.monotonic() < deadline:
            page.wait_for_timeout(20)
        assert len(held) == n, held

    try:
        page.goto(web["url"] + "/search?q=%22alpha+beta%22", wait_until="domcontentloaded")
        held_count(1)
        assert page.evaluate("() => document.body.dataset.searchDone") is None  # not run
        sec = page.locator("#results section.file").first
        href = sec.locator("a.file-path").get_attribute("href")
        assert sec.locator(".more-matches a").get_attribute("href") == href and sec.locator(".more-toggle").count() == 0
        sec.locator("a.file-path").click()  # as early as it can be: a link, followed
        page.wait_for_url(re.compile(r"/-/blob/data/gen/part_\d\d\.txt\?q="))
        assert page.locator(".code").count() == 1
        page.goto(web["url"] + "/search?q=%22alpha+beta%22", wait_until="domcontentloaded")
        held_count(2)
        held[-1].continue_()  # now the script runs and takes the results over
        page.wait_for_selector("#results .more-toggle")
        page.locator("#results section.file a.file-path").first.click()
        page.wait_for_selector("#preview .line.hl")
        assert "/search?" in page.url
    finally:
        page.unroute(script)
        for route in held[:-1]:  # (the first page's: gone with it)
            try:
                route.abort()
            except Exception:  # noqa: BLE001 - its page was left
                pass
    app = re.compile(r"/app\.js$")
    held.clear()
    page.route(app, lambda route: held.append(route))
    try:
        page.goto(web["url"] + f"/browse/{DEMO}@main/-/blob/src/app.py", wait_until="domcontentloaded")
        held_count(1)
        copy = page.locator("button[data-copy-path]")
        assert copy.count() == 1 and copy.is_hidden()  # nothing to click before it works
        held[-1].continue_()
        copy.wait_for(state="visible")
    finally:
        page.unroute(app)


def test_snippets_are_coloured_by_language_with_their_marks(owner_page, web):
    """Issue 29 item 2: the snippets carry the file page's token classes (`/highlight.css`), the
    matches still in <mark>; text with no lexer stays plain."""
    page = owner_page
    search(page, web, "handle_request")
    widget = page.locator("section.file", has=page.locator(".file-path", has_text="src/widget.py")).first
    assert widget.locator(".cline.hit .ctext .k").first.inner_text() == "def"  # Pygments' keyword class
    assert {t.lower() for t in page.locator("#results mark").all_inner_texts()} == {"handle_request"}
    colour = page.evaluate("() => getComputedStyle(document.querySelector('#results .ctext .k')).color")
    plain = page.evaluate("() => getComputedStyle(document.querySelector('#results .ctext')).color")
    assert colour != plain  # the token colours apply on this page
    search(page, web, '"of the big file"')
    assert page.locator("#results .ctext span").count() == 0 and page.locator("#results mark").count() > 0


#: Records the pointer events of the page (their target, the selection then, whether a handler
#: had cancelled them): what a failed `open_preview` reports.
RECORD_CLICKS = """() => { window.__clicks = [];
  for (const t of ["mousedown", "mouseup", "click"]) document.addEventListener(t, (e) => window.__clicks.push(
    [t, String(e.target.className || e.target.tagName), String(window.getSelection()).slice(0, 40),
     e.defaultPrevented, e.clientX, e.clientY, Math.round(performance.now())]), true); }"""


def open_preview(page, path: str, hit: int = 0):
    """Click the `hit`-th matching line of `path`'s result; the panel's content loaded."""
    sec = page.locator("section.file", has=page.locator(".file-path", has_text=path)).first
    line = sec.locator(".cline.hit").nth(hit)
    n = line.locator(".ln").inner_text()
    page.evaluate(RECORD_CLICKS)
    line.locator(".ctext").click()
    try:
        page.wait_for_selector(f"#preview .preview-body .line.hl[data-n='{n}']")
    except Exception as e:  # (what the page saw of the click, for a failure that is not reproduced at once)
        seen = page.evaluate("() => [window.__clicks, document.getElementById('preview').hidden]")
        raise AssertionError(f"no preview of line {n}: events {seen[0]}, panel hidden {seen[1]}, "
                             f"the line now at {line.locator('.ctext').bounding_box()}") from e
    return sec, int(n)


#: Watches the page frame by frame from its start: whether the context selector was ever shown,
#: the search form's height, and where `#results` was in each frame once it held a result.
WATCH_LAYOUT = """(() => { const seen = window.__layout = {selectorShown: false, formHeights: [], tops: []};
  const frame = () => {
    const select = document.querySelector("select.qb-context");
    if (select && !select.hidden && select.getClientRects().length) seen.selectorShown = true;
    const form = document.querySelector("form.searchform");
    if (form) seen.formHeights.push(form.getBoundingClientRect().height);
    const results = document.getElementById("results");
    if (results && results.querySelector("section.file")) seen.tops.push(results.getBoundingClientRect().top);
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame); })()"""


@pytest.mark.parametrize("width", [360, 1400])
def test_the_results_do_not_move_once_drawn(browser, web, width):
    """Once a result is drawn, nothing above the results changes height: at 360 px the context
    selector has a row of its own under the query bar, and the "Filters" bar is above the results.
    A site without search contexts never shows the selector (it used to be drawn, then taken away
    once the page learnt there were none), and the filters start closed (they used to start open
    and be closed by the page's script): both moved the results under a reader's pointer, by
    131 px at 360 px."""
    from tests.webworld import login

    ctx = browser.new_context(viewport={"width": width, "height": 800})
    try:
        page = ctx.new_page()
        login(page, web, web["owner"])
        page.add_init_script(WATCH_LAYOUT)
        with page.expect_response(re.compile(r"/api/suggest\?kind=context")):
            page.goto(f"{web['url']}/search?q=handle_request")
        wait_done(page)
        page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        none = page.evaluate("() => fetch(document.body.dataset.root + '/api/suggest?kind=context&q=&limit=50')"
                             ".then((r) => r.json())")
        assert none["suggestions"] == []  # this site has none
        seen = page.evaluate("() => window.__layout")
        assert not seen["selectorShown"] and seen["tops"] and len(set(seen["tops"])) == 1, seen
        assert len(set(seen["formHeights"])) == 1, seen  # (the query bar's box as high as the page's)
    finally:
        ctx.close()


def test_a_result_opens_in_the_preview_panel(owner_page, web):
    """Issue 29 item 3: a click previews the file beside the results, scrolled to the line and
    the match marked, the page staying put; Escape closes it and the focus goes back; the keyboard
    opens it; Ctrl-click still opens the file page."""
    page = owner_page
    search(page, web, "handle_request")
    url = page.url
    sec, n = open_preview(page, "src/app.py")
    assert page.url == url and page.locator("#preview").is_visible()
    assert page.inner_text("#preview .preview-path") == "src/app.py"
    hl = page.locator("#preview .line.hl")
    assert hl.locator("mark").all_inner_texts() == ["handle_request"]
    assert hl.locator(".src .k").count() >= 1 or hl.locator(".src span").count() >= 1  # highlighted
    assert page.locator("#preview .line").count() >= 10  # the file, not the snippet
    assert in_viewport(page, "#preview .line.hl")
    assert page.evaluate("() => document.activeElement.id") == "preview-title"
    assert page.locator("#preview .preview-open").get_attribute("href").endswith(f"#L{n}")
    page.keyboard.press("Escape")
    assert page.locator("#preview").is_hidden()
    assert page.evaluate("() => document.activeElement.classList.contains('file-path')")
    # the keyboard: a result's path, focused, Enter
    sec.locator("a.file-path").focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#preview .line.hl")
    assert page.url == url
    page.locator("#preview .preview-close").click()
    assert page.locator("#preview").is_hidden()
    # Ctrl-click is still a link: the file page in a new tab, the results unchanged
    with page.context.expect_page() as opened:
        sec.locator("a.file-path").click(modifiers=["Control"])
    new = opened.value
    # a new tab starts at about:blank, and its first load can be that one: wait for the file's
    new.wait_for_url(lambda u: "/-/blob/src/app.py" in u)
    assert page.url == url and page.locator("#preview").is_hidden()
    new.close()
    assert audited(web["store"], "source.read", f"{DEMO}:src/app.py", details={"preview": True})


@pytest.mark.parametrize("width", [360, 1400])
def test_the_preview_panel_fits_and_passes_the_audit(browser, web, width):
    """At 1400 px the panel sits beside the results, at 360 px it covers them (the page behind it
    inert); axe finds nothing serious with it open and a file's further matches shown ("Show N
    more matches", pressed), in both themes."""
    from tests.a11y import audit, describe
    from tests.webworld import login

    found = {}
    for scheme in ("light", "dark"):
        ctx = browser.new_context(viewport={"width": width, "height": 800}, color_scheme=scheme)
        try:
            page = ctx.new_page()
            page.set_default_timeout(20_000)
            login(page, web, web["owner"])
            search(page, web, 'handle_request or "alpha beta"')
            more = page.locator("section.file", has=page.locator(".file-path", has_text="part_00.txt")).first
            more.locator("button.more-toggle").click()  # a file's further matches shown in place too
            more.locator(".cline.hit").nth(79).wait_for()
            open_preview(page, "src/app.py")
            box = page.locator("#preview").bounding_box()
            results = page.locator(".results-main").bounding_box()
            if width == 360:
                assert box["x"] == 0 and box["width"] == 360
                assert page.evaluate("() => document.querySelector('.results-main').inert")
            else:
                assert box["x"] >= results["x"] + results["width"] and box["width"] > 400
            assert page.evaluate("() => document.documentElement.scrollWidth") <= width
            problems = audit(page)
            if problems:
                found[scheme] = describe(problems)
            page.keyboard.press("Escape")
            assert not page.evaluate("() => document.querySelector('.results-main').inert")
        finally:
            ctx.close()
    assert not found, found


#: The preview route (`?preview` of the file route): path, status, what the answer holds.
PREVIEWS = [
    (f"/browse/{DEMO}@main/-/blob/data/big.txt?preview&line=1100", 200, "line 1100 of the big file"),
    (f"/browse/{DEMO}@main/-/blob/assets/logo.png?preview", 200, "Binary file"),
    (f"/browse/{DEMO}@main/-/blob/no/such.txt?preview", 404, "Not found"),
    ("/browse/git.local/no-such-repo@main/-/blob/a.txt?preview", 404, "Not found"),
]


def test_the_preview_route_is_bounded_and_the_file_routes_own(owner_page, web):
    """The preview is the file route's (`?preview`): the same sign-in, the same 404s (hidden
    repositories too: tests/permissions/test_permission_leaks.py), at most PREVIEW_LINES lines."""
    from codesearch.web.preview import PREVIEW_LINES

    for path, status, holds in PREVIEWS:
        signed_out = httpx.get(web["url"] + path, timeout=60, follow_redirects=False)
        assert signed_out.status_code in (302, 303, 307) and "/login" in signed_out.headers["location"], path
        r = owner_page.request.get(web["url"] + path)
        text = r.text()
        assert r.status == status and holds in text, (path, r.status, text[:300])
        if status == 200:
            lines = re.findall(r'<div class="line" data-n="(\d+)"', text)
            assert len(lines) <= PREVIEW_LINES and "<html" not in text, path
            assert not lines or (lines[0], lines[-1]) == ("1", "1200"), path


#: The further matches of one file (`GET /search/file`, codesearch/web/more_matches.py): the query,
#: the status, the match lines sent and what the answer holds.
GEN = f"{DEMO}&path=data/gen/part_03.txt"
MORE_MATCHES = [
    (f'q=%22alpha+beta%22&repo={GEN}', 200, 80, "token_03_079"),
    (f'q=%22big+file%22&repo={DEMO}&path=data/big.txt', 200, 0, "+ more matches in this file"),  # 1,200: bounded
    (f"q=%5Cw%2B&regex=1&repo={DEMO}&path=src/app.py", 200, 0, '<span class="k">def</span>'),  # highlighted
    (f'q=%22alpha+beta%22&repo={DEMO}&path=src/app.py', 404, 0, "no matches in that file"),
    ('q=%22alpha+beta%22&repo=git.local/no-such&path=data/gen/part_03.txt', 404, 0, "no matches in that file"),
    (f"q=%28alpha+or+beta&repo={GEN}", 400, 0, "cannot be narrowed to one file"),
    (f"q=archived%3Amaybe&repo={GEN}", 400, 0, "archived"),
    (f"repo={GEN}", 400, 0, "Field required"),
    (f"q=alpha&repo={DEMO}&path=" + "x" * 5000, 400, 0, "at most 4096 characters"),
]


def test_a_files_further_matches_are_the_pages_search_narrowed_and_bounded(owner_page, web):
    """The route is a page's (signed out: the sign-in page), runs the page's search as the caller
    narrowed to the file (a repository the caller may not see answers as a missing one:
    tests/permissions/test_permission_leaks.py), sends at most 200 match ranges, highlighted as
    the page's, and says what is wrong with a bad request."""
    from codesearch.web.results_page import EXPANDED_FILE_MATCHES

    for query, status, lines, holds in MORE_MATCHES:
        path = "/search/file?" + query
        signed_out = httpx.get(web["url"] + path, timeout=60, follow_redirects=False)
        if holds in ("Field required", "at most 4096 characters"):  # a malformed request: 400 first, as every page
            assert signed_out.status_code == 400, path
        else:
            assert signed_out.status_code in (302, 303, 307) and "/login" in signed_out.headers["location"], path
        r = owner_page.request.get(web["url"] + path, headers={"Accept": "text/html"})
        text = r.text()
        assert r.status == status and holds in text, (query, r.status, text[:400])
        if status == 200:
            assert text.startswith("<section class=\"file\"") and "<html" not in text
            hits = len(re.findall(r'<div class="cline hit"', text))
            assert text.count("<mark>") <= EXPANDED_FILE_MATCHES and (not lines or hits == lines), (query, hits)
            assert hits > 5, query  # more than the page showed


#: Every page names what it shows in its <title>.
TITLES = [
    ("/search?q=handle_request", "handle_request · codesearch"),
    (f"/browse/{DEMO}@main/-/blob/src/util/strings.py", "src/util/strings.py · demo · codesearch"),
    (f"/browse/{DEMO}@main/-/tree/src/util", "src/util · demo · codesearch"),
    (f"/browse/{DEMO}@main/-/blob/src/util/strings.py?blame", f"Blame · src/util/strings.py · {DEMO} · codesearch"),
    (f"/browse/{DEMO}@main/-/commits/src/util", f"History · src/util · {DEMO} · codesearch"),
]


def test_every_page_is_titled_by_what_it_shows(owner_page, web):
    got = {}
    for path, _ in TITLES:
        owner_page.goto(web["url"] + path)
        got[path] = owner_page.title()
    assert got == dict(TITLES)


# ----------------------------------------------------------------------------- file and tree views


def test_open_a_result_lands_on_the_highlighted_line(owner_page, web):
    page = owner_page
    search(page, web, '"line 1100 of"')
    page.locator("#results .cline.hit").first.click()  # the preview panel (test_web_results_preview)…
    page.locator("#preview .preview-open").click()  # …links to the file page
    page.wait_for_url(re.compile(r"/web/browse/git\.local/demo@main/-/blob/data/big\.txt\?q=[^#]*#L1100$"))
    page.wait_for_selector("#L1100.hl")
    assert page.locator(".line.hl").count() == 1
    assert "line 1100 of the big file" in page.inner_text("#L1100")
    assert in_viewport(page, "#L1100")

    # a Python result: highlighted by Pygments, line numbers, a link to the host
    search(page, web, "handle_request", lang="Python")
    section = page.locator("section.file", has=page.locator(".file-path", has_text="src/widget.py")).first
    page.goto(web["serve_url"] + section.locator(".file-path").get_attribute("href"))  # (a click previews it)
    page.wait_for_url(re.compile(r"/web/browse/github\.com/acme/widgets@main/-/blob/src/widget\.py\?q=[^#]*#L4$"))
    assert page.locator("#L4.hl").count() == 1 and in_viewport(page, "#L4")
    assert page.locator("#L4 .src .k").first.inner_text() == "def"  # token classes from Pygments
    assert page.locator("#L4 a.ln").get_attribute("data-n") == "4"
    assert page.get_attribute("a.button-link[target=_blank]", "href") == f"https://{WIDGETS}/blob/main/src/widget.py"
    shots(page, "file")

    # ranges and ?line=
    page.goto(f"{web['url']}/browse/{DEMO}@main/-/blob/data/big.txt#L600-L603")
    page.wait_for_selector("#L600.hl")
    assert page.locator(".line.hl").count() == 4 and in_viewport(page, "#L601")
    page.goto(f"{web['url']}/browse/{DEMO}@main/-/blob/data/big.txt?line=900")
    page.wait_for_selector("#L900.hl")
    assert in_viewport(page, "#L900")
    # a match over two lines: both highlighted
    search(page, web, r"Widget:\n\s+def", regex=1)
    link = page.locator("section.file .file-path").first
    assert link.get_attribute("href").endswith("/src/widget.py?q=Widget%3A%5Cn%5Cs%2Bdef&regex=1#L3-L4")
    page.goto(web["serve_url"] + link.get_attribute("href"))
    page.wait_for_selector("#L3.hl")
    assert page.locator(".line.hl").count() == 2 and page.locator("#L4.hl").count() == 1
    # a binary file says so
    page.goto(f"{web['url']}/browse/{DEMO}@main/-/blob/assets/logo.png")
    assert "Binary file" in page.inner_text("main") and page.locator("#code").count() == 0
    # a tag and a file that only exists there
    page.goto(f"{web['url']}/browse/{DEMO}@v1.0/-/blob/docs/guide.md")
    assert "Guide: start the Server" in page.inner_text("#code")


def test_tree_view_lists_directories_first(owner_page, web):
    page = owner_page
    page.goto(f"{web['url']}/browse/{DEMO}")
    rows = page.locator("#tree tr.entry")
    kinds = [c.split()[-1] for c in (rows.nth(i).get_attribute("class") for i in range(rows.count()))]
    names = rows.all_inner_texts()
    assert kinds == sorted(kinds)  # "is-dir" < "is-file": every directory before every file
    assert [n.strip() for n in names] == ["assets/", "data/", "src/", "README.md"]
    shots(page, "tree")
    page.click("#tree a:text-is('src/')")
    page.wait_for_url(re.compile(r"/-/tree/src$"))
    assert [n.strip() for n in page.locator("#tree tr.entry").all_inner_texts()] == ["..", "util/", "app.py", "new.py"]
    page.click("#tree a:text-is('app.py')")
    page.wait_for_url(re.compile(r"/web/browse/git\.local/demo@main/-/blob/src/app\.py$"))
    assert "class Server" in page.inner_text("#code")
    page.click(".crumbs a:text-is('src')")
    page.wait_for_url(re.compile(r"/-/tree/src$"))
    # unknown repos, files and refs are 404 pages
    for path in ("/browse/github.com/nobody/nothing", f"/browse/{DEMO}@main/-/blob/no/such.py",
                 f"/browse/{DEMO}@no-such-branch/-/tree/"):
        resp = page.goto(web["url"] + path)
        assert resp.status == 404 and "Not found" in page.inner_text("main")


def test_repository_text_is_never_run(owner_page, web, evil):
    page = owner_page
    resp = page.goto(f"{web['url']}/browse/{EVIL}@main/-/blob/page.html")
    assert "script-src" not in resp.headers["content-security-policy"] and "default-src 'self'" in \
        resp.headers["content-security-policy"]
    assert "<script>window.__pwned = 1</script>" in page.inner_text("#code")
    assert pwned(page) is None
    shot(page, "file-script")
    page.goto(f"{web['url']}/browse/{EVIL}@main/-/blob/notes.md")
    assert '<img src=z onerror="window.__pwned = 2">' in page.inner_text("#code") and pwned(page) is None
    page.goto(f"{web['url']}/browse/{EVIL}")
    assert EVIL_NAME in page.inner_text("#tree") and page.locator("#tree img").count() == 0
    page.click(f"#tree a:text-is('{EVIL_NAME}')")
    page.wait_for_selector("#code")
    assert "bad name" in page.inner_text("#code") and pwned(page) is None

    search(page, web, "evil_marker_text or __pwned")
    texts = page.inner_text("#results")
    assert "<script>window.__pwned = 1</script>" in texts and EVIL_NAME in texts
    assert '<img src=z onerror="window.__pwned = 2">' in texts
    assert page.locator("#results img, #results script, #results b").count() == 0
    assert pwned(page) is None
    shot(page, "results-script")


def test_branches_with_slashes_and_odd_paths(owner_page, web, evil):
    page = owner_page
    resp = page.goto(f"{web['url']}/browse/{EVIL}@release%2F1.0/-/tree/")
    assert resp.status == 200 and page.inner_text(".filemeta .rev") == "release/1.0"
    link = page.locator(f"#tree a:text-is('{EVIL_NAME}')")
    assert "/browse/git.local/evil@release%2F1.0/-/blob/x%3Cimg%20src%3Dy" in link.get_attribute("href")
    link.click()
    page.wait_for_selector("#code")
    assert page.inner_text(".crumbs .crumb-file") == EVIL_NAME and "bad name" in page.inner_text("#code")
    page.click(".crumbs a.crumb-repo")
    page.wait_for_url(re.compile(r"/browse/git\.local/evil@release%2F1\.0/-/tree/$"))
    # the repo's page (the webUrl of GET /api/repos) is its tree at the default branch
    page.goto(f"{web['url']}/browse/{EVIL}")
    assert page.inner_text(".filemeta .rev") == "main"


@pytest.mark.parametrize("i,name", list(enumerate(ODD_REFS)))
def test_the_web_url_of_every_legal_ref_name_opens(owner_page, web, odd_refs, i, name):
    """The webUrl of a search result on branch `name` opens that file at that branch, and the
    page's links (the repo crumb, then the file again) keep the branch."""
    answer = api_search(web, f"round_trip_marker_{i:02d} rev:*")
    files = answer["files"]
    assert [(f["repository"], f["fileName"]["text"], f["branches"]) for f in files] == [
        (ODD, "branch.txt", [f"refs/heads/{name}"])], answer["stats"]
    url = files[0]["webUrl"]
    assert url.startswith(web["url"] + "/browse/") and url.endswith("/-/blob/branch.txt")
    page = owner_page
    resp = page.goto(url)
    assert resp.status == 200, page.inner_text("main")
    assert page.inner_text(".filemeta .rev") == name
    assert page.inner_text("#code").strip() == f"round_trip_marker_{i:02d} on {name}"
    page.click(".crumbs a.crumb-repo")
    page.wait_for_selector("#tree")
    assert page.inner_text(".filemeta .rev") == name
    page.locator("#tree a:text-is('branch.txt')").click()
    page.wait_for_selector("#code")
    assert page.url == url and f"round_trip_marker_{i:02d}" in page.inner_text("#code")


# ----------------------------------------------------------------------------- repos, access, chat


def test_repos_page_and_reindex_for_owners(page_for, web):
    member = page_for(web["member"])
    member.goto(web["url"] + "/repos")
    assert member.locator(f"#repos tr[data-repo='{DEMO}']").count() == 1
    assert member.locator("form.reindex").count() == 0
    status = member.evaluate("""async (url) => {
        const {apiFetch} = await import(document.body.dataset.root + '/static/http.js');
        return (await apiFetch(url, {method: 'POST'})).status; }""", f"{web['url']}/api/repos/{web['ids'][DEMO]}/reindex")
    assert status == 403

    page = page_for(web["owner"])
    page.goto(web["url"] + "/repos")
    row = page.locator(f"#repos tr[data-repo='{WIDGETS}']")
    assert row.locator(".badge.INDEXED").count() == 1 and "main" in row.inner_text()
    assert row.locator("a[target=_blank]").get_attribute("href") == f"https://{WIDGETS}"
    shots(page, "repos")
    store = web["store"]
    before = {j.id for j in store.list_jobs(kind="index")}
    row.locator("form.reindex button").click()
    row.locator(".badge.PENDING").wait_for()
    jobs = [j for j in store.list_jobs(kind="index") if j.id not in before]
    assert [(j.repo_id, j.state) for j in jobs] == [(web["ids"][WIDGETS], "PENDING")]
    r = httpx.post(f"{web['url']}/api/repos/999999/reindex", headers={"Authorization": f"Bearer {web['key']}"}, timeout=30)
    assert r.status_code == 404 and r.json()["errorCode"] == "REPOSITORY_NOT_FOUND"
    # search by name, paging
    page.goto(web["url"] + "/repos?query=widg")
    assert page.locator("#repos tbody tr[data-repo]").count() == 1
    page.goto(web["url"] + "/repos?query=no-such-repo")
    assert "No repository matches" in page.inner_text("#repos")


def test_visitors_are_sent_to_sign_in(page_for, web):
    page = page_for(None)
    for path in ("/", "/search?q=handle_request", f"/browse/{DEMO}@main/-/blob/src/app.py", "/repos"):
        page.goto(web["url"] + path)
        assert urllib.parse.urlparse(page.url).path == "/web/login", page.url
        nxt = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)["next"][0]
        assert nxt == "/web" + path


def test_home_shows_the_sync_state_and_slash_focuses_search(owner_page, web):
    page = owner_page
    page.goto(web["url"] + "/")
    page.wait_for_selector(f"#repo-status tr[data-repo='{DEMO}'][data-status=INDEXED]")
    assert page.locator("#connections tr[data-connection=local]").count() == 1
    assert "never synced" in page.inner_text("#connections")
    page.click("h1")
    page.keyboard.press("/")
    assert page.evaluate("() => document.activeElement.name") == "q"
    page.locator("details.syntax summary").click()
    assert "repo:" in page.inner_text("details.syntax")
    shots(page, "home")


def test_chat_page_uses_the_layout_and_its_access_rules(page_for, web):
    store = web["store"]
    answer = ("Here: <script>window.__pwned = 1</script>\n\n```python\ndef handle_request(): ...\n```\n\n"
              "| file | line |\n|---|---|\n| app.py | 3 |\n\n![leak](http://127.0.0.1:9/leak.png) [run](javascript:x())")
    chat = store.create_chat("Where is <b>handle_request</b>?", answer,
                             user_id=web["owner"]["id"], visibility="PRIVATE",
                             model={"provider": "openai-compatible", "model": "m1", "displayName": "Model One"},
                             steps=[{"tool": "grep", "arguments": {"pattern": "<i>x</i>"}, "output": "<img src=q>",
                                     "is_error": False}])
    page = page_for(web["owner"])
    resp = page.goto(f"{web['url']}/chat/{chat.id}")
    assert resp.status == 200
    assert page.inner_text("h1") == "Where is <b>handle_request</b>?"
    assert "<script>window.__pwned = 1</script>" in page.inner_text(".answer") and pwned(page) is None
    # the answer's Markdown is rendered: code and tables, but no image fetched and no javascript: link
    assert page.inner_text(".answer pre code") == "def handle_request(): ...\n"
    assert page.locator(".answer table td").all_inner_texts() == ["app.py", "3"]
    assert page.locator("main img").count() == 0 and page.locator(".answer a[href^='javascript']").count() == 0
    assert page.locator("header.top a.brand").count() == 1  # the site's layout
    page.locator(".steps summary").click()
    assert "<img src=q>" in page.inner_text(".steps") and page.locator("main img").count() == 0
    shot(page, "chat")
    assert page_for(web["member"]).goto(f"{web['url']}/chat/{chat.id}").status == 404
    assert httpx.get(f"{web['url']}/chat/{chat.id}", timeout=30).status_code == 404


# ----------------------------------------------------------------------------- the runtime: a new repo on the home page

SETTINGS = {"resyncConnectionIntervalMs": 1000, "reindexIntervalMs": 3600000,
            "resyncConnectionPollingIntervalMs": 200, "reindexRepoPollingIntervalMs": 200,
            "maxConnectionSyncJobConcurrency": 1, "maxRepoIndexingJobConcurrency": 1}
RT_PREFIX = "web-rt-searcher"


@pytest.fixture(scope="module")
def runtime(serve_url, tmp_path_factory):
    """A data directory synced and indexed by the real scheduler and workers, served under /webrt."""
    import ray
    from ray import serve

    from codesearch.config import load_config
    from codesearch.runtime.scheduler import start_scheduler
    from codesearch.runtime.searchers import SearcherPool
    from codesearch.runtime.workers import RuntimeOptions, start_workers, stop_workers
    from codesearch.serving.deployment import search_application
    from codesearch.store import Store

    base = str(tmp_path_factory.mktemp("webrt"))
    data, local = os.path.join(base, "data"), os.path.join(base, "local")
    make_local_repo(os.path.join(local, "alpha"), {"alpha.py": "def alpha_marker():\n    return 1\n"})
    config = os.path.join(base, "config.json")
    with open(config, "w") as f:
        json.dump({"settings": SETTINGS, "connections": {"local": {"type": "git", "url": f"file://{local}/*"}}}, f)
    # slow indexers: a new repo stays queued/indexing for a few seconds, long enough to be seen
    options = RuntimeOptions(poll_s=0.1, heartbeat_s=0.2, stale_s=5.0, store_options={"retry_base_seconds": 0.2},
                             index_delay_s=3.0)
    store = Store.open(data)
    os.makedirs(os.path.join(data, "index"), exist_ok=True)
    scheduler = workers = pool = None
    try:
        scheduler = start_scheduler(config, data, options)
        workers = start_workers(data, load_config(config).settings, options)
        pool = SearcherPool.create(os.path.join(data, "index"), 1, keep_empty=True, name_prefix=RT_PREFIX)
        ray.get(scheduler.set_searchers.remote(RT_PREFIX, 1))
        serve.run(search_application(RT_PREFIX, 1, anonymous_access=True, data_dir=data,
                                     public_url=f"{serve_url}/webrt"), name="web-rt", route_prefix="/webrt")
        yield {"url": f"{serve_url}/webrt", "local": local, "store": store}
    finally:
        try:
            serve.delete("web-rt")
        except Exception:
            pass
        if scheduler is not None:
            ray.get(scheduler.shutdown.remote(), timeout=15)
            ray.kill(scheduler)
        if workers:
            stop_workers(workers)
        if pool is not None:
            pool.close()
        store.close()


def test_a_new_repo_goes_from_queued_to_indexed_on_the_home_page(browser, runtime):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = ctx.new_page()
        page.set_default_timeout(60_000)
        page.goto(runtime["url"] + "/")  # anonymous access is on here: no sign-in
        page.wait_for_selector("#repo-status tr[data-repo*=alpha][data-status=INDEXED]")
        page.wait_for_selector("#connections tr[data-connection=local][data-status=SYNCED]")
        make_local_repo(os.path.join(runtime["local"], "gamma"), {"gamma.py": "def gamma_marker():\n    return 3\n"})
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = page.evaluate("() => { const r = document.querySelector('#repo-status tr[data-repo*=gamma]');"
                                   " return r ? r.dataset.status : null; }")
            if status and (not seen or seen[-1] != status):
                seen.append(status)
                if status in ("PENDING", "INDEXING"):
                    shot(page, "home-runtime-indexing")
            if status == "INDEXED":
                break
            time.sleep(0.1)
        assert seen and seen[-1] == "INDEXED", seen
        assert set(seen[:-1]) & {"NEW", "PENDING", "INDEXING"}, seen  # not indexed at first
        row = page.locator("#repo-status tr[data-repo*=gamma]")
        assert "indexed" in row.inner_text() and "main" in row.inner_text()
        page.wait_for_function("() => !document.querySelector('#jobs tbody tr[data-job]')")  # the queue drained
        shots(page, "home-runtime")
        # and the new repo is searchable (once the scheduler has refreshed the searchers)
        deadline = time.monotonic() + 30
        while True:
            page.goto(runtime["url"] + "/search?q=gamma_marker")
            wait_done(page)
            if page.locator("#results mark").count() or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert page.locator("#results mark").first.inner_text() == "gamma_marker"
    finally:
        ctx.close()
