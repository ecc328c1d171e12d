"""The history pages of the web UI (codesearch.web.pages_history: blame, history, commit, compare)
in a real headless Chromium against the Serve app on 127.0.0.1 (tests.webworld: under ``/web``,
signed in), over two repositories added to that world, indexed in place:

- ``git.local/hist`` (tests.histworld) plus a branch ``many`` with 33 more commits to one file;
- ``git.local/evil-history``: commit messages, an author name, a tag, a file name and file
  contents written to run scripts if anything were inserted as HTML.

What the pages show is checked against the REST routes (themselves checked against git in
tests/service/test_history_api.py) and against git directly. Screenshots at 390 and 1400 px, light and
dark, go to a temporary folder printed by the test (`-s` shows it).
"""

from __future__ import annotations

import os
import subprocess
import urllib.parse

import httpx
import pytest

from tests.histworld import ALICE, commit, git, make_history_repo, write
from tests.webworld import browser, page_for, web  # noqa: F401  (pytest fixtures)

HIST = "git.local/hist"
EVIL = "git.local/evil-history"
EVIL_FILE = "x<img src=y onerror=window.__pwned=5>.py"
EVIL_SUBJECT = '<img src=x onerror="window.__pwned=1"> & <script>window.__pwned=2</script> "q" \'s\''
EVIL_BODY = "</pre><script>window.__pwned=3</script>\n<a href=\"javascript:window.__pwned=4\">click</a>"
EVIL_AUTHOR = ('Eve" onmouseover="window.__pwned=6" x="y', "eve@example.com")
EVIL_CODE = "print('<script>window.__pwned=7</script>')\n"
EVIL_TAG = "v<b>1&amp;"
MANY = 33


def _add_repo(web, name: str, root: str) -> None:
    store = web["store"]
    conn = name.rsplit("/", 1)[1]
    store.upsert_connection(conn, "git", {"type": "git", "url": "file://" + root})
    store.upsert_repos(conn, [dict(name=name, display_name=conn, code_host_type="genericGitHost",
                                   clone_url="file://" + root, local_path=root, default_branch="main")])


@pytest.fixture(scope="module")
def repos(web):
    base = os.path.join(os.path.dirname(web["data"]), "src")
    hist = os.path.join(base, "hist")
    shas = make_history_repo(hist)
    git(hist, "checkout", "-q", "-b", "many", "main")
    for i in range(MANY):
        write(hist, {"many.txt": f"version {i}\n", "wide.txt": f"{i} " + "wide " * 80 + "\n"})
        commit(hist, f"many {i:02d}", ALICE, f"2024-05-01T10:{i:02d}:00Z")
    git(hist, "checkout", "-q", "main")
    _add_repo(web, HIST, hist)

    evil = os.path.join(base, "evil-history")
    os.makedirs(evil)
    git(evil, "init", "-q", "-b", "main")
    write(evil, {EVIL_FILE: "print('hello')\n", "ok.py": "x = 1\n"})
    first = commit(evil, "first", ALICE)
    git(evil, "tag", EVIL_TAG)
    write(evil, {EVIL_FILE: EVIL_CODE, "ok.py": "x = '<b>bold</b>'\n"})
    bad = commit(evil, f"{EVIL_SUBJECT}\n\n{EVIL_BODY}", EVIL_AUTHOR, "2024-02-02T00:00:00Z")
    _add_repo(web, EVIL, evil)
    return {"hist": hist, "shas": shas, "evil": evil, "evil_shas": {"first": first, "bad": bad}}


@pytest.fixture
def owner_page(page_for, web):
    return page_for(web["owner"])


def api(web, route: str, **params) -> dict:
    r = httpx.get(web["url"] + route, params=params, headers={"Authorization": f"Bearer {web['key']}"}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def url(web, repo: str, rest: str) -> str:
    return f"{web['url']}/browse/{urllib.parse.quote(repo)}{rest}"


def pwned(page):
    return page.evaluate("() => window.__pwned")


def overflow(page) -> int:
    """How far the page's content is wider than the window (0: nothing scrolls sideways but code
    boxes). The content is ``main``: the header's links are base.html's, shared by every page."""
    return page.evaluate("() => Math.max(document.querySelector('main').scrollWidth,"
                         " document.querySelector('main').getBoundingClientRect().right) - window.innerWidth")


# ----------------------------------------------------------------------------- blame


def test_blame_is_linked_from_the_file_page_and_shows_each_range(owner_page, web, repos):
    page = owner_page
    page.goto(url(web, HIST, "@main/-/blob/src/app.py"))
    page.click("text=Blame")
    page.wait_for_selector(".code.blame")
    assert page.url.endswith("/-/blob/src/app.py?blame")
    want = api(web, "/api/blame", repo=HIST, path="src/app.py", ref="main")
    starts = page.eval_on_selector_all(".code.blame .line.bstart", "els => els.map(e => parseInt(e.id.slice(1)))")
    assert starts == [r["startLine"] for r in want["ranges"]]
    gutters = page.eval_on_selector_all(".line.bstart .bg", "els => els.map(e => [e.querySelector('.bsha').textContent,"
                                        " e.querySelector('.bauthor').textContent, e.querySelector('.bdate').textContent])")
    assert gutters == [[r["hash"][:7], want["commits"][r["hash"]]["authorName"], want["commits"][r["hash"]]["date"][:10]]
                       for r in want["ranges"]]
    assert page.locator(".code.blame .line").count() == 24
    # a range's commit opens its commit page
    page.click(".line#L8 .bsha")
    page.wait_for_selector(".commit-title")
    assert page.inner_text(".commit-title") == "Rework the app"
    assert page.inner_text(".sha-full") == repos["shas"]["c2"]


def test_blame_keeps_line_anchors_and_says_when_it_cannot_blame(owner_page, web, repos):
    page = owner_page
    page.goto(url(web, HIST, "@main/-/blob/src/app.py?blame#L13-L14"))
    page.wait_for_selector(".line.hl")
    assert page.eval_on_selector_all(".line.hl", "els => els.map(e => e.id)") == ["L13", "L14"]
    page.goto(url(web, HIST, "@main/-/blob/data/logo.png?blame"))
    assert "nothing to blame" in page.inner_text(".notice")
    page.goto(url(web, HIST, "@big/-/blob/data/big.txt?blame"))
    assert "Only the first 20,000 lines are blamed" in page.inner_text(".notice")
    assert page.locator(".code.blame .line").count() == 20_000


# ----------------------------------------------------------------------------- history


@pytest.mark.parametrize("start, link, path, ref", [
    ("@main/-/blob/src/app.py", "History", "src/app.py", "main"),
    ("@main/-/tree/src", "History", "src", "main"),
    ("@feature", "History", "", "feature"),
])
def test_history_of_a_file_or_directory_is_git_log(owner_page, web, repos, start, link, path, ref):
    page = owner_page
    page.goto(url(web, HIST, start))
    page.click(f".filemeta >> text={link}")
    page.wait_for_selector("#commits")
    out = subprocess.run(["git", "log", "--format=%s%x00%an%x00%H", ref, "--", *([path] if path else [])],
                         cwd=repos["hist"], capture_output=True, text=True, check=True).stdout
    want = [[s, a, h[:7]] for s, a, h in (line.split("\0") for line in out.splitlines())]
    rows = page.eval_on_selector_all("#commits .commit-row", """els => els.map(e => [
        e.querySelector('.csubject').textContent, e.querySelector('.cauthor').textContent,
        e.querySelector('.sha code').textContent])""")
    assert rows == want and want
    assert f"{len(want)} commit" in page.inner_text(".filemeta")


def test_history_pages_through_long_histories(owner_page, web, repos):
    page = owner_page
    page.goto(url(web, HIST, "@many/-/commits/many.txt"))
    subjects = page.eval_on_selector_all(".csubject", "els => els.map(e => e.textContent)")
    assert subjects == [f"many {i:02d}" for i in range(MANY - 1, MANY - 31, -1)]
    assert "Page 1 of 2" in page.inner_text(".pager")
    page.click("text=Older →")
    page.wait_for_url("**page=2")
    assert page.eval_on_selector_all(".csubject", "els => els.map(e => e.textContent)") == ["many 02", "many 01",
                                                                                           "many 00"]
    page.click("text=← Newer")
    page.wait_for_url(lambda u: "page=" not in u)
    # each row opens the file as it was after that commit
    page.click("#commits .commit-row:nth-child(5) >> text=Browse")
    page.wait_for_selector("#code")
    assert page.inner_text("#code .src") == f"version {MANY - 5}"


# ----------------------------------------------------------------------------- commit


def test_commit_page_shows_the_changes_with_colours(owner_page, web, repos):
    page = owner_page
    sha = repos["shas"]["c2"]
    page.goto(url(web, HIST, f"/-/commit/{sha}"))
    want = api(web, "/api/commit", repo=HIST, ref=sha)
    assert page.inner_text(".commit-body") == want["body"]
    assert page.inner_text(".cauthor") == "Bob Jones"
    sections = page.eval_on_selector_all("section.dfile", """els => els.map(s => ({
        path: s.dataset.path, status: s.querySelector('.badge').textContent,
        add: s.querySelectorAll('.dl.add').length, del: s.querySelectorAll('.dl.del').length,
        binary: s.innerText.includes('Binary file')}))""")
    assert sections == [{"path": f["newPath"] or f["oldPath"], "status": f["status"], "add": f["additions"],
                         "del": f["deletions"], "binary": f["isBinary"]} for f in want["files"]]
    app = page.locator("section.dfile[data-path='src/app.py']")
    assert app.locator(".dl.hunk .src").first.inner_text() == "@@ -5,7 +5,7 @@ def f2():"
    assert app.locator(".dl.add .src .k").count() > 0  # Python keywords coloured by Pygments
    added = app.locator(".dl.add").first
    assert added.locator(".dn").nth(1).get_attribute("data-n") == "8"  # the new side's line number
    # the parent, and the file at this commit
    page.click(f"text={repos['shas']['c1'][:7]}")
    page.wait_for_selector(".commit-title")
    assert page.inner_text(".commit-title") == "Initial import" and "none: the first commit" in page.inner_text(".cids")
    page.go_back()
    page.click("section.dfile[data-path='src/util.py'] >> text=View file")
    page.wait_for_selector("#code")
    assert "return 'util'" in page.inner_text("#code")


def test_a_merge_is_shown_against_its_first_parent_and_a_huge_commit_is_cut(owner_page, web, repos):
    page = owner_page
    page.goto(url(web, HIST, "/-/commit/main"))
    assert "against the first parent" in page.inner_text(".dsummary")
    assert page.eval_on_selector_all("section.dfile", "els => els.map(s => s.dataset.path)") == ["feature.txt",
                                                                                                "src/util.py"]
    page.goto(url(web, HIST, "/-/commit/big"))
    assert "too large to show whole" in page.inner_text(".notice")


# ----------------------------------------------------------------------------- compare


def test_compare_two_refs_from_the_tree_page(owner_page, web, repos):
    page = owner_page
    page.goto(url(web, HIST, "@main"))
    page.click(".filemeta >> text=Compare")
    page.fill("input[name=base]", "v1.0")
    page.fill("input[name=head]", "main")
    page.click("form.compare-form button[type=submit]")
    page.wait_for_selector("section.dfile")
    want = api(web, "/api/diff", repo=HIST, base="v1.0", head="main")
    assert page.eval_on_selector_all("section.dfile", "els => els.map(s => s.dataset.path)") == [
        f["newPath"] or f["oldPath"] for f in want["files"]]
    log = subprocess.run(["git", "log", "--format=%s", "v1.0..main"], cwd=repos["hist"], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert page.eval_on_selector_all(".commits .csubject", "els => els.map(e => e.textContent)") == log
    assert f"{len(log)} commits" in page.inner_text(".dsummary")
    page.click("text=swap")
    page.wait_for_url("**base=main**")
    assert page.input_value("input[name=base]") == "main" and page.input_value("input[name=head]") == "v1.0"
    assert page.locator(".commits").count() == 0  # v1.0 holds no commit main lacks


def test_compare_says_which_ref_is_wrong(owner_page, web, repos):
    page = owner_page
    resp = page.goto(url(web, HIST, "/-/compare?base=v1.0&head=no-such-branch"))
    assert resp.status == 400
    assert "'no-such-branch' not found" in page.inner_text(".error-notice")
    assert page.input_value("input[name=head]") == "no-such-branch"  # kept, to be corrected


# ----------------------------------------------------------------------------- hostile history


def test_hostile_messages_authors_names_and_code_stay_text(owner_page, web, repos):
    page = owner_page
    bad = repos["evil_shas"]["bad"]
    visits = [
        f"@main/-/blob/{urllib.parse.quote(EVIL_FILE)}?blame", f"@main/-/commits/{urllib.parse.quote(EVIL_FILE)}",
        "/-/commits", f"/-/commit/{bad}", f"/-/compare?base={urllib.parse.quote(EVIL_TAG)}&head=main",
        "/-/compare?base=%3Cscript%3Ewindow.__pwned%3D8%3C/script%3E&head=main", "@main/-/tree/",
    ]
    for rest in visits:
        page.goto(url(web, EVIL, rest))
        assert pwned(page) is None, rest
        page.hover("body")
        page.eval_on_selector_all("a", "els => els.forEach(a => a.dispatchEvent(new MouseEvent('mouseover')))")
        assert pwned(page) is None, rest
        assert not page.eval_on_selector_all("script", "els => els.filter(s => !s.src).length"), rest
    page.goto(url(web, EVIL, f"/-/commit/{bad}"))
    assert page.inner_text(".commit-title") == EVIL_SUBJECT
    assert page.inner_text(".commit-body") == EVIL_BODY
    assert page.inner_text(".cauthor") == EVIL_AUTHOR[0]
    assert EVIL_FILE in page.eval_on_selector_all("section.dfile", "els => els.map(s => s.dataset.path)")
    assert "<script>window.__pwned=7</script>" in page.inner_text(f"section.dfile[data-path='{EVIL_FILE}']")
    assert "<b>bold</b>" in page.inner_text("section.dfile[data-path='ok.py']")
    page.goto(url(web, EVIL, f"@main/-/blob/{urllib.parse.quote(EVIL_FILE)}?blame"))
    assert page.inner_text(".line.bstart .bauthor") == EVIL_AUTHOR[0]
    assert page.get_attribute(".line.bstart .bmsg", "title") == EVIL_SUBJECT
    page.goto(url(web, EVIL, "/-/commits"))
    assert page.eval_on_selector_all(".badge.rev", "els => els.map(e => e.textContent)").count(EVIL_TAG) == 1


# ----------------------------------------------------------------------------- layout


PAGES = {
    "blame": (HIST, "@main/-/blob/src/app.py?blame"),
    "history": (HIST, "@main/-/commits/src"),
    "commit": (HIST, "/-/commit/{c2}"),
    "compare": (HIST, "/-/compare?base=v1.0&head=main"),
    "evil-commit": (EVIL, "/-/commit/{bad}"),
}


def test_pages_fit_small_and_wide_screens_in_light_and_dark(owner_page, web, repos, tmp_path_factory):
    page = owner_page
    out = tmp_path_factory.mktemp("history-screenshots")
    print(f"\nscreenshots: {out}")
    for name, (repo, rest) in PAGES.items():
        page.goto(url(web, repo, rest.format(c2=repos["shas"]["c2"], bad=repos["evil_shas"]["bad"])))
        for width in (390, 1400):
            page.set_viewport_size({"width": width, "height": 900})
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                assert overflow(page) <= 0, (name, width, scheme)
                bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
                assert (bg == "rgb(13, 17, 23)") == (scheme == "dark"), (name, scheme, bg)
                page.screenshot(path=str(out / f"{name}-{width}-{scheme}.png"), full_page=True)
    # code scrolls inside its box on a small screen, the page does not
    page.set_viewport_size({"width": 390, "height": 900})
    page.goto(url(web, HIST, "@many/-/blob/wide.txt?blame"))
    box = page.evaluate("() => { const c = document.getElementById('code'); return [c.scrollWidth, c.clientWidth]; }")
    assert box[0] > box[1] and overflow(page) <= 0


# ----------------------------------------------------------------------------- diffs fold per file (issue 29, item 4)


def _open_files(page) -> list[bool]:
    return page.eval_on_selector_all("section.dfile > details.dbox", "els => els.map(d => d.open)")


def test_each_file_of_a_diff_folds_and_big_ones_start_folded(owner_page, web, repos):
    page = owner_page
    page.goto(url(web, HIST, f"/-/commit/{repos['shas']['c2']}"))
    files = len(api(web, "/api/commit", repo=HIST, ref=repos["shas"]["c2"])["files"])
    assert _open_files(page) == [True] * files  # small diffs: every file open
    cases = [  # (what the reader does, which files are open after it)
        ("text=Collapse all", [False] * files),
        ("text=Expand all", [True] * files),
        ("section.dfile[data-path='src/app.py'] summary.dhead", [p != "src/app.py" for p in page.eval_on_selector_all(
            "section.dfile", "els => els.map(s => s.dataset.path)")]),
    ]
    for action, want in cases:
        page.click(action)
        assert _open_files(page) == want, action
    assert not page.locator("section.dfile[data-path='src/app.py'] .code.diff").is_visible()
    # a folded file's "View file" stays at hand, and an address pointing at the file opens it
    assert page.locator("section.dfile[data-path='src/app.py'] > a.dview").is_visible()
    app_id = page.get_attribute("section.dfile[data-path='src/app.py']", "id")
    page.goto(url(web, HIST, f"/-/commit/{repos['shas']['c2']}#{app_id}"))
    page.wait_for_function(f"() => document.querySelector('#{app_id} details').open")
    # a commit with big files: big.txt starts folded, saying so; huge.txt (past the diff's cap) has
    # only its note; the list of files opens the one picked
    page.goto(url(web, HIST, "/-/commit/big"))
    assert _open_files(page) == [False, True]
    assert "large diff: folded" in page.inner_text("section.dfile[data-path='data/big.txt'] summary")
    page.click("ul.dfiles a[href='#diff-0']")
    assert _open_files(page) == [True, True]
    # the compare page folds the same way
    page.goto(url(web, HIST, "/-/compare?base=v1.0&head=main"))
    page.click("text=Collapse all")
    assert not any(_open_files(page))


# ----------------------------------------------------------------------------- blame the parent


def test_blame_steps_to_the_parent_across_a_rename_and_says_when_a_commit_added_the_file(owner_page, web, repos):
    page = owner_page
    c1, c2 = repos["shas"]["c1"], repos["shas"]["c2"]
    page.goto(url(web, HIST, "@main/-/blob/docs/manual.md?blame"))
    steps = page.eval_on_selector_all(".line.bstart .bg", """els => els.map(e => [e.querySelector('.bsha').textContent,
        e.querySelector('.bprev').classList.contains('none'), e.querySelector('.bprev').getAttribute('aria-label')])""")
    assert steps == [  # c2 renamed guide.md to manual.md and changed line 4; c1 added the file
        [c1[:7], True, f"{c1[:7]} added this file: no earlier version"],
        [c2[:7], False, f"Blame before {c2[:7]}"],
        [c1[:7], True, f"{c1[:7]} added this file: no earlier version"],
    ]
    href = page.get_attribute(".line#L4 .bprev", "href")
    assert href.endswith(f"/browse/{HIST}@{c1}/-/blob/docs/guide.md?blame#L4"), href
    page.click(".line#L4 .bprev")
    page.wait_for_selector(".line.hl")
    assert page.url.endswith(href), page.url
    assert page.inner_text(".line#L4 .src") == "Then send requests."  # the file before c2, under its old name
    assert page.eval_on_selector_all(".line.hl", "els => els.map(e => e.id)") == ["L4"]
    # a file the commit added: nothing before it to blame
    page.goto(url(web, HIST, f"@{c2}/-/blob/src/util.py?blame"))
    assert page.locator(".bprev").count() == 1 and page.locator("a.bprev").count() == 0
    assert "added this file" in page.get_attribute(".bprev", "title")


# ----------------------------------------------------------------------------- history by author


def _git_log(repo: str, ref: str, *args: str) -> list[str]:
    return subprocess.run(["git", "log", "--format=%s", *args, ref], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.splitlines()


def test_history_filters_by_author_on_the_server_and_in_the_address(owner_page, web, repos):
    page = owner_page
    page.goto(url(web, HIST, "@main/-/commits"))
    want = api(web, "/api/commits/authors", repo=HIST, ref="main", perPage=100)
    options = page.eval_on_selector_all("#hist-author option", "els => els.map(o => [o.value, o.textContent])")
    assert options == [["", "All authors"]] + [[a["email"], f"{a['name']} ({a['commitCount']})"] for a in want]
    for who in (BOB_EMAIL, "carol@example.net", ""):
        page.select_option("#hist-author", who)
        with page.expect_navigation():
            page.click("form.hist-filter button[type=submit]")
        assert urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query).get("author") == ([who] if who else None)
        assert page.eval_on_selector_all(".csubject", "els => els.map(e => e.textContent)") == _git_log(
            repos["hist"], "main", *([f"--author={who}"] if who else []))
        assert page.input_value("#hist-author") == who  # the page says which filter it shows
    # the pager keeps the filter; an author who changed nothing here is said so
    page.goto(url(web, HIST, "@many/-/commits?author=alice%40example.com"))
    older = page.get_attribute("text=Older →", "href")
    assert "author=alice%40example.com" in older and "page=2" in older
    page.goto(url(web, HIST, "@main/-/commits/feature.txt?author=nobody%40example.com"))
    assert "No commit by nobody@example.com changed feature.txt" in page.inner_text("#commits")
    assert page.input_value("#hist-author") == "nobody@example.com"


BOB_EMAIL = "bob@example.org"


# ----------------------------------------------------------------------------- copy path, syntax reference (item 5)


@pytest.mark.parametrize("rest, path", [
    ("@main/-/blob/src/app.py", "src/app.py"),
    ("@main/-/tree/sp%20ace", "sp ace"),
])
def test_copy_path_copies_the_repo_relative_path(browser, web, repos, rest, path):
    from tests.webworld import login

    ctx = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    try:
        page = ctx.new_page()
        login(page, web, web["owner"])
        page.goto(url(web, HIST, rest))
        button = page.get_by_role("button", name=f"Copy path {path}")
        button.click()
        page.wait_for_function("() => document.querySelector('button[data-copy-path]').textContent === 'Copied'")
        assert page.evaluate("() => navigator.clipboard.readText()") == path
        assert page.inner_text("button[data-copy-path] + [role=status]") == f"Copied {path}"
    finally:
        ctx.close()
    # the repository's own tree has no path to copy
    owner = browser.new_context()
    try:
        page = owner.new_page()
        login(page, web, web["owner"])
        page.goto(url(web, HIST, "@main"))
        assert page.locator("button[data-copy-path]").count() == 0
    finally:
        owner.close()


def test_ctrl_slash_opens_the_syntax_reference_wherever_the_search_box_is(owner_page, web, repos):
    page = owner_page
    for where in ("/", "/search?q=nothing-matches-this"):
        page.goto(web["url"] + where)
        page.focus("input[name=q]")
        for want in (True, False):
            page.keyboard.press("Control+/")
            assert page.evaluate("() => document.querySelector('details.syntax').open") is want, where
        assert page.locator("details.syntax").count() == 1


# ----------------------------------------------------------------------------- who may see


def test_a_member_who_may_not_see_the_repo_gets_neither_its_authors_nor_its_blame(owner_page, web, repos, page_for):
    from codesearch import permissions

    store = web["store"]
    hidden = "git.local/hidden-hist"
    _add_repo(web, hidden, repos["hist"])
    with store.engine.begin() as c:  # the connection's repo is private
        from sqlalchemy import update

        from codesearch.store.tables import repos as repo_table
        c.execute(update(repo_table).where(repo_table.c.name == hidden).values(public=False))
    open_rule = permissions.ConnectionRule(enforce=False, enforce_public=False, host=None)
    permissions.write_settings(store, permissions.PermissionSettings(enabled=True, connections={
        "hidden-hist": permissions.ConnectionRule(enforce=True, enforce_public=False, host="github.com"),
        **{n: open_rule for n in ("hist", "evil-history", "local")}}))
    try:
        _member_sees_nothing_of(page_for(web["member"]), web, repos, hidden)
    finally:
        permissions.write_settings(store, permissions.PermissionSettings(enabled=False))


def _member_sees_nothing_of(member, web, repos, hidden: str) -> None:
    c1 = repos["shas"]["c1"]
    cases = [  # (page, as the hidden repo, as a repo that does not exist)
        f"@main/-/commits?author={BOB_EMAIL}",
        f"@{c1}/-/blob/docs/guide.md?blame",
        "@main/-/blob/docs/manual.md?blame",
    ]
    deadline = 30
    for rest in cases:
        for _ in range(deadline * 10):  # the rule is read again within its cache's few seconds
            resp = member.goto(url(web, hidden, rest))
            if resp.status == 404:
                break
            member.wait_for_timeout(100)
        assert resp.status == 404, rest
        assert BOB_EMAIL not in member.content() and "Rework the app" not in member.content()
        seen = member.inner_text("main").replace(hidden, "<repo>")
        assert seen == _body(member, url(web, "git.local/no-such-repo", rest)).replace("git.local/no-such-repo",
                                                                                       "<repo>"), rest
    # the same pages of a repository the member may see still work
    assert member.goto(url(web, HIST, f"@main/-/commits?author={BOB_EMAIL}")).status == 200
    assert member.locator(".csubject").all_inner_texts() == ["Rework the app"]


def _body(page, address: str) -> str:
    page.goto(address)
    return page.inner_text("main")


# ----------------------------------------------------------------------------- accessibility of what changed

CHANGED = [  # (page, what a reader opens first)
    (f"@main/-/commits?author={BOB_EMAIL}", None),
    ("/-/compare?base=v1.0&head=main", "text=Collapse all"),
    ("@main/-/blob/docs/manual.md?blame", None),
    ("@main/-/blob/src/app.py", None),
    ("@main/-/tree/src", None),
    ("search", "details.syntax > summary"),
]


def test_changed_pages_pass_axe_at_360_and_1400_in_both_themes(owner_page, web, repos):
    from tests.a11y import audit, describe

    page, found = owner_page, {}
    for rest, opened in CHANGED:
        page.goto(web["url"] + "/search?q=f5" if rest == "search" else url(web, HIST, rest))
        if opened:
            page.click(opened)
        for width in (360, 1400):
            page.set_viewport_size({"width": width, "height": 900})
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                assert overflow(page) <= 0, (rest, width, scheme)
                problems = audit(page)
                if problems:
                    found[f"{rest} {width} {scheme}"] = describe(problems)
    assert not found, "\n\n".join(f"{k}:\n{v}" for k, v in found.items())
