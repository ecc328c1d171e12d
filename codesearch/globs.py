"""Path-style globs, as used by ALWAYS_INDEX_FILE_PATTERNS, revision filters and file globs.

Syntax: ``*`` matches any run of characters except ``/``; ``**`` matches anything including
``/`` (``**/`` also matches no directory at all, so ``**/*.js`` matches ``a.js``); ``?`` one
character except ``/``; ``[abc]``, ``[a-z]``, ``[!abc]`` character classes; ``{a,b}``
alternatives (may nest). Everything else is literal. A glob matches the whole string.

`PatternList` applies a list of globs the way ALWAYS_INDEX_FILE_PATTERNS does: a leading ``!``
negates, the last matching pattern decides, and a pattern without ``/`` also matches a path's
base name (like .gitignore), so ``*.min.js`` matches ``web/app.min.js``.
"""

from __future__ import annotations

import functools
import re


def glob_to_regex(glob: str) -> str:
    """The regex (Python/RE2 syntax, anchored) that matches exactly what `glob` matches."""
    out, i, n, depth = [], 0, len(glob), 0
    while i < n:
        c = glob[i]
        if c == "*":
            if glob.startswith("**", i):
                i += 2
                if glob.startswith("/", i):
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = glob.find("]", i + 2 if glob.startswith(("[!", "[^"), i) else i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = glob[i + 1 : j]
                neg = body[:1] in ("!", "^")
                body = body[1:] if neg else body
                body = body.replace("\\", "\\\\")
                out.append(f"[{'^' if neg else ''}{body}]")
                i = j
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    out.extend(")" * depth)
    return "(?s:" + "".join(out) + r")\Z"


@functools.lru_cache(maxsize=1024)
def compile_glob(glob: str) -> re.Pattern[str]:
    """A compiled, anchored matcher for `glob`."""
    return re.compile(glob_to_regex(glob))


def glob_match(glob: str, text: str) -> bool:
    """True when `glob` matches the whole of `text`."""
    return compile_glob(glob).match(text) is not None


class PatternList:
    """An ordered list of globs, where ``!`` negates and the last matching pattern wins."""

    def __init__(self, patterns: list[str] | tuple[str, ...]):
        self.rules: list[tuple[bool, re.Pattern[str], bool]] = []
        for p in patterns:
            p = p.strip()
            if not p or p == "!":
                continue
            negate = p.startswith("!")
            body = p[1:] if negate else p
            self.rules.append((not negate, compile_glob(body), "/" not in body))

    @classmethod
    def from_env(cls, value: str | None) -> PatternList:
        """Parse a comma-separated list, as in the ALWAYS_INDEX_FILE_PATTERNS variable."""
        return cls((value or "").split(","))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def matches(self, path: str) -> bool:
        """True when the last pattern that matches `path` is not negated."""
        base = path.rsplit("/", 1)[-1]
        result = False
        for include, rx, basename_too in self.rules:
            if rx.match(path) or (basename_too and rx.match(base)):
                result = include
        return result
