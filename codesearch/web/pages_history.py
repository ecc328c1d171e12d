"""The history pages of the code browser: blame, the commits of a file or directory, one commit
with its diff, and the comparison of two refs.

They live under ``/browse/<repo>`` like the file and tree views, and `pages_search.browse` hands
them the request after it has found the repository for the caller (so a repository the caller
may not see is the same 404 page as one that does not exist) and resolved the revision:

- ``/browse/<repo>@<rev>/-/blob/<path>?blame``: the file with, per range of lines, the commit
  that last changed them (short sha linking to the commit page, date, author, subject) and a
  link to the blame of the file just before that commit (or a note that the commit added it);
- ``/browse/<repo>@<rev>/-/commits[/<path>]?author=&page=N``: the commits reachable from the
  revision that changed the path (a file or directory; the whole repository without one), newest
  first, `PER_PAGE` a page, only those of `author` when given (picked from the path's authors);
- ``/browse/<repo>/-/commit/<commit>``: a commit's message, author, parents and its changes
  against its first parent, as a unified diff with syntax colouring;
- ``/browse/<repo>/-/compare?base=&head=``: the commits in `head` that are not in `base` and the
  diff between the two trees (a form with the branches and tags to pick from).

Everything from the repository (messages, names, paths, code) reaches the page through Jinja's
autoescaping or through Pygments, which escapes every token; no page here runs a script.
The work per page is bounded like the API's: at most `MAX_FILES` files and `MAX_DIFF_BYTES`
of diff text (the page says when it was cut, how many files the whole diff has, and marks the
file the cut fell in with its whole change's counts), `history.MAX_BLAME_LINES` lines of blame, and
syntax colouring only for files whose diff is under `MAX_HIGHLIGHT_DIFF_LINES` lines.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import Request
from fastapi.responses import Response
from markupsafe import Markup

from codesearch import audit
from codesearch.app import git_reads
from codesearch.errors import FileNotFound, InvalidArgument, InvalidGitRef
from codesearch.git import history
from codesearch.git.diff import FileDiff
from codesearch.git.paths import check_path, check_scope
from codesearch.index.language import detect
from codesearch.markup.urls import browse_url
from codesearch.search.present import short_ref
from codesearch.web import highlight

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext
    from codesearch.permissions import Identity
    from codesearch.store.models import Repo

#: the kinds of ``/browse/<repo>/-/<kind>/…`` pages this module answers
KINDS = ("commits", "commit", "compare")
PER_PAGE = 30
MAX_FILES = 300
MAX_DIFF_BYTES = 1_000_000
#: the caps as a cut diff's notice says them
CAP_TEXT = f"{MAX_FILES} files or {MAX_DIFF_BYTES // 1_000_000} MB of diff text"
#: files with a longer diff are shown without syntax colouring
MAX_HIGHLIGHT_DIFF_LINES = 5_000
#: a file whose diff has more rows than this starts folded (its <details> closed), as Sourcebot folds big diffs
COLLAPSE_ROWS = 400
#: the history page's author filter offers at most this many authors (the most frequent)
MAX_AUTHOR_CHOICES = 100
#: and reads at most this much of the one asked for (a substring of "Name <email>", as the API's `author`)
MAX_AUTHOR_FILTER = 500
#: the compare page lists at most this many commits
MAX_COMPARE_COMMITS = 100


class Page(Protocol):
    """How a page is rendered (the caller's `_page`: the template with the common context)."""

    def __call__(self, request: Request, template: str, status_code: int = 200, **context: Any) -> Response: ...


def _short(sha: str) -> str:
    return sha[:7]


def _day(iso: str) -> str:
    """The date part of an ISO 8601 time (``2024-01-10T10:00:00+02:00`` → ``2024-01-10``)."""
    return iso[:10]


class Links:
    """The URLs of one repository's pages, written as `codesearch.markup.urls.browse_url` writes them."""

    def __init__(self, root: str, repo: str):
        self.root, self.repo, self._browse = root, repo, browse_url

    def blob(self, rev: str, path: str) -> str:
        return self._browse(self.root, self.repo, rev, "blob", path)

    def tree(self, rev: str, path: str = "") -> str:
        return self._browse(self.root, self.repo, rev, "tree", path)

    def commits(self, rev: str, path: str = "", page: int = 1, author: str = "") -> str:
        url = self._browse(self.root, self.repo, rev, "commits", path).rstrip("/")
        params = {k: v for k, v in (("author", author), ("page", str(page) if page > 1 else "")) if v}
        return url + (f"?{urllib.parse.urlencode(params)}" if params else "")

    def commit(self, sha: str) -> str:
        return self._browse(self.root, self.repo, None, "commit", sha)

    def compare(self, base: str = "", head: str = "", path: str = "") -> str:
        params = {k: v for k, v in (("base", base), ("head", head), ("path", path)) if v}
        url = self._browse(self.root, self.repo, None, "compare", "").rstrip("/")
        return url + (f"?{urllib.parse.urlencode(params)}" if params else "")


# ---------------------------------------------------------------------- diffs as rows


def _diff_files(files: list[FileDiff], links: Links, old_rev: str | None, new_rev: str) -> list[dict[str, Any]]:
    """Each file of a diff as the template shows it: its paths, status, counts, links and rows
    (hunk headers, then lines with their old and new numbers and highlighted text)."""
    out = []
    for i, f in enumerate(files):
        added, removed = history.file_stats(f)
        path = f.new_path or f.old_path or ""
        rows: list[dict[str, Any]] = []
        texts = [line[1:] for h in f.hunks for line in h.lines if not line.startswith("\\")]
        html = _highlight(path, texts)
        k = 0
        for h in f.hunks:
            rows.append(
                {
                    "kind": "hunk",
                    "old": "",
                    "new": "",
                    "html": f"@@ -{h.old_start},{h.old_lines} +{h.new_start},{h.new_lines} @@"
                    + (f" {h.header}" if h.header else ""),
                }
            )
            old_no, new_no = h.old_start, h.new_start
            for line in h.lines:
                tag = line[:1]
                if tag == "\\":
                    rows.append({"kind": "note", "old": "", "new": "", "sign": "", "html": line[1:].strip()})
                    continue
                text = html[k]
                k += 1
                if tag == "+":
                    rows.append({"kind": "add", "old": "", "new": new_no, "sign": "+", "html": text})
                    new_no += 1
                elif tag == "-":
                    rows.append({"kind": "del", "old": old_no, "new": "", "sign": "-", "html": text})
                    old_no += 1
                else:
                    rows.append({"kind": "ctx", "old": old_no, "new": new_no, "sign": " ", "html": text})
                    old_no, new_no = old_no + 1, new_no + 1
        out.append(
            {
                "id": f"diff-{i}",
                "old_path": f.old_path,
                "new_path": f.new_path,
                "path": path,
                "status": f.status,
                "binary": f.binary,
                "cut": f.cut,
                "additions": added,
                "deletions": removed,
                "rows": rows,
                "collapsed": len(rows) > COLLAPSE_ROWS,
                "view": links.blob(new_rev, f.new_path)
                if f.new_path is not None
                else (links.blob(old_rev, f.old_path) if old_rev and f.old_path is not None else None),
            }
        )
    return out


def _highlight(path: str, texts: list[str]) -> list[Markup]:
    """The lines of a file's hunks, coloured as one text (so a line's tokens are read in the
    context of the lines around it), or escaped when colouring is off or would renumber them."""
    if not texts:
        return []
    if len(texts) <= MAX_HIGHLIGHT_DIFF_LINES and not any("\r" in t or "\n" in t for t in texts):
        text = "\n".join(texts) + "\n"
        lines, ok = highlight.highlight_lines(path, detect(path, text.encode("utf-8", "replace")), text)
        if ok and len(lines) == len(texts):
            return [Markup(x) for x in lines]  # escaped by Pygments
    return [Markup(x) for x in highlight.plain_lines(texts)]  # escaped by markupsafe


# ---------------------------------------------------------------------- pages


def blame_page(
    page: Page, request: Request, identity: Identity, root: str, tc: ToolContext, row: Repo, ref: str, path: str
) -> Response:
    """The file at `ref` with the commit that last changed each range of lines."""
    audit.record(request, identity, "blame.read", f"{row.name}:{path}", ref=ref)
    check_path(path)
    links = Links(root, row.name)
    try:
        b = git_reads.blame(tc, row, path, ref).blame
    except InvalidArgument as e:  # too large to blame: say so where the blame would be
        return page(
            request,
            "blame.html",
            title=f"Blame · {path} · {row.name}",
            repo=row.name,
            rev=short_ref(ref),
            commit=git_reads.resolve(tc, row, ref),
            path=path,
            crumbs=_crumbs(links, ref, path),
            size=0,
            binary=False,
            file_url=links.blob(ref, path),
            history_url=links.commits(ref, path),
            truncated=False,
            rows=[],
            total_lines=0,
            highlighted=False,
            refused=str(e),
        )
    f = git_reads.read_file(tc, row, path, b.commit)
    data, commit = f.data, f.commit
    rev = short_ref(ref)
    ctx: dict[str, Any] = {
        "title": f"Blame · {path} · {row.name}",
        "repo": row.name,
        "rev": rev,
        "commit": commit,
        "path": path,
        "crumbs": _crumbs(links, ref, path),
        "size": len(data),
        "binary": b.binary,
        "file_url": links.blob(ref, path),
        "history_url": links.commits(ref, path),
        "truncated": b.truncated,
    }
    if b.binary:
        return page(request, "blame.html", **ctx, rows=[], total_lines=0, highlighted=False)
    text = data.decode("utf-8", "replace")
    lines, highlighted = highlight.highlight_lines(path, detect(path, data), text)
    starts: dict[int, dict[str, Any]] = {}
    for n, r in enumerate(b.ranges):
        c = b.commits.get(r.hash)
        starts[r.start_line] = {
            "sha": _short(r.hash),
            "url": links.commit(r.hash),
            "n": n,
            "lines": r.line_count,
            "author": c.author_name if c else "",
            "date": _day(c.date) if c else "",
            "message": c.message if c else "",
            "path": r.path if r.path != path else "",
            # "blame the parent": the file as it was just before this commit (under its name
            # there), near this line; None when the commit added the file (no earlier version)
            "prev": links.blob(c.previous[0], c.previous[1]) + f"?blame#L{max(1, r.orig_line)}"
            if c and c.previous
            else None,
        }
    rows, shade = [], 0
    for i, html in enumerate(lines[: history.MAX_BLAME_LINES], 1):
        start = starts.get(i)
        if start is not None:
            shade = start["n"] % 2
        rows.append({"n": i, "html": Markup(html), "start": start, "shade": shade})  # escaped by Pygments / markupsafe
    total = len(highlight.split_lines(text.replace("\r\n", "\n")))
    return page(request, "blame.html", **ctx, rows=rows, total_lines=total, highlighted=highlighted)


def history_page(
    page: Page, request: Request, identity: Identity, root: str, tc: ToolContext, row: Repo, ref: str, path: str
) -> Response:
    """The commits reachable from `ref` that changed `path` (a file, a directory, or '' for all)."""
    audit.record(request, identity, "commits.read", f"{row.name}:{path}" if path else row.name, ref=ref)
    scope = check_scope(path)
    try:
        n = max(1, min(int(request.query_params.get("page") or 1), 100_000))
    except ValueError:
        n = 1
    author = (request.query_params.get("author") or "").strip()[:MAX_AUTHOR_FILTER]
    links = Links(root, row.name)
    found, total = git_reads.list_commits(
        tc, row, ref, path=scope or None, author=author or None, page=n, per_page=PER_PAGE
    )
    # the filter's choices: the most frequent authors of this path (one bounded page, as
    # GET /api/commits/authors gives them), and the one in the address if it is not among them
    people, _ = git_reads.list_commit_authors(tc, row, ref, path=scope or None, per_page=MAX_AUTHOR_CHOICES)
    choices = [{"value": a.email or a.name, "label": f"{a.name} ({a.commit_count})"} for a in people]
    if author and author not in {c["value"] for c in choices}:
        choices.insert(0, {"value": author, "label": author})
    kind = git_reads.path_kind(tc, row, ref, scope)
    commits = []
    for c in found:
        at = None
        if kind == "blob":
            at = links.blob(c.hash, scope)
        elif kind == "tree":
            at = links.tree(c.hash, scope)
        commits.append(
            {
                "sha": c.hash,
                "short": _short(c.hash),
                "url": links.commit(c.hash),
                "message": c.message,
                "body": c.body,
                "author": c.author_name,
                "email": c.author_email,
                "date": _day(c.date),
                "iso": c.date,
                "refs": c.refs,
                "browse": at,
            }
        )
    last = max(1, -(-total // PER_PAGE))
    rev = short_ref(ref)
    return page(
        request,
        "history.html",
        title=f"History · {scope} · {row.name}" if scope else f"History · {row.name}",
        repo=row.name,
        rev=rev,
        path=scope,
        crumbs=_crumbs(links, ref, scope),
        commits=commits,
        total=total,
        page=n,
        last=last,
        kind=kind,
        prev_url=links.commits(ref, scope, n - 1, author) if n > 1 else None,
        next_url=links.commits(ref, scope, n + 1, author) if n < last else None,
        author=author,
        authors=choices,
        action=links.commits(ref, scope),
        here_url=(links.blob(ref, scope) if kind == "blob" else links.tree(ref, scope)) if kind else None,
    )


def commit_page(
    page: Page, request: Request, identity: Identity, root: str, tc: ToolContext, row: Repo, ref: str
) -> Response:
    """One commit, its message and what it changed against its first parent."""
    audit.record(request, identity, "commit.read", row.name, ref=ref)
    links = Links(root, row.name)
    changes = git_reads.commit_changes(tc, row, ref, max_files=MAX_FILES, max_bytes=MAX_DIFF_BYTES)
    detail, files, truncated, total = changes.detail, changes.files, changes.truncated, changes.total_files
    parent = detail.parents[0] if detail.parents else None
    shown = _diff_files(files, links, parent, detail.hash)
    return page(
        request,
        "commit.html",
        title=f"{detail.message[:80]} · {_short(detail.hash)} · {row.name}",
        repo=row.name,
        repo_url=links.tree(detail.hash),
        c=detail,
        short=_short(detail.hash),
        parents=[{"sha": p, "short": _short(p), "url": links.commit(p)} for p in detail.parents],
        files=shown,
        truncated=truncated,
        total_files=total,
        cap=CAP_TEXT,
        tree_url=links.tree(detail.hash),
        committer_differs=(detail.committer_name, detail.committer_email) != (detail.author_name, detail.author_email),
        additions=sum(f["additions"] for f in shown),
        deletions=sum(f["deletions"] for f in shown),
        compare_url=links.compare(parent, detail.hash) if parent else None,
    )


def compare_page(
    page: Page,
    request: Request,
    identity: Identity,
    root: str,
    tc: ToolContext,
    row: Repo,
    default_ref: str,
    resolve: Callable[[str], str],
) -> Response:
    """The form to pick two refs and, once both are given, the commits and the diff between them.
    `resolve` turns a ref as typed (a short branch or tag name, a commit) into one git reads."""
    q = request.query_params
    base, head, path = (q.get("base") or "").strip(), (q.get("head") or "").strip(), (q.get("path") or "").strip()
    links = Links(root, row.name)
    branches = [b.name for b in git_reads.branches(tc, row)][:500]
    tags = [t.name for t in git_reads.tags(tc, row, limit=500)[0]]
    ctx: dict[str, Any] = {
        "title": f"Compare · {row.name}",
        "repo": row.name,
        "repo_url": links.tree(default_ref),
        "base": base or short_ref(default_ref),
        "head": head,
        "path": path,
        "refs": branches + tags,
        "action": links.compare(),
        "files": None,
        "commits": [],
        "total_commits": 0,
        "truncated": False,
        "error": None,
    }
    if not (base and head):
        return page(request, "compare.html", **ctx)
    audit.record(request, identity, "diff.read", row.name, base=base, head=head)
    try:  # a typo in the form: the form again, saying which ref or path is wrong
        d = git_reads.diff(
            tc, row, resolve(base), resolve(head), path=path, max_files=MAX_FILES, max_bytes=MAX_DIFF_BYTES
        )
    except (InvalidGitRef, FileNotFound) as e:
        return page(request, "compare.html", status_code=400, **{**ctx, "error": str(e)})
    old, new, files, truncated, total_files = d.base_commit, d.head_commit, d.files, d.truncated, d.total_files
    commits, total = git_reads.commits_between(tc, row, old, new, limit=MAX_COMPARE_COMMITS)
    shown = _diff_files(files, links, old, new)
    ctx.update(
        title=f"{base}...{head} · {row.name}",
        files=shown,
        truncated=truncated,
        total_files=total_files,
        cap=CAP_TEXT,
        total_commits=total,
        commits=[
            {
                "sha": c.hash,
                "short": _short(c.hash),
                "url": links.commit(c.hash),
                "message": c.message,
                "author": c.author_name,
                "date": _day(c.date),
            }
            for c in commits
        ],
        base_commit=_short(old),
        head_commit=_short(new),
        swap_url=links.compare(head, base, path),
        additions=sum(f["additions"] for f in shown),
        deletions=sum(f["deletions"] for f in shown),
    )
    return page(request, "compare.html", **ctx)


# ---------------------------------------------------------------------- helpers


def _crumbs(links: Links, ref: str, path: str) -> list[dict[str, Any]]:
    out = [{"name": links.repo, "url": links.tree(ref)}]
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        out.append({"name": part, "url": links.tree(ref, "/".join(parts[: i + 1]))})
    return out
