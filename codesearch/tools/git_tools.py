"""Tools answered from a repository's git objects at any branch, tag or commit: `read_file`,
`list_tree`, `list_commits`, `list_branches`, `get_diff` (output formats: docs/mcp-tools.md#tools).

`list_commits` and `list_branches` answer in Sourcebot's JSON shapes, field for field, so an
agent written against Sourcebot reads them unchanged: a commit's `date` is its author date and
`refs` git's decoration text (``HEAD -> main, tag: v1.0``), as Sourcebot's git log shows them.

They read the bare mirror (or the local repository indexed in place) through `codesearch.git`
(paths, objects, trees, commits, diff), which validates refs and paths (no option injection,
no path outside the repository), so a tool sees exactly what ``git show <ref>:<path>`` would.
"""

from __future__ import annotations

import json

from codesearch.app import git_reads
from codesearch.app.context import ToolContext
from codesearch.errors import ToolInputError
from codesearch.plurals import plural
from codesearch.search.present import web_url
from codesearch.store.models import Repo
from codesearch.sync import repo_info

#: read_file: at most this many lines per call (docs/mcp-tools.md#read_file) ...
READ_MAX_LINES = 500
#: ... and about this many characters of file text (about 5 KB, docs/mcp-tools.md#answers); at least one line is shown
READ_MAX_CHARS = 5 * 1024
READ_MAX_LINE_CHARS = 2000


def _file_url(tc: ToolContext, row: Repo, ref: str, path: str) -> str:
    info = repo_info(row)
    return web_url(tc.public_url, info, ref, path)


def read_file(
    tc: ToolContext, repo: str, path: str, ref: str | None = None, offset: int | None = None, limit: int | None = None
) -> str:
    f = git_reads.read_file(
        tc, repo, path.lstrip("/") if path.startswith("/") and not path.startswith("//") else path, ref
    )
    row, path, use_ref = f.repo, f.path, f.ref
    if f.is_binary:
        raise ToolInputError(f"{path} is a binary file ({len(f.data)} bytes); read_file shows text files only")
    lines = f.text.splitlines()
    total = len(lines)
    start = offset or 1
    if total == 0:
        return f"[{row.name}] {path} @ {use_ref}\nURL: {_file_url(tc, row, use_ref, path)}\n\n(The file is empty.)"
    if start > total:
        raise ToolInputError(
            f"offset {start} is past the end of {path}, which has {plural(total, 'line')}: "
            f"use an offset from 1 to {total}"
        )
    want = min(limit or READ_MAX_LINES, READ_MAX_LINES)
    shown: list[str] = []
    size = 0
    for n in range(start, min(total, start + want - 1) + 1):
        text = lines[n - 1]
        if len(text) > READ_MAX_LINE_CHARS:
            text = text[:READ_MAX_LINE_CHARS] + f" … (line cut at {READ_MAX_LINE_CHARS} characters)"
        if shown and size + len(text) + 1 > READ_MAX_CHARS:
            break
        shown.append(f"{n}: {text}")
        size += len(text) + 1
    last = start + len(shown) - 1
    out = [f"[{row.name}] {path} @ {use_ref}", f"URL: {_file_url(tc, row, use_ref, path)}", ""]
    out += shown
    out.append("")
    if last < total:
        out.append(f"(Showing lines {start}-{last} of {total}. Continue with offset={last + 1}.)")
    else:
        out.append(f"(End of file: showing lines {start}-{last} of {total}.)")
    return "\n".join(out)


def list_tree(
    tc: ToolContext,
    repo: str,
    path: str | None = None,
    ref: str | None = None,
    depth: int = 1,
    includeFiles: bool = True,
    includeDirectories: bool = True,
    maxEntries: int = 1000,
) -> str:  # noqa: N803
    if not includeFiles and not includeDirectories:
        raise ToolInputError("includeFiles and includeDirectories are both false: nothing to list; set one to true")
    tree = git_reads.list_tree(
        tc,
        repo,
        path,
        ref,
        depth=depth,
        include_files=includeFiles,
        include_dirs=includeDirectories,
        max_entries=maxEntries,
    )
    row, under, use_ref, entries, truncated = tree.repo, tree.path, tree.ref, tree.entries, tree.truncated
    head = f"[{row.name}] {under + '/' if under else '/'} @ {use_ref}"
    if not entries:
        return head + "\n\n(No entries.)"
    out = [head, ""]
    for e in entries:
        if includeDirectories:
            out.append("  " * (e.depth - 1) + e.name + ("/" if e.is_dir else ""))
        else:  # files without their directories: show the path below the listed directory
            rel = e.path[len(under) + 1 :] if under else e.path
            out.append(rel)
    out.append("")
    if truncated:
        out.append(
            f"(Truncated at maxEntries={maxEntries} entries: list a subdirectory with path, lower depth, "
            "or raise maxEntries up to 10000.)"
        )
    else:
        out.append(f"({plural(len(entries), 'entry', 'entries')}.)")
    return "\n".join(out)


def list_commits(
    tc: ToolContext,
    repo: str,
    query: str | None = None,
    since: str | None = None,
    until: str | None = None,
    author: str | None = None,
    ref: str | None = None,
    page: int = 1,
    perPage: int = 50,
    path: str | None = None,
) -> str:  # noqa: N803
    from codesearch.errors import InvalidArgument
    from codesearch.git.dates import parse_when

    for name, value in (("since", since), ("until", until)):
        if value:
            try:
                parse_when(value)
            except InvalidArgument as e:
                raise ToolInputError(f"{name}: {e}") from None
    commits, total = git_reads.list_commits(
        tc, repo, ref, query=query, since=since, until=until, author=author, path=path, page=page, per_page=perPage
    )
    return json.dumps(
        {
            "commits": [
                {
                    "hash": c.hash,
                    "date": c.author_date,
                    "message": c.message,
                    "refs": c.decoration,
                    "body": c.body,
                    "authorName": c.author_name,
                    "authorEmail": c.author_email,
                }
                for c in commits
            ],
            "totalCount": total,
        },
        ensure_ascii=False,
    )


def list_branches(tc: ToolContext, repo: str, query: str | None = None, page: int = 1, perPage: int = 50) -> str:  # noqa: N803
    """Sourcebot's ``{repo, defaultBranch, indexedAt, totalCount, branches: [{name, commit,
    committedAt, isDefault, isIndexed}]}``, newest first. `isIndexed`: the index holds the
    branch, so grep and glob search it there (others only through git)."""
    from codesearch.tools.repos import iso

    row = tc.repo(repo)
    default = git_reads.default_branch(tc, row)
    indexed = set(row.indexed_revisions or {})
    branches = git_reads.branches(tc, row)
    if query:
        branches = [b for b in branches if query.lower() in b.name.lower()]
    start = (page - 1) * perPage
    out = {
        "repo": row.name,
        "defaultBranch": default,
        "indexedAt": iso(row.indexed_at),
        "totalCount": len(branches),
        "branches": [
            {
                "name": b.name,
                "commit": b.commit,
                "committedAt": b.committed_at,
                "isDefault": b.name == default,
                "isIndexed": f"refs/heads/{b.name}" in indexed
                or b.name in indexed
                or (b.name == default and "HEAD" in indexed),
            }
            for b in branches[start : start + perPage]
        ],
    }
    return json.dumps({k: v for k, v in out.items() if v is not None}, ensure_ascii=False)


def get_diff(tc: ToolContext, repo: str, base: str, head: str, path: str | None = None) -> str:
    from codesearch.git.diff import render_unified

    d = git_reads.diff(tc, repo, base, head, path=path)
    files, scope = d.files, d.scope
    if not files:
        return f"No differences between {base} and {head} in {d.repo.name}" + (f" under {scope}." if scope else ".")
    text = render_unified(files)
    if d.truncated:
        cut = files[-1]
        text += (
            f"\n\n(Diff truncated: it is too large to show whole; {len(files)} of {plural(d.total_files, 'file')} shown"
            + (f", the diff of {cut.new_path or cut.old_path} cut off" if cut.cut else "")
            + ". Diff one file or directory at a time with path, compare closer refs, or read single files with "
            "read_file at each ref.)"
        )
    return text
