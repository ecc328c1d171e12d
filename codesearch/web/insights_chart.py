"""A line chart drawn on the server as SVG: an insight's (one line per query over the points) and
the usage page's (`codesearch.web.pages_usage`: one line per kind of call over the days).

Why on the server: the pages carry no chart library and need none for this; an SVG in the
page is drawn at once, works without script, prints, and scales. What it takes to be readable by
everyone:

* the axes are labelled (dates below, counts on the left, with round ticks and grid lines), and
  each line has a colour of its own and a dash pattern of its own (`DASHES`), so lines stay
  apart without colour; each point has a ``<title>`` (its query, date and count) for pointers;
* the chart is an image with a title and a description for assistive technology
  (``role="img"``, ``aria-labelledby``); the numbers themselves are in the table the page puts
  under it, which is what a screen reader reads;
* colours come from the stylesheet (``insights.css``, light and dark), text and axes use
  ``currentColor``: no inline style, nothing the page's Content-Security-Policy forbids.

All text is escaped here (`markupsafe.escape`): queries and names are the user's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from markupsafe import Markup, escape

__all__ = ["DASHES", "SERIES_CLASSES", "Series", "line_chart", "nice_ticks"]

#: Colour classes of the lines (`insights.css`), in order; a chart with more lines reuses them
#: with another dash pattern.
SERIES_CLASSES = tuple(f"series-{i}" for i in range(8))
#: Dash patterns of the lines, in order (solid first).
DASHES = ("", "7 4", "2 3", "10 3 2 3", "4 4", "1 4", "12 4", "6 2 2 2")

W, H = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 72, 40, 16, 62
#: At most this many date labels under the axis.
MAX_X_LABELS = 8


@dataclass(frozen=True)
class Series:
    """One line: its legend `label` and one value per date."""

    label: str
    values: Sequence[int]


def style_of(i: int) -> tuple[str, str]:
    """(colour class, dash pattern) of the `i`-th line: colours first, then dashes too, so that
    no two of the first 64 lines look alike."""
    return SERIES_CLASSES[i % len(SERIES_CLASSES)], DASHES[(i + i // len(SERIES_CLASSES)) % len(DASHES)]


def nice_ticks(top: int, count: int = 5) -> list[int]:
    """Round tick values from 0 to at least `top` (about `count` of them): steps of 1, 2, 2.5
    or 5 times a power of ten, whole numbers only."""
    if top <= 0:
        return [0, 1]
    raw = top / count
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)
    step = max(1, math.ceil(step))
    return list(range(0, math.ceil(top / step) * step + 1, step))


def date_label(t: datetime, step: str) -> str:
    if step == "year":
        return f"{t:%Y}"
    if step in ("month", "quarter"):
        return f"{t:%Y-%m}"
    return f"{t:%Y-%m-%d}"


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def line_chart(
    dates: Sequence[datetime],
    series: Sequence[Series],
    *,
    title: str,
    step: str,
    y_label: str = "Matches",
    chart_id: str = "chart",
    per: str = "query",
) -> Markup:
    """The SVG of a line chart of `series` over `dates` (see the module docstring); `per` names
    what one line is in the description (an insight's lines are one per query, the usage page's
    one per kind of call)."""
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    n = len(dates)
    ticks = nice_ticks(max((v for s in series for v in s.values), default=0))
    top = ticks[-1]

    def x(i: int) -> float:
        return LEFT + (pw / 2 if n == 1 else i * pw / (n - 1))

    def y(v: float) -> float:
        return TOP + ph - v * ph / top

    first, last = (date_label(dates[0], step), date_label(dates[-1], step)) if dates else ("", "")
    desc = (
        f"{len(series)} line{'s' if len(series) != 1 else ''}, one per {per}, over {n} point"
        f"{'s' if n != 1 else ''} from {first} to {last}; the table below lists every count."
    )
    out = [
        f'<svg class="insight-chart" viewBox="0 0 {W} {H}" role="img" '
        f'aria-labelledby="{chart_id}-title {chart_id}-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{chart_id}-title">{escape(title)}</title>',
        f'<desc id="{chart_id}-desc">{escape(desc)}</desc>',
        '<g class="grid" fill="currentColor" font-size="14">',
    ]
    for t in ticks:
        out.append(f'<line class="gridline" x1="{LEFT}" x2="{W - RIGHT}" y1="{_num(y(t))}" y2="{_num(y(t))}"/>')
        out.append(f'<text x="{LEFT - 8}" y="{_num(y(t) + 5)}" text-anchor="end">{t:,}</text>')
    every = max(1, math.ceil(n / MAX_X_LABELS))
    for i, when in enumerate(dates):
        if i % every == 0:
            out.append(f'<line class="tick" x1="{_num(x(i))}" x2="{_num(x(i))}" y1="{TOP + ph}" y2="{TOP + ph + 5}"/>')
            shown = escape(date_label(when, step))
            out.append(f'<text x="{_num(x(i))}" y="{TOP + ph + 22}" text-anchor="middle">{shown}</text>')
    out += [
        f'<line class="axis" x1="{LEFT}" x2="{W - RIGHT}" y1="{TOP + ph}" y2="{TOP + ph}"/>',
        f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + ph}"/>',
        f'<text class="axis-title" x="{LEFT + pw / 2:g}" y="{H - 8}" text-anchor="middle">Date</text>',
        f'<text class="axis-title" transform="translate(16 {TOP + ph / 2:g}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>',
        "</g>",
    ]
    for k, s in enumerate(series):
        cls, dash = style_of(k)
        pts = " ".join(f"{_num(x(i))},{_num(y(v))}" for i, v in enumerate(s.values))
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<g class="series {cls}" data-series="{k}">')
        if n > 1:
            out.append(f'<polyline class="line" points="{pts}" fill="none" stroke-width="2.5"{dash_attr}/>')
        for i, v in enumerate(s.values):
            label = f"{s.label} · {date_label(dates[i], step)}: {v:,}"
            dot = f'<circle class="dot" cx="{_num(x(i))}" cy="{_num(y(v))}" r="3.5">'
            out.append(f"{dot}<title>{escape(label)}</title></circle>")
        out.append("</g>")
    out.append("</svg>")
    return Markup("\n".join(out))


def swatch(i: int) -> Markup:
    """The legend's sample of the `i`-th line: a short stroke in its colour and dash pattern."""
    cls, dash = style_of(i)
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    return Markup(
        f'<svg class="swatch series {cls}" viewBox="0 0 36 12" width="36" height="12" aria-hidden="true" '
        f'focusable="false"><line class="line" x1="1" x2="35" y1="6" y2="6" stroke-width="2.5"{dash_attr}/></svg>'
    )
