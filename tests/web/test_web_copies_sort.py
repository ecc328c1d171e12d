"""Folded copies and the orders of the results page (codesearch/web/result_copies.py, result_sort.py,
static/search-page.js) in a real headless Chromium against the Serve app on 127.0.0.1, and the same
search through ``POST /api/search``, which keeps every file and marks the copies.

The world: `tests.webworld`'s, plus an upstream repository, a fork of it and a repository that vendors
one of its files, with known commit dates; every file holds ``foldme_marker`` once.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import urllib.parse

import httpx
import pytest

from tests.a11y import audit, describe
from tests.webworld import browser, index_local_repo, login, page_for, shot, web  # noqa: F401  (pytest fixtures)

UTIL = "def helper():\n    return 'foldme_marker'\n"
REPOS = {
    "upstream": [
        ("2020-01-01T00:00:00Z", {"lib/util.py": UTIL, "README.md": "foldme_marker readme\n"}),
        ("2021-06-01T00:00:00Z", {"app.py": "print('foldme_marker app')\n"}),
    ],
    "vendor": [("2022-03-01T00:00:00Z", {"third_party/util.py": UTIL, "main.go": "package main // foldme_marker\n"})],
}
FORK = ("2024-01-01T00:00:00Z", {"app.py": "print('foldme_marker forked')\n"})
QUERY = "foldme_marker"


def commit(root: str, date: str, files: dict[str, str]) -> None:
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", date], cwd=root, check=True, env=env)


@pytest.fixture(scope="module")
def forks(web):
    """The three repositories, indexed into the `web` world: name → work tree."""
    base = os.path.join(os.path.dirname(web["data"]), "src", "copies")
    roots = {}
    for name, commits in REPOS.items():
        root = roots[f"git.local/{name}"] = os.path.join(base, name)
        os.makedirs(root)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
        for date, files in commits:
            commit(root, date, files)
    fork = roots["git.local/fork"] = os.path.join(base, "fork")
    subprocess.run(["git", "clone", "-q", roots["git.local/upstream"], fork], check=True)
    commit(fork, *FORK)
    for name, root in roots.items():
        index_local_repo(web, f"copies-{name.rsplit('/', 1)[1]}", name, root, name.rsplit("/", 1)[1])
    web["pool"].refresh(web["index"])
    return roots


def on_disk(roots: dict[str, str]) -> dict[tuple[str, str], str]:
    """(repository, path) → the git blob id of the file on disk (hashlib), the brute-force table."""
    out = {}
    for name, root in roots.items():
        out_of = subprocess.run(["git", "ls-files"], cwd=root, check=True, capture_output=True, text=True).stdout
        for rel in out_of.split():
            data = open(os.path.join(root, rel), "rb").read()
            out[(name, rel)] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return out


def api(web, body: dict) -> httpx.Response:
    return httpx.post(web["url"] + "/api/search", json={"query": QUERY, "matches": 100, **body},
                      headers={"Authorization": f"Bearer {web['key']}"}, timeout=60)


def open_results(page, web, **params) -> None:
    page.goto(f"{web['url']}/search?{urllib.parse.urlencode({'q': QUERY, **params})}")
    page.wait_for_function("() => document.body?.dataset.searchDone === '1'")


def sections(page) -> list[dict]:
    return page.evaluate("""() => [...document.querySelectorAll('#results section.file')].map(s => ({
        repo: s.dataset.repo, path: s.dataset.path, time: s.dataset.time, content: s.dataset.content,
        copies: [...s.querySelectorAll('details.copies li')].map(li => [li.dataset.repo, li.querySelector('a').textContent]),
        label: (s.querySelector('details.copies summary') || {}).textContent || ''}))""")


# ----------------------------------------------------------------------------- the API


def test_the_api_keeps_every_file_and_marks_the_copies(web, forks):
    table = on_disk(forks)
    r = api(web, {})
    assert r.status_code == 200, r.text
    files = r.json()["files"]
    assert {(f["repository"], f["fileName"]["text"]) for f in files} == set(table)
    first: dict[str, tuple[str, str]] = {}
    for f in files:
        k = (f["repository"], f["fileName"]["text"])
        assert f["contentHash"] == table[k]
        if table[k] in first:
            assert (f["duplicateOf"]["repository"], f["duplicateOf"]["fileName"]) == first[table[k]]
            assert f["duplicateOf"]["webUrl"].startswith(web["url"] + "/browse/")
        else:
            first[table[k]] = k
            assert "duplicateOf" not in f
    assert len(first) < len(files)


@pytest.mark.parametrize("body, says", [
    ({"sort": "newest"}, "sort"),
    ({"sort": 1}, "sort"),
    ({"foldDuplicates": "yes"}, "foldDuplicates"),
])
def test_bad_options_are_refused_and_named(web, forks, body, says):
    r = api(web, body)
    assert r.status_code == 400, r.text
    assert says in r.text


# ----------------------------------------------------------------------------- the page


def test_each_content_shows_once_with_its_copies_on_demand(page_for, web, forks):
    table = on_disk(forks)
    page = page_for(web["owner"])
    open_results(page, web)
    shown = sections(page)
    by_content: dict[str, set] = {}
    for k, oid in table.items():
        by_content.setdefault(oid, set()).add(k)
    assert len(shown) == len(by_content)  # one section per content
    for s in shown:
        group = by_content[s["content"]]
        assert {(s["repo"], s["path"]), *map(tuple, s["copies"])} == group
        if len(group) > 1:
            repos = {r for r, _ in group - {(s["repo"], s["path"])}}
            want = f"also in {len(repos)} {'repository' if len(repos) == 1 else 'repositories'}"
            assert s["label"] == want
    util = page.locator("section.file", has=page.locator("details.copies li")).filter(has_text="util.py").first
    link = util.locator("details.copies li a").first
    assert not link.is_visible()  # closed until asked
    util.locator("details.copies summary").click()
    assert link.is_visible()
    assert "/browse/" in link.get_attribute("href")
    shot(page, "results-copies")


def test_the_summary_counts_each_content_once(page_for, web, forks):
    page = page_for(web["owner"])
    open_results(page, web)
    distinct = len(set(on_disk(forks).values()))
    assert page.inner_text("#summary").startswith(f"{distinct} matches in {distinct} files")


@pytest.mark.parametrize("link, sort", [("Recently changed", "recency"), ("Path", "path"), ("Relevance", None)])
def test_the_order_is_a_link_and_the_page_follows_it(page_for, web, forks, link, sort):
    page = page_for(web["owner"])
    open_results(page, web, sort="path" if sort != "path" else "recency")
    with page.expect_navigation():  # (the page before it was done too: waiting for that would pass at once)
        page.get_by_role("navigation", name="Sort results").get_by_role("link", name=link).click()
    page.wait_for_function("() => document.body?.dataset.searchDone === '1'")  # (no body yet early in a load)
    params = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    assert params.get("sort") == ([sort] if sort else None) and params["q"] == [QUERY]
    current = page.locator(".result-sort [aria-current=true]")
    assert current.inner_text() == link
    shown = sections(page)
    if sort == "recency":
        times = [s["time"] for s in shown]
        assert times == sorted(times, reverse=True) and all(times)
    elif sort == "path":
        keys = [(s["repo"], s["path"]) for s in shown]
        assert keys == sorted(keys)


@pytest.mark.parametrize("width", [360, 1400])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_page_with_copies_open_passes_the_audit(browser, web, forks, width, scheme):
    ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    try:
        page = ctx.new_page()
        page.set_default_timeout(20_000)
        login(page, web, web["owner"])
        open_results(page, web, sort="recency")
        for summary in page.locator("details.copies summary").all():
            summary.click()
        if width < 800:
            page.locator("#filters-box > summary").click()
        problems = audit(page)
        assert not problems, describe(problems)
    finally:
        ctx.close()
