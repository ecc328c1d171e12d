"""Markdown of model answers (``/chat/<id>``), rendered so that nothing in it can run or call out.

A model's answer is untrusted text: it may quote repository files, and a prompt injected through
those files may try to smuggle HTML or an image whose URL carries data out. So the answer goes
through markdown-it-py (CommonMark, plus GFM tables) with:

- raw HTML off: ``<script>`` and every other tag come out as escaped text;
- images off: ``![alt](url)`` never makes the browser fetch anything; it shows as a link;
- links validated by markdown-it (no ``javascript:``, ``vbscript:``, ``file:`` or ``data:``)
  and opened with ``rel="noopener noreferrer nofollow"``.

The result is `markupsafe.Markup`, ready for a Jinja2 template.
"""

from __future__ import annotations

from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup

_REL = "noopener noreferrer nofollow"


def _link_open(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    tokens[idx].attrSet("rel", _REL)
    return self.renderToken(tokens, idx, options, env)


def _build() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")
    md.add_render_rule("link_open", _link_open)
    return md


_md = _build()


def render_markdown(text: str) -> Markup:
    """The HTML of `text` read as Markdown (see the module docstring for what is left out)."""
    return Markup(_md.render(text or ""))
