"""The results page's preview of a file: ``GET /browse/<repo>@<rev>/-/blob/<path>?preview&line=<n>``.

What the preview panel of the results page (``static/preview.js``) shows beside the results: the
file's lines around line `n`, highlighted as the file page highlights them
(`codesearch.web.highlight`), as an HTML fragment (no page around it). It is the file page's
route with one more query parameter, so it has the file page's permissions exactly: the
repository goes through the caller's `ToolContext`, and a repository the caller may not see is
the same 404 as one that does not exist. Each preview is an audit record, as a file page is
(``source.read``, with ``preview``).

Bounded: the file is read and highlighted within the file page's limits
(`highlight.MAX_HIGHLIGHT_BYTES`), and at most `PREVIEW_LINES` lines are sent, a window around
line `n`; the panel links to the file page for the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup

from codesearch import audit
from codesearch.app import git_reads
from codesearch.git.paths import check_path
from codesearch.permissions import Identity
from codesearch.service.middleware.security_headers import page_headers
from codesearch.web import highlight
from codesearch.web.templating import template

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext
    from codesearch.store.models import Repo

#: The most lines one preview sends (a window around the line asked for).
PREVIEW_LINES = 2000


def wanted_line(raw: str | None) -> int:
    """The line a preview is centred on: ``?line=`` as a positive integer, else 1."""
    try:
        return max(1, int(raw or 1))
    except ValueError:
        return 1


def window(line: int, total: int, size: int = PREVIEW_LINES) -> tuple[int, int]:
    """The 1-based first and last lines of a window of at most `size` lines of a file of `total`
    lines, with `line` (clamped into the file) in the middle unless an end of the file is nearer."""
    if total <= 0:
        return 1, 0
    line = min(max(line, 1), total)
    first = max(1, min(line - size // 2, total - size + 1))
    return first, min(total, first + size - 1)


def preview_fragment(request: Request, identity: Identity, tc: ToolContext, row: Repo, ref: str, path: str) -> Response:
    """The fragment the preview panel shows (see the module docstring). Errors are the file
    page's (`pages_search.browse` turns them into its 404 and 400 pages)."""
    check_path(path)
    audit.record(request, identity, "source.read", f"{row.name}:{path}", ref=ref, preview=True)
    f = git_reads.read_file(tc, row, path, ref)
    ctx: dict[str, object] = {"path": path, "size": len(f.data), "binary": f.is_binary}
    if f.is_binary:
        html = template("_preview.html").render(**ctx, lines=[], first=1, total=0, highlighted=False)
    else:
        lines, highlighted = highlight.highlight_lines(path, f.language, f.text)
        total = len(highlight.split_lines(f.text.replace("\r\n", "\n")))
        first, last = window(wanted_line(request.query_params.get("line")), len(lines))
        html = template("_preview.html").render(
            **ctx,
            lines=[Markup(x) for x in lines[first - 1 : last]],  # escaped by Pygments / markupsafe
            first=first,
            total=total,
            highlighted=highlighted,
            language=f.language,
        )
    return HTMLResponse(html, headers=page_headers())
