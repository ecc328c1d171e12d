"""Every screen of the web UI, from a 360 px phone to a wide screen, light and dark, in a real
headless Chromium against the Serve app on 127.0.0.1 (the `tests.webworld` world); and what
every response shares: HTML error pages for browsers (JSON for programs), gzip, the favicon.

- no page is wider than the screen (``document.scrollingElement.scrollWidth``): code, long
  lines and tables scroll or wrap inside their own box;
- on a narrow screen the results come first: the facets are a closed "Filters" bar;
- local repositories are shown by their folder (`codesearch.hosts.generic.local_display_name`);
- results are in the order of ``/api/search`` however the searchers' answers arrive;
- counts read "1 match in 1 file".

Screenshots of every page (390 px and 1400 px, light and dark) go to a temporary directory,
printed at the end of `test_every_page_fits_the_screen` (run with ``-s`` to see it).
"""

from __future__ import annotations

import os
import re
import time
import urllib.parse
import zlib

import httpx
import pytest

from codesearch.web.assets import STATIC_DIR
from codesearch.web.assets import digest
from tests.corpus import make_local_repo
from tests.mcpworld import DEMO, WIDGETS
from tests.webpages import PAGES, SEARCH_DONE, open_page
from tests.webworld import browser, index_stored_repo, signed_in_context, web  # noqa: F401  (pytest fixtures)

WIDTHS = (360, 390, 1400)
#: computed here from the files, not with the service's own cached value
ASSET_VERSION = digest(STATIC_DIR)
SHOT_WIDTHS = (390, 1400)
SCHEMES = ("light", "dark")


@pytest.fixture(scope="module")
def shots_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("screens")


@pytest.fixture
def screen(browser, web):
    """`screen(width, scheme, who)`: a page in a fresh context of that size and colour scheme,
    signed in as `who` ("owner", "member" or None)."""
    contexts = []

    def make(width: int, scheme: str = "light", who: str | None = "owner", height: int = 844):
        ctx, page = signed_in_context(browser, web, web[who] if who else None,
                                      viewport={"width": width, "height": height}, color_scheme=scheme)
        contexts.append(ctx)
        page.set_default_timeout(20_000)
        return page

    yield make
    for c in contexts:
        c.close()


def scroll_width(page) -> int:
    return page.evaluate("() => document.scrollingElement.scrollWidth")


# ----------------------------------------------------------------------------- layouts


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_the_screen(screen, web, shots_dir, width):
    """Each page is opened once per width and looked at in both schemes, switched in place (the
    scheme is CSS alone, ``prefers-color-scheme``: no page reads it at load)."""
    too_wide = []
    for who in dict.fromkeys(p.who for p in PAGES):
        page = screen(width, SCHEMES[0], who)
        for spec in (p for p in PAGES if p.who == who):
            open_page(page, web, spec)
            for scheme in SCHEMES:
                page.emulate_media(color_scheme=scheme)
                if scroll_width(page) > width:
                    too_wide.append((spec.name, scheme, scroll_width(page)))
                if width in SHOT_WIDTHS:
                    page.screenshot(path=str(shots_dir / f"{spec.name}-{width}-{scheme}.png"))
    print(f"\nscreenshots: {shots_dir}")
    assert not too_wide, f"pages wider than {width} px: {too_wide}"


@pytest.mark.parametrize("width,filters_open,results_first", [
    (360, False, True),
    (390, False, True),
    (800, False, True),
    (801, True, False),
    (1400, True, False),
])
def test_results_come_first_on_narrow_screens(screen, web, width, filters_open, results_first):
    """Narrow: a closed "Filters" bar, then the results, the first file within the first
    screen with its header whole. Wide: the facets beside the results."""
    page = screen(width)
    page.goto(web["url"] + "/search?q=handle_request")
    page.wait_for_function(SEARCH_DONE)
    box = page.locator("#filters-box")
    assert box.evaluate("d => d.open") is filters_open
    first = page.locator("#results section.file").first.bounding_box()
    facets = page.locator("#filters").bounding_box()
    assert first["y"] < 844 and first["x"] + first["width"] <= width
    head = page.locator("#results section.file .file-head").first.bounding_box()
    assert head["x"] + head["width"] <= width
    if results_first:
        assert page.locator("#filters-box > summary").is_visible()
        assert facets["y"] < first["y"] and facets["height"] < 80  # a bar above, not a column of facets
        page.locator("#filters-box > summary").click()  # opened by hand: the facets are there
        page.locator(".facet[data-facet=lang][data-value=Python]").click()
        assert "lang=Python" in page.url and "(Python)" in page.inner_text("#filters-box > summary")
    else:
        assert page.locator("#filters-box > summary").is_hidden()
        assert facets["x"] + facets["width"] <= first["x"] and page.locator(".facet").first.is_visible()


@pytest.mark.parametrize("path,box", [
    (f"/browse/{DEMO}@main/-/blob/data/wide.txt", "#code"),  # a 5000-character line
    ("/search?q=%22xxxxxxxxxx%22", "#results .chunk"),
])
def test_long_lines_scroll_inside_their_box(screen, web, path, box):
    page = screen(390)
    page.goto(web["url"] + path)
    page.wait_for_selector(box)
    if "/search" in path:
        page.wait_for_function(SEARCH_DONE)
    inner = page.locator(box).first.evaluate("e => ({scroll: e.scrollWidth, client: e.clientWidth})")
    assert inner["scroll"] > 5000 and inner["client"] <= 390
    assert scroll_width(page) <= 390


@pytest.mark.parametrize("width,stacked", [(390, True), (1400, False)])
def test_tables_are_stacked_on_narrow_screens(screen, web, width, stacked):
    """One block per row, each cell labelled with its column; a table on a wide screen."""
    page = screen(width)
    page.goto(web["url"] + "/repos")
    row = page.locator(f"#repos tr[data-repo='{WIDGETS}']")
    assert (row.evaluate("r => getComputedStyle(r).display") == "block") is stacked
    assert (page.locator("#repos thead").bounding_box()["height"] <= 1) is stacked  # hidden but read
    status = row.locator("td.status-cell")
    assert status.get_attribute("data-label") == "Status"
    label = status.evaluate("c => getComputedStyle(c, '::before').content")
    assert (label == '"Status: "' if stacked else label in ("none", "normal")), label
    # and the home page's tables, filled by its script after the page loaded
    page.goto(web["url"] + "/")
    cell = page.locator(f"#repo-status tr[data-repo='{DEMO}'] td").nth(1)
    cell.wait_for()
    page.wait_for_function("() => document.querySelector('#repo-status td[data-label=Status]')")
    assert cell.get_attribute("data-label") == "Status"


# ----------------------------------------------------------------------------- error pages


@pytest.mark.parametrize("method,path,accept,status,code,kind", [
    # a browser: pages
    ("GET", "/no/such/page", "text/html,application/xhtml+xml,*/*;q=0.8", 404, "NOT_FOUND", "html"),
    ("GET", "/settings/no-such-tab", "text/html", 404, "NOT_FOUND", "html"),
    ("POST", "/repos", "text/html,*/*", 405, "METHOD_NOT_ALLOWED", "html"),
    ("GET", "/settings/keys/1/revoke", "text/html", 405, "METHOD_NOT_ALLOWED", "html"),
    # programs: the JSON of docs/http-api.md#errors
    ("GET", "/no/such/page", "*/*", 404, "NOT_FOUND", "json"),
    ("GET", "/no/such/page", "application/json", 404, "NOT_FOUND", "json"),
    ("POST", "/repos", "application/json", 405, "METHOD_NOT_ALLOWED", "json"),
    # the API's paths: JSON whatever the client accepts
    ("GET", "/api/no/such", "text/html", 404, "NOT_FOUND", "json"),
    ("GET", "/api/search", "text/html", 405, "METHOD_NOT_ALLOWED", "json"),
    ("GET", "/api/repos", "text/html", 401, "NOT_AUTHENTICATED", "json"),
    ("GET", "/oauth/nothing", "text/html", 404, "NOT_FOUND", "json"),
    ("GET", "/.well-known/nothing", "text/html", 404, "NOT_FOUND", "json"),
])
def test_errors_are_pages_for_browsers_and_json_for_programs(web, method, path, accept, status, code, kind):
    r = httpx.request(method, web["url"] + path, headers={"Accept": accept}, timeout=30)
    assert r.status_code == status, r.text[:300]
    if kind == "json":
        assert r.headers["content-type"].startswith("application/json")
        body = r.json()
        assert body["statusCode"] == status and body["errorCode"] == code and body["message"]
    else:
        assert r.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in r.headers["content-security-policy"]
        assert f"Error {status}" in r.text and re.search(r'href="/web/static/v-[0-9a-f]{12}/style.css"', r.text)  # the site's layout
        assert re.search(r"<title>[^<]+ · codesearch</title>", r.text)
        assert "/web" + path.split("?")[0] in r.text and "Traceback" not in r.text
        if status == 405:
            assert "allow" in {k.lower() for k in r.headers}


def test_a_broken_service_answers_500_pages_without_internals(tmp_path):
    """The state database is not a database: pages answer a 500 page, the API its JSON; neither
    says more than that the request failed (the log has the rest)."""
    from codesearch.serving.api import build_app
    from tests.asgiserver import serving

    data = tmp_path / "data"
    data.mkdir()
    (data / "codesearch.db").write_bytes(b"this is not a database " * 100)
    app = build_app(lambda: None, data_dir=str(data), anonymous_access=True, environ={})
    with serving(app) as url:
        page = httpx.get(url + "/repos", headers={"Accept": "text/html"}, timeout=30)
        api = httpx.get(url + "/api/repos", headers={"Accept": "text/html"}, timeout=30)
    assert page.status_code == 500 and page.headers["content-type"].startswith("text/html")
    assert "Something went wrong" in page.text and f"Request id <code>{page.headers['x-request-id']}</code>" in page.text
    assert api.status_code == 500 and api.json() == {"statusCode": 500, "errorCode": "UNEXPECTED_ERROR",
                                                     "message": "an unexpected error occurred"}
    for text in (page.text, api.text):
        assert str(data) not in text and "database" not in text.lower() and "Traceback" not in text


def test_error_page_in_the_browser(screen, web):
    page = screen(390, "dark")
    resp = page.goto(web["url"] + "/no/such/page?x=1")
    assert resp.status == 404
    assert page.title() == "Page not found · codesearch"
    assert page.inner_text("h1") == "Page not found" and "/web/no/such/page" in page.inner_text("main")
    assert page.locator("header.top a.brand").count() == 1
    page.click("main a:text-is('Search')")
    page.wait_for_url(re.compile(r"/web/$"))
    # the path is shown as text, never run
    resp = page.goto(web["url"] + "/no/<img src=x onerror=window.__pwned=1>/<script>window.__pwned=2</script>")
    assert resp.status == 404 and "<img src=x onerror=window.__pwned=1>" in page.inner_text("main")
    assert page.locator("main img").count() == 0 and page.evaluate("() => window.__pwned") is None


# ----------------------------------------------------------------------------- compression


def _get(web, path: str, encoding: str | None = "gzip", **kw) -> httpx.Response:
    headers = {"Accept-Encoding": encoding or "identity", **kw.pop("headers", {})}
    with httpx.Client(timeout=60, cookies=kw.pop("cookies", None)) as c:
        return c.get(web["url"] + path, headers=headers, **kw)


@pytest.fixture(scope="module")
def owner_cookies(web):
    """A signed-in session's cookies (the pages are behind sign-in in this world)."""
    with httpx.Client(timeout=30, base_url=web["url"]) as c:
        page = c.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        r = c.post("/login", data={"email": web["owner"]["email"], "password": web["owner"]["password"],
                                   "csrf_token": token, "next": "/"})
        assert r.status_code in (302, 303), r.text[:300]
        return dict(c.cookies)


@pytest.mark.parametrize("path,content_type,compressed", [
    (f"/browse/{DEMO}@main/-/blob/data/big.txt", "text/html", True),   # a 1200-line file page
    ("/repos", "text/html", True),
    ("/static/style.css", "text/css", True),
    ("/static/search-page.js", "text/javascript", True),
    ("/highlight.css", "text/css", True),
    ("/api/openapi.json", "application/json", True),
    ("/api/health", "application/json", False),                          # too small to gain
    ("/favicon.ico", "image/vnd.microsoft.icon", False),                 # under the minimum size
])
def test_responses_are_gzipped_when_worth_it(web, owner_cookies, path, content_type, compressed):
    plain = _get(web, path, None, cookies=owner_cookies)
    packed = _get(web, path, "gzip, deflate, br", cookies=owner_cookies)
    assert plain.status_code == packed.status_code == 200
    assert packed.headers["content-type"].startswith(content_type)
    assert "content-encoding" not in plain.headers
    assert (packed.headers.get("content-encoding") == "gzip") is compressed
    if compressed:
        assert "Accept-Encoding" in packed.headers.get("vary", "")
        raw = int(packed.num_bytes_downloaded)
        assert packed.content == plain.content  # inflated, the same bytes
        print(f"\n{path}: {len(plain.content):,} bytes, gzip {raw:,} bytes ({raw / len(plain.content):.0%})")
        assert raw < len(plain.content) / 2


def test_streams_are_never_compressed(web):
    """A search stream and an MCP session arrive as they are sent: no gzip, whatever the client accepts."""
    auth = {"Authorization": f"Bearer {web['key']}", "Accept-Encoding": "gzip"}
    with httpx.Client(timeout=60) as c:
        with c.stream("POST", web["url"] + "/api/stream_search", headers={**auth, "Accept": "text/event-stream"},
                      json={"query": "token_ or line", "matches": 5000, "contextLines": 1}) as r:
            assert r.status_code == 200 and "content-encoding" not in r.headers
            assert r.headers["content-type"].startswith("text/event-stream")
            first = next(r.iter_raw())
            assert first.startswith(b"data: {")  # readable as it comes, not a gzip member
        mcp = c.post(web["url"] + "/api/mcp", headers={**auth, "Accept": "application/json, text/event-stream"},
                     json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "screens-test", "version": "1"}}})
        assert mcp.status_code == 200 and "content-encoding" not in mcp.headers
        assert "codesearch" in mcp.text


def test_the_results_page_is_gzipped_part_by_part(web, owner_cookies):
    """The results page is written as the searchers answer: gzipped, each part flushed as it is
    written, so the part before the results inflates on its own, before the rest arrives."""
    with httpx.Client(timeout=60, cookies=owner_cookies) as c:
        with c.stream("GET", web["url"] + "/search?q=handle_request", headers={"Accept-Encoding": "gzip"}) as r:
            assert r.status_code == 200 and r.headers["content-encoding"] == "gzip"
            assert r.headers["content-type"].startswith("text/html") and "content-length" not in r.headers
            inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            parts = [inflate.decompress(raw) for raw in r.iter_raw()]
    first = parts[0].decode()  # what the first read brought inflates whole: up to the results, or further
    assert '<div id="results">' in first and first.rstrip().endswith(('<div id="results">', "</section>", "</html>"))
    page = b"".join(parts).decode()
    assert inflate.eof and page.rstrip().endswith("</html>")
    assert '<section class="file"' in page and "<mark>handle_request</mark>" in page


# ----------------------------------------------------------------------------- favicon


@pytest.mark.parametrize("path,content_type,magic", [
    ("/favicon.ico", "image/vnd.microsoft.icon", b"\x00\x00\x01\x00"),
    ("/static/favicon.svg", "image/svg+xml", b"<svg"),
])
def test_favicon_answers_without_signing_in(web, path, content_type, magic):
    r = httpx.get(web["url"] + path, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith(content_type)
    assert r.content.startswith(magic) and "set-cookie" not in r.headers


def test_pages_link_the_favicon(screen, web):
    page = screen(1400, who=None)
    page.goto(web["url"] + "/login")
    icons = page.eval_on_selector_all("link[rel=icon]", "ls => ls.map(l => [l.getAttribute('href'), l.type])")
    assert icons == [["/web/favicon.ico", ""], [f"/web/static/v-{ASSET_VERSION}/favicon.svg", "image/svg+xml"]]
    for href, _ in icons:
        assert page.request.get(web["serve_url"] + href).ok


# ----------------------------------------------------------------------------- static files cached for good


@pytest.mark.parametrize("version,cache", [
    (ASSET_VERSION, "public, max-age=31536000, immutable"),  # today's files: never asked again
    ("0123456789ab", "no-cache"),                            # a page of an older deploy: today's file, revalidated
    (None, "no-cache"),                                      # the unversioned path: revalidated
])
def test_static_files_cache_policy(web, version, cache):
    path = "/static/" + (f"v-{version}/" if version else "") + "search-page.js"
    r = httpx.get(web["url"] + path, timeout=30)
    assert r.status_code == 200 and r.headers["cache-control"] == cache
    with open(os.path.join(STATIC_DIR, "search-page.js"), "rb") as f:
        assert r.content == f.read()
    again = httpx.get(web["url"] + path, headers={"If-None-Match": r.headers["etag"]}, timeout=30)
    assert again.status_code == 304 and again.headers["cache-control"] == cache


@pytest.mark.parametrize("path", [f"/static/v-{ASSET_VERSION}/nothing.js", f"/static/v-{ASSET_VERSION}/",
                                  f"/static/v-{ASSET_VERSION}/%2e%2e/templates/base.html"])
def test_static_files_answer_only_their_files(web, path):
    assert httpx.get(web["url"] + path, timeout=30).status_code == 404


def test_a_second_visit_loads_no_static_file_from_the_server(screen, web):
    """Every page links today's versioned files; on the next page the browser runs them from its
    cache without a request (transferSize 0: not even a revalidation)."""
    page = screen(1400)
    page.goto(web["url"] + "/search?q=widget")
    page.wait_for_function(SEARCH_DONE)
    links = page.eval_on_selector_all("script[src], link[href]", "ns => ns.map(n => n.src || n.href)")
    statics = [u for u in links if "/static/" in u]
    assert statics and all(f"/web/static/v-{ASSET_VERSION}/" in u for u in statics), statics
    page.goto(web["url"] + "/search?q=gadget")
    page.wait_for_function(SEARCH_DONE)
    entries = page.evaluate("() => performance.getEntriesByType('resource')"
                            ".filter(r => r.name.includes('/static/')).map(r => [r.name, r.transferSize])")
    assert entries and all(size == 0 for _, size in entries), entries


# ----------------------------------------------------------------------------- words and names


@pytest.mark.parametrize("query,summary", [
    ('"def whisper"', r"^1 match in 1 file\b"),
    ("handle_request lang:Python", r"^\d+ matches in 2 files\b"),
])
def test_counts_are_in_words(screen, web, query, summary):
    page = screen(1400)
    page.goto(web["url"] + "/search?" + urllib.parse.urlencode({"q": query}))
    page.wait_for_function(SEARCH_DONE)
    assert re.match(summary, page.inner_text("#summary")), page.inner_text("#summary")


@pytest.fixture(scope="module")
def local_repos(web):
    """Local repositories without an origin, listed by a ``git`` connection over ``file://``
    globs and indexed into the `web` world: ``local/alpha``, ``local/beta``, and a second
    ``alpha`` under ``other/`` (its own connection)."""
    from codesearch.hosts.generic import list_git

    base = os.path.join(os.path.dirname(web["data"]), "src", "folders")
    for rel in ("local/alpha", "local/beta", "other/alpha"):
        make_local_repo(os.path.join(base, rel), {"notes.txt": f"folder_marker in {rel}\n"})
    store, names = web["store"], {}
    for conn, pattern in (("folders", "local/*"), ("others", "other/*")):
        url = f"file://{base}/{pattern}"
        store.upsert_connection(conn, "git", {"type": "git", "url": url})
        listing = list_git(conn, {"type": "git", "url": url}, None)
        ids = store.upsert_repos(conn, listing.repos).ids
        for repo in listing.repos:
            index_stored_repo(web, store.get_repo(ids[repo.name]), repo.local_path)
            names[os.path.relpath(repo.local_path, base)] = repo.name
    web["pool"].refresh(web["index"])
    return names


def test_local_repositories_are_shown_by_their_folder(screen, web, local_repos):
    names = local_repos
    assert names["local/beta"].endswith("/local/beta") and names["local/beta"].startswith(web["data"].strip("/").split("/")[0])
    page = screen(390)
    # The API replicas learn the index version the fixture published by polling the registry
    # (`runtime.published.VersionWatch`), so the new repositories are searchable within a bounded
    # time, not at once: a busy CI machine once drew the page before the replica knew them.
    deadline = time.monotonic() + 30
    while True:
        page.goto(web["url"] + "/search?q=folder_marker")
        page.wait_for_function(SEARCH_DONE)
        if page.locator("#results section.file").count() == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    page.locator("#filters-box > summary").click()
    facets = page.eval_on_selector_all(".facet[data-facet=repo]", "bs => bs.map(b => [b.dataset.value, b.querySelector('.facet-name').textContent])")
    # beta's folder is its own; the two alphas share theirs, so their full names tell them apart
    assert sorted(facets) == sorted([[names["local/beta"], "beta"], [names["local/alpha"], names["local/alpha"]],
                                     [names["other/alpha"], names["other/alpha"]]])
    heads = page.eval_on_selector_all("#results .file-repo", "ss => ss.map(s => [s.title, s.textContent])")
    assert sorted(heads) == sorted(facets)
    page.locator(f".facet[data-facet=repo][data-value='{names['local/beta']}']").click()
    assert page.locator("#results section.file:not([hidden])").count() == 1
    # the repos page, the home page and the file page name them by folder too
    page.goto(web["url"] + "/repos?query=beta")
    assert page.locator(f"#repos tr[data-repo='{names['local/beta']}'] td.repo-name a").inner_text() == "beta"
    page.goto(web["url"] + f"/browse/{names['local/beta']}@main/-/blob/notes.txt")
    assert page.locator(".crumbs a.crumb-repo").inner_text() == "beta"
    assert page.locator(".crumbs a.crumb-repo").get_attribute("title") == names["local/beta"]
    assert page.title() == "notes.txt · beta · codesearch"
    assert scroll_width(page) <= 390


# ----------------------------------------------------------------------------- rank order


@pytest.mark.parametrize("query", ["handle_request", "def", "token_ or shout", "line"])
def test_results_are_in_the_order_of_the_api(screen, web, query):
    """Whichever searcher answers first, the page ends in /api/search's order (rank, then the
    same tie-break), so a result keeps its place from one load to the next."""
    body = {"query": query, "matches": 5000, "contextLines": 1}
    want = httpx.post(web["url"] + "/api/search", json=body, headers={"Authorization": f"Bearer {web['key']}"},
                      timeout=60).json()
    assert want["isSearchExhaustive"] and len(want["files"]) > 1
    expected = [[f["repository"], f["fileName"]["text"]] for f in want["files"]]
    page = screen(1400)
    for _ in range(2):
        page.goto(web["url"] + "/search?" + urllib.parse.urlencode({"q": query, "matches": 5000}))
        page.wait_for_function(SEARCH_DONE)
        shown = page.eval_on_selector_all("#results section.file", "ss => ss.map(s => [s.dataset.repo, s.querySelector('.file-path').textContent])")
        assert shown == expected

