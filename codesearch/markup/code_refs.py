"""Model answers as HTML whose code references open the file at the line.

The agent is told to cite code as ``repo/path:line`` or ``repo/path:start-end`` (e.g.
``github.com/acme/api/src/retry.py:42``), in backticks or in running text. `render_answer`
renders the answer as `codesearch.markup.markdown` does (no raw HTML, no images, safe links) and
turns each such reference into a link to this service's file page, scrolled to the line:
``<root>/browse/<repo>/-/blob/<path>#L42`` (``#L12-L14`` for a range).

Only references to repositories in `repos` (those the viewer may read) become links, so a
citation never confirms that a hidden repository exists; the repository is the longest of those
names that the reference starts with (names contain slashes). References inside a link the model
wrote stay as they are. The links are made as markdown tokens, never as HTML text, so the
renderer escapes them like everything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markupsafe import Markup

from codesearch.markup.markdown import _build
from codesearch.markup.urls import browse_url

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext

#: ``<repo>/<path>:<line>[-<end>]``: at least one slash, no spaces.
REF = re.compile(r"(?<![\w/.@~+-])((?:[\w.@~+-]+/)+[\w.@~+-]+):(\d{1,7})(?:-L?(\d{1,7}))?(?![\w])")


def _url(root: str, repo: str, path: str, start: str, end: str | None) -> str:
    anchor = f"#L{int(start)}" + (f"-L{int(end)}" if end and int(end) > int(start) else "")
    return browse_url(root, repo, None, "blob", path) + anchor


def _resolve(ref: str, repos: list[str]) -> tuple[str, str] | None:
    """(repo, path) of ``repo/path`` for the longest matching repository name, or None."""
    for repo in repos:  # longest first
        if ref.startswith(repo + "/") and len(ref) > len(repo) + 1:
            return repo, ref[len(repo) + 1 :]
    return None


def _link(url: str) -> tuple[Token, Token]:
    return (Token("link_open", "a", 1, attrs={"href": url, "class": "code-ref"}), Token("link_close", "a", -1))


def _split_text(token: Token, repos: list[str], root: str) -> list[Token]:
    out, pos, text = [], 0, token.content
    for m in REF.finditer(text):
        found = _resolve(m.group(1), repos)
        if found is None:
            continue
        if m.start() > pos:
            out.append(Token("text", "", 0, content=text[pos : m.start()]))
        opening, closing = _link(_url(root, found[0], found[1], m.group(2), m.group(3)))
        out += [opening, Token("text", "", 0, content=m.group(0)), closing]
        pos = m.end()
    if not out:
        return [token]
    if pos < len(text):
        out.append(Token("text", "", 0, content=text[pos:]))
    return out


def _link_refs(state: StateCore) -> None:
    repos: list[str] = state.env.get("repos") or []
    root: str = state.env.get("root") or ""
    if not repos:
        return
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children, depth = [], 0
        for tok in block.children:
            if tok.type == "link_open":
                depth += 1
            elif tok.type == "link_close":
                depth -= 1
            if depth == 0 and tok.type == "text":
                children += _split_text(tok, repos, root)
            elif depth == 0 and tok.type == "code_inline":
                m = REF.fullmatch(tok.content.strip())
                found = _resolve(m.group(1), repos) if m else None
                if m is None or found is None:
                    children.append(tok)
                else:
                    opening, closing = _link(_url(root, found[0], found[1], m.group(2), m.group(3)))
                    children += [opening, tok, closing]
            else:
                children.append(tok)
        block.children = children


_md = _build()
_md.core.ruler.push("code_refs", _link_refs)


def render_answer(text: str, repos: Iterable[str], root: str = "") -> Markup:
    """The HTML of a model answer with its code references linked (see the module docstring)."""
    env = {"repos": sorted(set(repos), key=len, reverse=True), "root": root}
    return Markup(_md.render(text or "", env))


def visible_names(tc: ToolContext) -> list[str]:
    """The names of the repositories the viewer of `tc` may read, sorted."""
    return sorted(r.name for r in tc.visible_repos())


def answer_html(tc: ToolContext, text: str, root: str, names: list[str] | None = None) -> Markup:
    """A model answer as safe HTML for the viewer of `tc`: code references to the repositories they
    may read (`names`, else `visible_names`) open the file at the line."""
    return render_answer(text or "", visible_names(tc) if names is None else names, root)
