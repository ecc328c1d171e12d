"""The size budget of a tool's answer (docs/mcp-tools.md#answers): about 20 KB per call.

An agent pays for every byte a tool returns with its context window: one ``grep "def "``
over a few repositories is easily 80 KB, most of it never read. So every answer is held to
`ANSWER_BUDGET` bytes (UTF-8), as Sourcebot holds its search results to a token budget, and an
answer that had to be cut says so and how to ask a narrower question:

* text answers (`fit_text`) are cut at a line boundary (a line longer than the whole budget, the
  only exception, is cut inside) and end with ``(Answer cut at 20 KB: showing N of M lines. …)``
  naming what to narrow;
* JSON answers (`fit_json`) must stay parseable and keep their shape, so whole items are left
  out from the end of the listed page and a ``note`` key says how many fit and how to page with
  fewer per page or narrow the listing.

`read_file` pages at about 5 KB on its own and never reaches the budget.
"""

from __future__ import annotations

import json
from typing import Any

#: bytes of UTF-8 text one tool call may return
ANSWER_BUDGET = 20 * 1024


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _cut_line(line: str, room: int) -> str:
    """The longest prefix of `line` of at most `room` bytes, cut at a character boundary."""
    return line.encode("utf-8")[: max(room, 0)].decode("utf-8", "ignore")


def fit_text(text: str, narrow: str, budget: int = ANSWER_BUDGET) -> str:
    """`text` if it fits in `budget` bytes, else its first lines and a hint that ends with
    `narrow` (how to ask for less); the result fits in `budget`."""
    if _size(text) <= budget:
        return text
    lines = text.split("\n")
    total = len(lines)

    def hint(shown: int) -> str:
        return f"(Answer cut at {budget // 1024} KB: showing {shown} of {total} lines. {narrow})"

    room = budget - _size("\n\n" + hint(total))  # the widest the hint gets: `shown` has at most total's digits
    kept: list[str] = []
    used = 0
    for line in lines:
        need = _size(line) + (1 if kept else 0)
        if used + need > room:
            if not kept:  # one line longer than the whole budget
                kept.append(_cut_line(line, room))
            break
        kept.append(line)
        used += need
    while len(kept) > 1 and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept) + "\n\n" + hint(len(kept))


def fit_json(value: Any, items_key: str | None, noun: str, narrow: str, budget: int = ANSWER_BUDGET) -> str:
    """`value` as compact JSON, with as many of its items as fit in `budget` bytes.

    The items are ``value[items_key]`` (or `value` itself when it is a list, `items_key` None).
    When some are left out, a ``note`` key (objects only) says how many of how many `noun` are
    shown and ends with `narrow`."""
    text = json.dumps(value, ensure_ascii=False)
    if _size(text) <= budget:
        return text
    items = value if items_key is None else value[items_key]

    def render(k: int) -> str:
        if items_key is None:
            return json.dumps(items[:k], ensure_ascii=False)
        note = (
            f"Only the first {k} of the {len(items)} {noun} on this page fit in the {budget // 1024} KB answer "
            f"budget: ask for fewer per page (perPage={max(k, 1)}) and page through, or {narrow}"
        )
        return json.dumps({**value, items_key: items[:k], "note": note}, ensure_ascii=False)

    lo, hi = 0, len(items) - 1  # the largest k whose rendering fits (k = 0 is assumed to)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _size(render(mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return render(lo)
