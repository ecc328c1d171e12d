"""Linguist overrides from ``.gitattributes``: a file's language, and whether it is vendored,
generated or documentation, as GitHub Linguist reads them.

    *.inc           linguist-language=PHP
    third_party/**  linguist-vendored
    gen/*.pb.go     linguist-generated
    docs/**         linguist-documentation
    vendor/ours/**  -linguist-vendored

`Attributes` holds the rules of every ``.gitattributes`` file of one revision (read from the
commit's tree by `codesearch.index.sources.GitSource`, never from a work tree) and answers, for a
path, the `Linguist` overrides that apply. Git's rules decide which line applies: a pattern
without ``/`` matches a file name at any depth below the ``.gitattributes`` that holds it, one
with ``/`` matches the path relative to that directory (``*`` and ``?`` stop at ``/``, ``**``
crosses directories); a later line overrides an earlier one, and a deeper file overrides the
files above it. ``attr`` and ``attr=true`` set an attribute, ``-attr`` and ``attr=false`` unset
it, ``!attr`` forgets what earlier lines said. Other attributes, macros (``[attr]``) and
negated patterns (which git refuses in attribute files) are ignored.

Reading is bounded: at most `MAX_FILES` attribute files of at most `MAX_FILE_BYTES` each, and at
most `MAX_RULES` lines that name a linguist attribute; past that the rest is dropped with a
warning, and indexing goes on.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import enry

MAX_FILES = 256
MAX_FILE_BYTES = 64 * 1024
MAX_RULES = 512
ATTRIBUTES_FILE = ".gitattributes"
_KNOWN = ("linguist-language", "linguist-vendored", "linguist-generated", "linguist-documentation")


@dataclass(frozen=True)
class Linguist:
    """The overrides of one file: None where no rule says anything."""

    language: str | None = None  # a Linguist language name
    vendored: bool | None = None
    generated: bool | None = None
    documentation: bool | None = None


NONE = Linguist()


@functools.lru_cache(maxsize=512)
def language_name(value: str) -> str | None:
    """The Linguist name `value` (a name, or an alias as Linguist accepts them: ``cpp``,
    ``c++``, ``protocol-buffer``, ``Emacs-Lisp``, any case) stands for; None when it is none."""
    spaced = value.replace("-", " ")
    for cand in (value, spaced, value.upper(), value.title(), spaced.title(), value.capitalize()):
        try:
            if enry.get_language_type(cand) != "unknown":
                return cand
        except Exception:
            return None
    for cand in (value, value.replace("-", "_")):
        guess = enry.get_language_by_vim_modeline(f"vim: set ft={cand}:".encode()).language
        if guess:
            return str(guess)
    return None


def _pattern_regex(pattern: str) -> str:
    """The regex of a git wildmatch pattern with ``/`` (matched against a relative path)."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i) and i + 2 == n and (i == 0 or pattern[i - 1] == "/"):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            while i + 1 < n and pattern[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern.startswith(("[!", "[^"), i) else i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                neg = body[:1] in ("!", "^")
                body = (body[1:] if neg else body).replace("\\", "\\\\")
                out.append(f"[{'^' if neg else ''}{body}]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class _Rule:
    base: str  # the directory of its .gitattributes, "" or "a/b/"
    basename_only: bool
    regex: re.Pattern[str]
    attrs: tuple[tuple[str, str | bool | None], ...]  # (name, value); None: "!attr" (unspecified)


def _parse_line(line: str) -> tuple[str, tuple[tuple[str, str | bool | None], ...]] | None:
    fields = line.split()
    if len(fields) < 2 or fields[0].startswith(("#", "[attr]", "!")):
        return None
    attrs: list[tuple[str, str | bool | None]] = []
    for f in fields[1:]:
        value: str | bool | None
        if f.startswith("-"):
            name, value = f[1:], False
        elif f.startswith("!"):
            name, value = f[1:], None
        elif "=" in f:
            name, _, value = f.partition("=")
        else:
            name, value = f, True
        if name in _KNOWN:
            attrs.append((name, value))
    return (fields[0], tuple(attrs)) if attrs else None


class Attributes:
    """The linguist rules of one revision's ``.gitattributes`` files (see the module docstring)."""

    def __init__(self) -> None:
        self.rules: list[_Rule] = []
        self.warnings: list[str] = []
        self._files = 0

    def add_file(self, path: str, data: bytes) -> None:
        """Add the rules of the ``.gitattributes`` at `path` (files may come in any order: rules
        are kept ordered by depth, so that a deeper file overrides the ones above it)."""
        self._files += 1
        if self._files > MAX_FILES:
            if self._files == MAX_FILES + 1:
                self.warnings.append(f"more than {MAX_FILES} {ATTRIBUTES_FILE} files: the rest are not read")
            return
        if len(data) > MAX_FILE_BYTES:
            self.warnings.append(f"{path}: larger than {MAX_FILE_BYTES} bytes, not read")
            return
        base = path[: -len(ATTRIBUTES_FILE)]
        new: list[_Rule] = []
        for raw in data.decode("utf-8", "replace").splitlines():
            parsed = _parse_line(raw.strip())
            if parsed is None:
                continue
            pattern, attrs = parsed
            anchored = "/" in pattern.rstrip("/")
            if pattern.endswith("/"):  # matches directories only: never a file (git does the same)
                continue
            body = pattern.lstrip("/") if anchored else pattern
            new.append(_Rule(base, not anchored, re.compile(_pattern_regex(body)), attrs))
        room = MAX_RULES - len(self.rules)
        if len(new) > room:
            self.warnings.append(
                f"more than {MAX_RULES} linguist rules in {ATTRIBUTES_FILE} files: the rest are ignored"
            )
            new = new[: max(0, room)]
        self.rules.extend(new)
        self.rules.sort(key=lambda r: r.base.count("/"))  # stable: file order kept within a depth

    def __bool__(self) -> bool:
        return bool(self.rules)

    def of(self, path: str) -> Linguist:
        """The overrides for the file at `path` (relative to the repository's root)."""
        values: dict[str, str | bool | None] = {}
        name = path.rsplit("/", 1)[-1]
        for rule in self.rules:
            if not path.startswith(rule.base):
                continue
            subject = name if rule.basename_only else path[len(rule.base) :]
            if rule.regex.fullmatch(subject):
                values.update(rule.attrs)
        if not values:
            return NONE
        lang = values.get("linguist-language")
        return Linguist(
            language=language_name(lang) if isinstance(lang, str) else None,
            vendored=_flag(values.get("linguist-vendored")),
            generated=_flag(values.get("linguist-generated")),
            documentation=_flag(values.get("linguist-documentation")),
        )


def _flag(value: str | bool | None) -> bool | None:
    if isinstance(value, bool) or value is None:
        return value
    return {"true": True, "false": False}.get(value.lower())
