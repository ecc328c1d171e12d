"""The query bar (static/querybar.js) and the zero-result and error states of the results page,
driven in a real headless Chromium against the Serve app on 127.0.0.1 (tests.webworld).

Typed as a user types (key by key, so every input event fires): prefixes, then values from
``GET /api/suggest``; arrows and Enter pick; Escape closes; the highlighted layer shows the
tokens; a context selector writes ``context:``; recent queries come back on an empty bar. A
query that does not parse shows a caret under the character the error is at; an empty result
says why and links the fixed query. A repository and a file whose names are HTML are offered as
suggestions and stay text.
"""

from __future__ import annotations

import os
import re
import urllib.parse

import pytest

from tests.corpus import make_local_repo
from tests.mcpworld import DEMO, WIDGETS
from tests.webworld import browser, index_local_repo, page_for, shot, web  # noqa: F401  (pytest fixtures)

HOSTILE_REPO = 'git.local/qb<img src=x onerror="window.__pwned=41">'
HOSTILE_FILE = "zz<img src=y onerror=window.__pwned=42>.py"


@pytest.fixture(scope="module")
def world(web):
    """The `web` world plus a repository with an HTML name and file name, and two contexts."""
    from codesearch.store.models import SearchContext

    root = os.path.join(os.path.dirname(web["data"]), "src", "qb-hostile")
    make_local_repo(root, {HOSTILE_FILE: "def qb_hostile_marker():\n    return 1\n"})
    index_local_repo(web, "qbhostile", HOSTILE_REPO, root, "hostile")
    store = web["store"]
    store.replace_search_contexts([SearchContext("demo-only", [DEMO], "the demo"),
                                   SearchContext("widgets-only", [WIDGETS], "")])
    web["pool"].refresh(web["index"])
    return web


@pytest.fixture
def page(page_for, world):
    p = page_for(world["owner"])
    p.goto(world["url"] + "/")
    return p


BAR = "form.searchform input[name=q]"


def typed(page, text: str) -> None:
    box = page.locator(BAR)
    box.click()
    box.press_sequentially(text, delay=15)


def options(page) -> list[str]:
    page.wait_for_selector(".qb-list:not([hidden]) .qb-option")
    return page.locator(".qb-list .qb-option .qb-label").all_inner_texts()


def wait_first(page, want: str) -> None:
    """Wait until the first suggestion is `want` (values arrive after a request)."""
    page.wait_for_function("(want) => { const o = document.querySelector('.qb-list:not([hidden]) .qb-option .qb-label');"
                           " return o && o.textContent === want; }", arg=want)


def wait_done(page) -> None:
    page.wait_for_function("() => { const s = document.getElementById('summary');"
                           " return s && (s.dataset.exhaustive || !document.getElementById('search-error').hidden); }")


def test_the_bar_is_an_aria_combobox(page):
    box = page.locator(BAR)
    assert box.get_attribute("role") == "combobox"
    assert box.get_attribute("aria-autocomplete") == "list"
    assert box.get_attribute("aria-expanded") == "false"
    listbox = page.locator("#" + box.get_attribute("aria-controls"))
    assert listbox.get_attribute("role") == "listbox"


#: typed → suggestions that must be offered, first ones first
PREFIX_CASES = [
    ("la", ["lang:", "language:"]),
    ("re", ["repo:", "rev:", "reposet:"]),
    ("-fi", ["-file:"]),
    ("handler pa", ["path:"]),
    ("con", ["content:", "context:"]),
]


@pytest.mark.parametrize("text,want", PREFIX_CASES)
def test_typing_suggests_prefixes(page, text, want):
    typed(page, text)
    got = options(page)
    assert got[: len(want)] == want, got
    assert page.locator(BAR).get_attribute("aria-expanded") == "true"


#: typed → the first value offered
VALUE_CASES = [
    ("lang:py", "Python"),
    ("language:typescr", "TypeScript"),
    ("repo:widg", WIDGETS),
    ("file:strings", "src/util/strings.py"),
    ("sym:handle_", "handle_request"),
    ("context:demo", "demo-only"),
    ("fork:o", "only"),
]


@pytest.mark.parametrize("text,first", VALUE_CASES)
def test_typing_a_prefix_suggests_its_values(page, text, first):
    typed(page, text)
    page.wait_for_function("(want) => [...document.querySelectorAll('.qb-option .qb-label')]"
                           ".some(o => o.textContent === want)", arg=first)
    assert options(page)[0] == first


def test_arrows_and_enter_pick_then_enter_searches(page, world):
    typed(page, "handle_request lang:py")
    wait_first(page, "Python")
    box = page.locator(BAR)
    assert box.get_attribute("aria-activedescendant") is None  # nothing picked yet: Enter would search
    box.press("ArrowDown")
    box.press("ArrowDown")
    box.press("ArrowUp")
    active = box.get_attribute("aria-activedescendant")
    assert page.locator(f"#{active}").get_attribute("aria-selected") == "true"
    assert page.locator(f"#{active} .qb-label").inner_text() == "Python"
    box.press("Enter")
    assert box.input_value() == "handle_request lang:Python "
    assert page.locator(".qb-list").is_hidden() and box.get_attribute("aria-expanded") == "false"
    box.press("Enter")
    page.wait_for_url(re.compile(r"/web/search\?"))
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)["q"] == ["handle_request lang:Python "]
    wait_done(page)
    assert page.locator("#results section.file").count() >= 1


def test_tab_takes_the_picked_one_and_a_prefix_keeps_the_list_open(page):
    typed(page, "repo:widg")
    wait_first(page, WIDGETS)
    page.locator(BAR).press("ArrowDown")
    page.locator(BAR).press("Tab")
    assert page.locator(BAR).input_value() == r"repo:^github\.com/acme/widgets$ "
    page.locator(BAR).fill("")
    typed(page, "la")
    options(page)
    page.locator(BAR).press("ArrowDown")
    page.locator(BAR).press("Enter")
    assert page.locator(BAR).input_value() == "lang:"
    wait_first(page, "Python")  # the language list follows at once, popular languages first


def test_tab_without_a_pick_moves_on(page):
    """A keyboard user tabbing through the form must not have the bar rewritten (or a recent
    query run) by a suggestion list they did not use."""
    typed(page, "re")
    options(page)
    page.locator(BAR).press("Tab")
    assert page.locator(BAR).input_value() == "re"
    assert page.evaluate("() => document.activeElement !== document.querySelector('form.searchform input[name=q]')")


def test_a_suggestion_replaces_the_word_as_typed_since(page):
    typed(page, "lang:p")
    page.wait_for_function("() => document.querySelectorAll('.qb-list:not([hidden]) .qb-option').length > 0")
    page.locator(BAR).press("ArrowDown")
    page.locator(BAR).press_sequentially("yt")  # typed on while the list for "lang:p" is shown
    page.locator(".qb-list .qb-option", has_text="Python").first.click()
    assert page.locator(BAR).input_value() == "lang:Python "


def test_escape_closes_the_list(page):
    typed(page, "la")
    options(page)
    page.locator(BAR).press("Escape")
    assert page.locator(".qb-list").is_hidden()
    assert page.locator(BAR).get_attribute("aria-expanded") == "false"


def test_enter_on_a_word_that_starts_a_prefix_searches_it(page):
    typed(page, "con")
    options(page)
    page.locator(BAR).press("Enter")
    page.wait_for_url(re.compile(r"/web/search\?q=con$"))


#: token classes of the highlighted layer for one query
HIGHLIGHT = [
    ('-file:test "a b" /fo+/ or language:go (x)', [
        ("qb-neg", "-"), ("qb-prefix", "file:"), ("qb-value", "test"), ("qb-str", '"a b"'), ("qb-re", "/fo+/"),
        ("qb-op", "or"), ("qb-prefix", "language:"), ("qb-value", "go"), ("qb-paren", "("), ("qb-word", "x"),
        ("qb-paren", ")")]),
    ("case:yes -foo", [("qb-word", "case:yes"), ("qb-word", "-foo")]),
]


@pytest.mark.parametrize("query,tokens", HIGHLIGHT)
def test_the_layer_highlights_the_tokens(page, query, tokens):
    page.locator(BAR).fill(query)
    got = page.evaluate("""() => [...document.querySelectorAll('.qb-layer span')]
        .map(s => [s.className, s.textContent])""")
    assert [tuple(x) for x in got] == tokens
    layer_text = page.evaluate("() => document.querySelector('.qb-layer').textContent.replace('\\u200b', '')")
    assert layer_text == query  # the layer holds exactly the input's text: it lines up under it


def test_the_layer_lines_up_with_the_input_text(page):
    query = "repo:demo needle"
    page.locator(BAR).fill(query)
    x = page.evaluate("""() => {
        const layer = document.querySelector('.qb-layer'), input = document.querySelector('form.searchform input[name=q]');
        const span = layer.querySelector('.qb-word');
        const range = document.createRange(); range.selectNodeContents(span);
        const cs = getComputedStyle(input);
        const inputTextLeft = input.getBoundingClientRect().left + parseFloat(cs.borderLeftWidth) + parseFloat(cs.paddingLeft);
        const ctx = document.createElement('canvas').getContext('2d'); ctx.font = cs.font;
        return [range.getBoundingClientRect().left, inputTextLeft + ctx.measureText('repo:demo ').width];
    }""")
    assert abs(x[0] - x[1]) < 2, x


def test_recent_queries_come_back_on_an_empty_bar(page, world):
    for q in ("shout", "whisper"):
        page.locator(BAR).fill(q)
        page.locator(BAR).press("Enter")
        page.wait_for_url(re.compile(rf"q={q}"))
    page.goto(world["url"] + "/")
    page.locator(BAR).click()
    got = options(page)
    assert got[:2] == ["whisper", "shout"]
    page.locator(BAR).press("ArrowDown")
    page.locator(BAR).press("Enter")
    page.wait_for_url(re.compile(r"q=whisper"))


def test_the_context_selector_writes_context_into_the_query(page, world):
    select = page.locator("select.qb-context")
    page.wait_for_function("() => document.querySelectorAll('select.qb-context option').length > 2")
    assert select.locator("option").all_inner_texts() == ["All repositories", "demo-only", "widgets-only"]
    assert select.is_visible()  # (hidden until the contexts are known: shown because there are some)
    page.locator(BAR).fill("shout")
    select.select_option("widgets-only")
    page.wait_for_url(re.compile(r"/web/search\?"))
    wait_done(page)
    assert page.locator(BAR).input_value() == "context:widgets-only shout"
    page.wait_for_function("() => document.querySelector('select.qb-context').value === 'widgets-only'")
    repos = set(page.evaluate("() => [...document.querySelectorAll('#results section.file')].map(s => s.dataset.repo)"))
    assert repos == {WIDGETS}
    page.locator("select.qb-context").select_option("")
    page.wait_for_url(re.compile(r"q=shout$"))


#: query, regex → the character the caret must be under
CARETS = [
    ("needle (bar", True, 7),
    ("ok foo(bar", True, 6),
    ("x file:a[b", False, 8),
    ("handler /a(b/", False, 10),
]


@pytest.mark.parametrize("query,regex,at", CARETS)
def test_a_bad_query_shows_a_caret_under_the_error(page, world, query, regex, at):
    params = {"q": query, **({"regex": "1"} if regex else {})}
    page.goto(f"{world['url']}/search?{urllib.parse.urlencode(params)}")
    wait_done(page)
    err = page.locator("#search-error")
    assert err.is_visible() and f"at character {at + 1}" in err.inner_text()
    assert page.locator(".query-caret-mark").inner_text() == " " * at + "^"
    # the caret is drawn right under that character
    xs = page.evaluate("""(at) => {
        const q = document.querySelector('.query-caret-query').firstChild;
        const m = document.querySelector('.query-caret-mark').firstChild;
        const r1 = document.createRange(); r1.setStart(q, at); r1.setEnd(q, at + 1);
        const r2 = document.createRange(); r2.setStart(m, at); r2.setEnd(m, at + 1);
        return [r1.getBoundingClientRect().left, r2.getBoundingClientRect().left];
    }""", at)
    assert abs(xs[0] - xs[1]) < 1, xs
    assert page.locator(".qb-layer .qb-err").inner_text() == query[at]
    if at == 7:
        shot(page, "querybar-regex-error")


#: query → words of the hint, label of the link that fixes it, a file the fixed query finds
HINTS = [
    ("shout lang:pyhton", "no language named pyhton; did you mean Python", "Python", "src/util/strings.py"),
    ("shout lang:cobol", "no file you can search is written in COBOL", "search without lang:cobol",
     "src/util/strings.py"),
    ("shout repo:widgest", "no repository you can search matches repo:widgest; did you mean github.com/acme/widgets",
     WIDGETS, "src/widget.py"),
    ("shout file:\\.rs$", "file:\\.rs$ left no results", "search without file:\\.rs$", "src/util/strings.py"),
]


@pytest.mark.parametrize("query,words,label,finds", HINTS)
def test_an_empty_result_says_why_and_links_the_fix(page, world, query, words, label, finds):
    page.goto(f"{world['url']}/search?{urllib.parse.urlencode({'q': query})}")
    wait_done(page)
    hints = page.locator("#search-hints")
    hints.wait_for()
    assert words in hints.inner_text()
    if query.endswith("pyhton"):
        shot(page, "querybar-did-you-mean")
    page.locator("#search-hints a.hint-fix", has_text=label).first.click()
    page.wait_for_url(re.compile(r"/web/search\?"))
    wait_done(page)
    paths = page.locator("#results .file-path").all_inner_texts()
    assert finds in paths, paths


def test_hostile_names_in_suggestions_stay_text(page, world):
    typed(page, "repo:qb<img")
    page.wait_for_function("(want) => [...document.querySelectorAll('.qb-option .qb-label')]"
                           ".some(o => o.textContent === want)", arg=HOSTILE_REPO)
    page.locator(BAR).fill("")
    typed(page, "file:onerror")
    page.wait_for_function("(want) => [...document.querySelectorAll('.qb-option .qb-label')]"
                           ".some(o => o.textContent === want)", arg=HOSTILE_FILE)
    page.locator(BAR).press("ArrowDown")
    page.locator(BAR).press("Enter")
    value = page.locator(BAR).input_value()
    assert value.startswith("file:") and "onerror" in value
    page.wait_for_timeout(300)
    assert page.locator(".qb-list img, .qb-layer img").count() == 0
    assert page.evaluate("() => window.__pwned") is None
    page.locator(BAR).press("Enter")
    wait_done(page)
    assert page.evaluate("() => window.__pwned") is None
    assert HOSTILE_FILE in page.locator("#results .file-path").all_inner_texts()


def test_screenshots(page):
    typed(page, "lang:py")
    wait_first(page, "Python")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        shot(page, f"querybar-suggestions-{scheme}")


def test_the_bar_fits_a_narrow_screen(page_for, world):
    """At 390 px the bar has a row of its own, the context selector and the toggles stay on the
    screen, and the list of suggestions is no wider than the bar."""
    p = page_for(world["owner"])
    p.set_viewport_size({"width": 390, "height": 800})
    p.goto(world["url"] + "/")
    p.wait_for_function("() => document.querySelectorAll('select.qb-context option').length > 2")
    typed(p, "lang:py")
    wait_first(p, "Python")
    right = p.evaluate("""() => Math.max(...['.qb', 'select.qb-context', '.qb-list', 'form.searchform button']
        .map(s => document.querySelector(s).getBoundingClientRect().right))""")
    assert right <= 390, right
    width = p.evaluate("() => document.querySelector('.qb').getBoundingClientRect().width")
    assert width >= 300, width  # the bar gets the row, not what the buttons leave
    shot(p, "querybar-390")
