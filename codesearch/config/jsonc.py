"""JSON with comments and trailing commas, as Sourcebot config files are written.

`parse_jsonc` accepts plain JSON plus ``// line`` and ``/* block */`` comments (outside strings)
and a trailing comma before ``}`` or ``]``. Nothing else of JSON5 is accepted (no single quotes,
no unquoted keys, no NaN): a file that loads here loads in Sourcebot and the other way round.

Comments and trailing commas are replaced by spaces of the same length (newlines kept), so the
line and column of a syntax error are those of the original text.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn


class JsoncError(ValueError):
    """Not valid JSON-with-comments: `line` and `column` are 1-based positions in the original text."""

    def __init__(self, reason: str, line: int, column: int):
        self.reason = reason
        self.line = line
        self.column = column
        super().__init__(f"line {line}, column {column}: {reason}")


def _position(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def strip_jsonc(text: str) -> str:
    """`text` with comments and trailing commas blanked out (same length, same line breaks)."""
    out = list(text)
    n = len(text)

    def blank(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] not in "\r\n":
                out[k] = " "

    # Pass 1: comments.
    i, in_str = 0, False
    while i < n:
        c = text[i]
        if in_str:
            if c == "\\":
                i += 2
                continue
            if c == '"' or c == "\n":  # an unterminated string ends at the line end for our purpose
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            i += 1
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            if j < 0:
                raise JsoncError("unterminated /* comment", *_position(text, i))
            blank(i, j + 2)
            i = j + 2
        else:
            i += 1

    # Pass 2: trailing commas (a comma followed, after blanks, by } or ], not preceded by [ { or ,).
    stripped = "".join(out)
    i, in_str, prev = 0, False, ""
    while i < n:
        c = stripped[i]
        if in_str:
            if c == "\\":
                i += 2
                continue
            if c == '"' or c == "\n":
                in_str = False
                prev = '"'
            i += 1
            continue
        if c == '"':
            in_str = True
        elif c == "," and prev not in ("[", "{", ","):
            j = i + 1
            while j < n and stripped[j] in " \t\r\n":
                j += 1
            if j < n and stripped[j] in "}]":
                out[i] = " "
                i += 1
                continue
        if c not in " \t\r\n":
            prev = c
        i += 1
    return "".join(out)


_CONSTANT = re.compile(r'"(?:[^"\\\n]|\\.)*"|(-?Infinity|NaN)')


def _no_constants(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


def parse_jsonc(text: str, duplicates: list[str] | None = None) -> Any:
    """Parse JSON with comments and trailing commas. Raises JsoncError with line and column.

    When `duplicates` is a list, keys that appear twice in one object are appended to it (the
    last value wins, as in JSON.parse)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    cleaned = strip_jsonc(text)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for k, v in items:
            if k in d and duplicates is not None:
                duplicates.append(k)
            d[k] = v
        return d

    try:
        return json.loads(cleaned, object_pairs_hook=pairs, parse_constant=_no_constants)
    except json.JSONDecodeError as e:
        reason = e.msg[:1].lower() + e.msg[1:]
        raise JsoncError(reason, e.lineno, e.colno) from None
    except ValueError as e:  # NaN / Infinity: find where, outside strings
        m = next((m for m in _CONSTANT.finditer(cleaned) if m.group(1)), None)
        raise JsoncError(str(e), *(_position(cleaned, m.start(1)) if m else (1, 1))) from None
    except RecursionError:
        raise JsoncError("nested too deeply", 1, 1) from None
