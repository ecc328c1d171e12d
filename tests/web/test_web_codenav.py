"""Code navigation on the file page, driven in a real Chromium against the Serve app, as a user
would: click a symbol → its definition; the references panel lists the files a whole-word grep
finds; hover (and keyboard focus) shows the definition line; ``t`` opens the file finder and
typing filters it; the branch/tag selector; the searched term highlighted; the file tree; hostile
names and paths stay text. Screenshots at 390 and 1400 px, light and dark, go to
``tests/output/screenshots/codenav/`` (git-ignored)."""

from __future__ import annotations

import os
import re
import urllib.parse

import pytest

from tests.codenavworld import DEMO, HOSTILE, WIDGETS, XSS, build_world, word_grep
from tests.webworld import SCREENSHOTS, browser, signed_in_context  # noqa: F401  (pytest fixture)

PREFIX = "codenav-web-searcher"


@pytest.fixture(scope="module")
def web(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application
    from codesearch.accounts import hash_password

    w = build_world(str(tmp_path_factory.mktemp("codenav-web")))
    store = w["store"]
    owner = store.find_user_by_email("owner@example.com")
    store.set_user_password(owner.id, hash_password("owner-pass-1"))
    pool = SearcherPool.create(w["index"], 2, name_prefix=PREFIX)
    serve.run(search_application(PREFIX, len(pool.actors), anonymous_access=False, data_dir=w["data"],
                                 public_url=f"{serve_url}/cnweb"), name="codenav-web", route_prefix="/cnweb")
    w.update(url=f"{serve_url}/cnweb", owner={"email": "owner@example.com", "password": "owner-pass-1"},
             shots=os.path.join(SCREENSHOTS, "codenav"))
    os.makedirs(w["shots"], exist_ok=True)
    yield w
    serve.delete("codenav-web")
    pool.close()
    store.close()


@pytest.fixture
def page_at(browser, web):  # noqa: F811
    """`page_at(width=1400, dark=False)`: a signed-in page; fails the test on any dialog (XSS)."""
    contexts = []

    def make(width=1400, dark=False):
        ctx, page = signed_in_context(browser, web, web["owner"], viewport={"width": width, "height": 900},
                                      color_scheme="dark" if dark else "light")
        contexts.append(ctx)
        page.set_default_timeout(15_000)
        page.on("dialog", lambda d: pytest.fail(f"a dialog opened: {d.message}"))
        return page

    yield make
    for c in contexts:
        c.close()


def blob(web, repo: str, path: str, rev: str = "main", query: str = "") -> str:
    q = urllib.parse.quote
    return f"{web['url']}/browse/{q(repo)}@{q(rev, safe='')}/-/blob/{q(path)}{query}"


def sym(page, line: int, name: str):
    return page.locator(f"#L{line} .cn-sym[data-sym='{name}']").first


def shot(page, web, name: str) -> str:
    path = os.path.join(web["shots"], f"{name}.png")
    page.screenshot(path=path, full_page=False)
    return path


# ----------------------------------------------------------------------------- definitions


DEFINITION_CLICKS = [
    # (repo, file, line of the click, symbol, where it lands: (file, line))
    (DEMO, "src/app.py", 11, "Server", ("src/app.py", 3)),
    (DEMO, "src/app.py", 12, "handle_request", ("src/app.py", 4)),
    (DEMO, "src/new.py", 3, "shout", ("src/util/strings.py", 1)),
    (WIDGETS, "src/widget.py", 5, "shout", ("src/util/strings.py", 1)),  # not in widgets: found in demo
    (HOSTILE, f"src/{XSS}.py", 3, "evil_fn", ("src/evil.py", 1)),
]


@pytest.mark.parametrize("repo,path,line,name,target", DEFINITION_CLICKS)
def test_clicking_a_symbol_opens_its_definition(page_at, web, repo, path, line, name, target):
    page = page_at()
    page.goto(blob(web, repo, path))
    sym(page, line, name).click()
    quoted = re.escape(urllib.parse.quote(target[0]))
    page.wait_for_url(re.compile(rf"/-/blob/{quoted}#L{target[1]}$"))
    page.wait_for_selector(f"#L{target[1]}.hl")
    assert name in page.inner_text(f"#L{target[1]}")


def test_several_definitions_open_a_panel_and_none_says_so(page_at, web):
    page = page_at()
    page.goto(blob(web, HOSTILE, "src/twice_b.py"))
    sym(page, 5, "twice").click()
    panel = page.locator("#cn-panel")
    panel.wait_for(state="visible")
    assert "2 definitions of twice" in page.inner_text("#cn-panel-title")
    files = panel.locator(".cn-file").all_inner_texts()
    assert sorted(f.split(" (")[0] for f in files) == ["src/twice_a.py", "src/twice_b.py"]
    hrefs = [a.get_attribute("href") for a in panel.locator("a.cn-hit").all()]
    assert sorted(h.rsplit("/-/blob/", 1)[1] for h in hrefs) == ["src/twice_a.py#L1", "src/twice_b.py#L1"]
    page.keyboard.press("Escape")
    panel.wait_for(state="hidden")
    # a name without a definition (a parameter): the panel says so and offers references
    page.goto(blob(web, DEMO, "src/app.py"))
    sym(page, 4, "body").click()
    panel.wait_for(state="visible")
    assert "No definition of body" in page.inner_text("#cn-panel-title")


# ----------------------------------------------------------------------------- references


def test_find_references_lists_the_files_a_word_grep_finds(page_at, web):
    page = page_at()
    page.goto(blob(web, DEMO, "src/app.py"))
    token = sym(page, 4, "handle_request")
    token.focus()
    page.keyboard.press("r")
    panel = page.locator("#cn-panel")
    page.wait_for_selector("#cn-panel a.cn-hit")
    want = {(p, n) for r, p, n, _ in word_grep({DEMO: web["git_dirs"][DEMO]}, "handle_request") if p.endswith(".py")}
    got = set()
    for group in panel.locator(".cn-group").all():
        name = group.locator(".cn-file").inner_text().split(" (")[0]
        for a in group.locator("a.cn-hit").all():
            href = a.get_attribute("href")
            assert href.endswith(f"/-/blob/{name}#L{a.locator('.cn-ln').inner_text()}")
            got.add((name, int(a.locator(".cn-ln").inner_text())))
    assert got == want
    assert re.search(rf"{len(want)} in 1 file", page.inner_text("#cn-panel-title"))
    assert panel.locator("mark").first.inner_text() == "handle_request"
    # a line of this file scrolls to it in place
    panel.locator("a.cn-hit").last.click()
    page.wait_for_selector("#L12.hl")
    assert page.url.endswith("/src/app.py#L12")


# ----------------------------------------------------------------------------- hover and keyboard


def test_hover_and_focus_show_the_definition_line(page_at, web):
    page = page_at()
    page.goto(blob(web, DEMO, "src/app.py"))
    sym(page, 11, "Server").hover()
    tip = page.locator("#cn-tip")
    page.wait_for_selector("#cn-tip .cn-tip-def")
    assert "src/app.py:3" in tip.inner_text() and "class Server:" in tip.inner_text()
    page.mouse.move(0, 0)
    page.locator("h1, .filehead").first.click()
    tip.wait_for(state="hidden")
    # keyboard: focus shows the tooltip, Escape hides it and keeps the focus, Enter goes
    token = sym(page, 12, "handle_request")
    token.focus()
    page.wait_for_selector("#cn-tip .cn-tip-def")
    assert "def handle_request(self, body):" in tip.inner_text()
    assert token.get_attribute("aria-describedby") == "cn-tip"
    page.keyboard.press("Escape")
    tip.wait_for(state="hidden")
    assert page.evaluate("() => document.activeElement.dataset.sym") == "handle_request"
    page.keyboard.press("Enter")
    page.wait_for_selector("#L4.hl")
    assert page.url.endswith("#L4")
    # Tab walks the symbols
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("() => document.activeElement.classList.contains('cn-sym')")
    assert page.evaluate("() => document.activeElement.dataset.sym") != "handle_request"


# ----------------------------------------------------------------------------- finder


def test_t_opens_the_finder_and_typing_filters(page_at, web):
    page = page_at()
    page.goto(blob(web, DEMO, "src/app.py"))
    page.locator(".filehead").click()
    page.keyboard.press("t")
    finder = page.locator("#cn-finder")
    finder.wait_for(state="visible")
    assert page.evaluate("() => document.activeElement.id") == "cn-finder-input"
    page.wait_for_function("() => /files/.test(document.getElementById('cn-finder-note').textContent)")
    page.keyboard.type("strngs")
    first = page.locator("#cn-finder-list a").first
    assert first.inner_text() == "src/util/strings.py"
    assert all("s" in t for t in page.locator("#cn-finder-list a").all_inner_texts())
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/-/blob/src/util/strings\.py$"))
    # Ctrl-P opens it too; Escape closes; nothing matches says 0 files
    page.keyboard.press("Control+p")
    finder.wait_for(state="visible")
    page.keyboard.type("zzzqqq")
    page.wait_for_function("() => document.getElementById('cn-finder-note').textContent.startsWith('0 files')")
    assert page.locator("#cn-finder-list a").count() == 0
    page.keyboard.press("Escape")
    finder.wait_for(state="hidden")


# ----------------------------------------------------------------------------- refs


def test_switching_branch_or_tag_reloads_the_file_or_says_it_is_not_there(page_at, web):
    page = page_at()
    page.goto(blob(web, DEMO, "src/app.py"))
    options = page.locator("#cn-ref option").all_inner_texts()
    assert "main (indexed)" in options and "feature" in options and "v1.0" in options
    page.select_option("#cn-ref", "refs/tags/v1.0")
    page.wait_for_url(re.compile(r"@v1\.0/-/blob/src/app\.py$"))
    assert "if not body" not in page.inner_text("#code")
    assert page.locator("#cn-ref").input_value() == "refs/tags/v1.0"
    page.select_option("#cn-ref", "refs/heads/main")
    page.wait_for_url(re.compile(r"@main/-/blob/src/app\.py$"))
    assert "if not body" in page.inner_text("#code")
    # a file the tag does not have
    page.goto(blob(web, DEMO, "src/new.py"))
    page.select_option("#cn-ref", "refs/tags/v1.0")
    page.wait_for_selector("#cn-ref-note .error")
    assert "src/new.py does not exist at v1.0" in page.inner_text("#cn-ref-note")
    assert page.url.endswith("@main/-/blob/src/new.py")
    page.locator("#cn-ref-note a").click()
    page.wait_for_url(re.compile(r"@v1\.0/-/tree/$"))


# ----------------------------------------------------------------------------- highlight


HIGHLIGHTS = [
    # (query string, file, expected marked texts)
    ("?q=handle_request", "src/app.py", ["handle_request", "handle_request"]),
    ("?q=HANDLE_request", "src/app.py", ["handle_request", "handle_request"]),
    ("?q=HANDLE_request&case=1", "src/app.py", []),
    ("?q=hand.e_re&regex=1", "src/app.py", ["handle_re", "handle_re"]),
    ("?q=lang:python+server+-content:body", "src/app.py", ["Server", "server", "Server", "server"]),
    ("?q=(unclosed", "src/app.py", []),
    ("?q=" + urllib.parse.quote('request("hello'), "src/app.py", ['request("hello']),  # across tokens
]


@pytest.mark.parametrize("query,path,marks", HIGHLIGHTS)
def test_the_searched_term_is_highlighted(page_at, web, query, path, marks):
    page = page_at()
    page.goto(blob(web, DEMO, path, query=query))
    page.wait_for_selector(".cn-sym")  # the script ran
    got = page.evaluate("""() => {
        const runs = new Map();  // the pieces of one marked range share data-term
        for (const m of document.querySelectorAll('#code mark.cn-term')) {
          runs.set(m.dataset.term, (runs.get(m.dataset.term) || '') + m.textContent);
        }
        return Array.from(runs.values()); }""")
    assert got == marks, query


def test_a_search_result_opens_the_file_with_the_term_highlighted(page_at, web):
    page = page_at()
    page.goto(f"{web['url']}/search?q=whisper")
    page.locator("#results .cline.hit").first.click()  # the preview panel, which links to the file page
    page.locator("#preview .preview-open").click()
    page.wait_for_url(re.compile(r"/src/util/strings\.py\?q=whisper#L5$"))
    page.wait_for_selector("mark.cn-term")
    assert page.locator("mark.cn-term").all_inner_texts() == ["whisper"]
    assert page.locator("#L5 mark.cn-term").count() == 1


# ----------------------------------------------------------------------------- tree


def test_the_file_tree_opens_at_the_file_and_loads_directories_on_demand(page_at, web):
    page = page_at(1400)
    page.goto(blob(web, DEMO, "src/util/strings.py"))
    tree = page.locator("#cn-tree")
    tree.wait_for(state="visible")  # open by default on wide screens
    here = page.locator("#cn-tree a[aria-current=page]")
    here.wait_for()
    assert here.inner_text() == "strings.py"
    assert page.locator("#cn-tree button.cn-dir[data-path='src'][aria-expanded=true]").count() == 1
    # data/ is not loaded until opened
    data_dir = page.locator("#cn-tree button.cn-dir[data-path='data']")
    assert data_dir.get_attribute("aria-expanded") == "false"
    assert page.locator("#cn-tree a[data-path='data/big.txt']").count() == 0
    data_dir.click()
    page.locator("#cn-tree a[data-path='data/big.txt']").click()
    page.wait_for_url(re.compile(r"/-/blob/data/big\.txt$"))
    # collapsing it is remembered
    page.locator("#cn-tree-toggle").click()
    tree.wait_for(state="hidden")
    page.reload()
    page.wait_for_selector(".cn-bar")
    assert page.locator("#cn-tree").is_hidden()
    page.locator("#cn-tree-toggle").click()
    tree.wait_for(state="visible")


# ----------------------------------------------------------------------------- hostile names


def test_hostile_names_and_paths_stay_text(page_at, web):
    page = page_at()
    page.goto(blob(web, HOSTILE, f"src/{XSS}.py", query="?q=" + urllib.parse.quote(XSS)))
    page.wait_for_selector(".cn-sym")
    sym(page, 3, "evil_fn").focus()
    page.keyboard.press("r")
    page.wait_for_selector("#cn-panel a.cn-hit")
    panel_text = page.inner_text("#cn-panel")
    assert f"src/{XSS}.py" in panel_text and "</script><script>" not in panel_text  # other lines of evil.py stay out
    # the finder lists the hostile paths as text
    page.keyboard.press("Escape")
    page.keyboard.press("t")
    page.keyboard.type("img")
    page.wait_for_selector("#cn-finder-list a")
    assert f"docs/{XSS}.md" in page.locator("#cn-finder-list").inner_text()
    page.keyboard.press("Escape")
    # the tree too, and the HTML page whose id is a symbol
    page.goto(blob(web, HOSTILE, "web/page.html"))
    page.wait_for_selector(".cn-bar")
    page.locator("#cn-tree").wait_for(state="visible")  # open by default at 1400 px
    page.locator("#cn-tree button.cn-dir[data-path='docs']").click()
    page.wait_for_selector("#cn-tree a[data-path^='docs/']")
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("main img, #cn-tree img, #cn-panel img, #cn-tip img").count() == 0
    resp = page.request.post(web["url"] + "/api/find_definitions", data={"symbolName": XSS},
                             headers={"X-CSRF-Token": page.get_attribute("meta[name=csrf-token]", "content")})
    assert resp.json()["files"][0]["fileName"] == "web/page.html"


# ----------------------------------------------------------------------------- screens


@pytest.mark.parametrize("width", [390, 1400])
@pytest.mark.parametrize("dark", [False, True])
def test_screens_fit_and_are_captured(page_at, web, width, dark):
    page = page_at(width, dark)
    page.goto(blob(web, DEMO, "src/app.py", query="?q=server"))
    page.wait_for_selector(".cn-sym")
    # our parts stay inside the viewport (the site header's own overflow at 390 px is the layout work's)
    overflow = """() => Array.from(document.querySelectorAll(
          '.cn-bar, .cn-bar *, .filehead, #cn-tree, #cn-tip, #cn-panel, #cn-panel-title, .cn-finder-box, #code'))
        .filter(e => e.offsetParent !== null || getComputedStyle(e).position === 'fixed')
        .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
        .map(e => e.tagName + '.' + e.className + '#' + e.id).length"""
    assert page.evaluate(overflow) <= 0
    if width < 1100:
        assert page.locator("#cn-tree").is_hidden()  # collapsed on small screens
        page.locator("#cn-tree-toggle").click()
        page.wait_for_selector("#cn-tree a[aria-current=page]")
        assert page.evaluate(overflow) <= 0
        shot(page, web, f"tree-{width}-{'dark' if dark else 'light'}")
        page.keyboard.press("Escape")
        page.locator("#cn-tree").wait_for(state="hidden")
    sym(page, 11, "Server").hover()
    page.wait_for_selector("#cn-tip .cn-tip-def")
    assert page.evaluate(overflow) <= 0
    shot(page, web, f"hover-{width}-{'dark' if dark else 'light'}")
    sym(page, 4, "handle_request").focus()
    page.keyboard.press("r")
    page.wait_for_selector("#cn-panel a.cn-hit")
    assert page.evaluate(overflow) <= 0
    shot(page, web, f"refs-{width}-{'dark' if dark else 'light'}")
    page.keyboard.press("Escape")
    page.keyboard.press("t")
    page.keyboard.type("py")
    page.wait_for_selector("#cn-finder-list a")
    assert page.evaluate(overflow) <= 0
    shot(page, web, f"finder-{width}-{'dark' if dark else 'light'}")
    print("screenshots in", web["shots"])
