"""The query parser: a query string (SPEC §4) to a query AST (`codesearch.query.ast`).

Grammar, as an EBNF-ish sketch (``WS`` is whitespace; ``(``/``)`` count as brackets only where
the parenthesis rule below says so)::

    query    = group-body
    group-body = WS* [ or-expr ] WS*
    or-expr  = and-expr { WS+ "or" WS+ and-expr }          (* `or` binds looser than AND *)
    and-expr = expr { WS* expr }                            (* juxtaposition is AND *)
    expr     = "-" ( group | prefix | quoted )              (* negation *)
             | group | prefix | quoted | word
    group    = "(" group-body ")"                           (* only when the "(" has a match *)
    prefix   = NAME ":" ( quoted | word )                   (* NAME: content c file f repo r lang
                                                               sym rev context reposet archived
                                                               fork visibility *)
    quoted   = '"' { char | '\\"' | '\\\\' } '"'
    word     = { non-WS char | '"' ... '"' }                (* runs to whitespace *)

Why these rules:

* ``or`` is an operator only as an unquoted, lower-case word between two expressions of the same
  group; as the first or last word of a group, right after another ``or`` word, or written
  ``OR``/``"or"``, it is the literal text "or". Code is full of the word, so a query never fails
  because of it, and ``a b or c d`` reads as (a AND b) OR (c AND d), like Zoekt and Sourcebot.
* ``(`` opens a group only at the start of an expression *and* when it has a matching ``)``:
  a forward scan counting nesting depth and skipping quoted strings. Otherwise it is an ordinary
  character of a word, so code fragments like ``foo(`` or ``(void`` search as typed. Inside a
  word brackets are ordinary too (``test()``, ``foo(bar)``); the scan still counts them, so
  ``(test())`` is the group holding the word ``test()``. The matching is computed once for the
  whole query with a stack (linear time), and the parser keeps an explicit stack of open groups,
  so 10,000 nested brackets neither recurse nor go quadratic.
* ``-`` negates only a prefix expression, a group or a quoted string; ``-foo`` stays the literal
  text (flags, ``->``, ``a-b`` are common in code).
* Quotes: inside ``"…"``, ``\\"`` is a quote and ``\\\\`` a backslash; any other backslash is kept,
  so ``"\\d+ x"`` is a usable regex. A quote opens a quoted string wherever it stands (outside
  another quoted string) when a closing quote follows; at the start of an expression (or of a
  prefix value) the string is decoded, inside a word it is kept verbatim, spaces included
  (``print("hello world")`` is one word). A quote with no closing quote is an error at the start
  of an expression or value, and an ordinary character inside a word.

Decisions beyond SPEC §4 (documented here and in the tests):

* After a group's ``)`` or a quoted string's closing quote, the next expression may start at
  once: ``(a)b`` is ``a AND b``.
* A leading balanced ``(`` is a group in regex mode too: ``(foo|bar)`` is the regex ``foo|bar``;
  quote a regex to keep its brackets (``"(foo|bar)baz"``). Except ``(?``: a bracket followed by
  ``?`` never opens a group, so regex flags and groups (``(?i)foo``, ``(?:a|b)c``) work unquoted.
* ``""`` (an empty quoted term) and an empty prefix value (``file:`` or ``file:""``) are errors.
* ``reposet:`` names are split on commas, stripped, and empty names dropped; none left is an error.
* ``archived:``/``fork:``/``visibility:`` values are case-sensitive (lower case, as in the SPEC).
* Regex errors point at the term's first character (the quote of a quoted term) or, for a
  prefix, at the value's first character. A missing value points just after the colon.
* A query with a lone surrogate (not encodable as UTF-8) is an error at that character.
"""

from __future__ import annotations

import re

from codesearch.errors import QueryParseError
from codesearch.query.ast import (
    And,
    Archived,
    Branch,
    Const,
    Content,
    Context,
    FileName,
    Fork,
    Language,
    Node,
    Not,
    Or,
    Repo,
    RepoSet,
    Symbol,
    Visibility,
)
from codesearch.query.regex import RegexError, compile_regex

__all__ = ["parse", "PREFIXES"]

#: Prefix name (as written, case-sensitive) → canonical prefix.
PREFIXES: dict[str, str] = {
    "content": "content",
    "c": "content",
    "file": "file",
    "f": "file",
    "repo": "repo",
    "r": "repo",
    "lang": "lang",
    "sym": "sym",
    "rev": "rev",
    "context": "context",
    "reposet": "reposet",
    "archived": "archived",
    "fork": "fork",
    "visibility": "visibility",
}

_TRISTATE = ("yes", "no", "only")
_VISIBILITY = ("public", "private", "any")

_SPACE = re.compile(r"\s+")
_SPECIAL = re.compile(r'[()"]')
# The rest of a quoted string after its opening quote, through the closing quote.
_QUOTE_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_WORD_RUN = re.compile(r'[^\s"]+')
_PREFIX = re.compile(r"([a-z]+):")
_UNESCAPE = re.compile(r'\\(["\\])')

_FALSE = Const(False)


class _OrWord:
    """A bare lower-case ``or`` word: an operator or a literal, decided when its group closes."""


_OR_WORD = _OrWord()


def parse(query: str, *, is_regex: bool = False, case_sensitive: bool = False) -> Node:
    """Parse `query` (SPEC §4) into an AST; raise `QueryParseError` when it does not parse.

    `is_regex` makes bare terms and ``content:`` values RE2 regexes (checked here);
    `case_sensitive` makes them, ``file:`` and ``sym:`` case-sensitive.
    """
    if not isinstance(query, str):
        raise QueryParseError("the query must be a string", repr(query), 0)
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as e:
        reason = "invalid character in query (lone surrogate)"
        raise QueryParseError(reason, query, e.start) from None
    return _Parser(query, bool(is_regex), bool(case_sensitive)).run()


def _scan(query: str) -> tuple[dict[int, int], dict[int, int]]:
    """One pass over `query`: matching brackets and quoted strings.

    Returns ``(match, quote_end)``: ``match[i]`` is the position of the ``)`` matching the ``(``
    at ``i``; ``quote_end[i]`` the closing quote of the quoted string opened at ``i``. Brackets
    inside quoted strings are skipped. A quote without a closing quote is an ordinary character
    (and then so is every later quote: none of them can be closed either).
    """
    match: dict[int, int] = {}
    quote_end: dict[int, int] = {}
    stack: list[int] = []
    quotes_live = True
    pos = 0
    search = _SPECIAL.search
    while True:
        m = search(query, pos)
        if m is None:
            break
        i = m.start()
        c = query[i]
        if c == '"':
            if quotes_live:
                qm = _QUOTE_REST.match(query, i + 1)
                if qm is not None:
                    quote_end[i] = qm.end() - 1
                    pos = qm.end()
                    continue
                quotes_live = False
        elif c == "(":
            stack.append(i)
        elif stack:
            match[stack.pop()] = i
        pos = i + 1
    return match, quote_end


class _Pending:
    """An And/Or under construction: `parts` are its children, where a part of the same kind is
    flattened into it when it is finally built (by `_build`, once, in linear time).

    Building real `And`/`Or` nodes at every group close would copy the children of nested groups
    of the same kind again at every level: quadratic on ``(a (b (c ...)))``.
    """

    __slots__ = ("kind", "parts", "flat", "node")

    def __init__(self, kind: type, parts: list):
        self.kind = kind
        self.parts = parts
        self.flat: list | None = None
        self.node: Node | None = None


def _is_false(x: object) -> bool:
    return isinstance(x, Const) and not x.value


def _and(children: list) -> object:
    """AND of simplified children: Const(False) wins; one child collapses; nested ANDs flatten."""
    for c in children:
        if _is_false(c):
            return _FALSE
    if not children:
        return _FALSE
    if len(children) == 1:
        return children[0]
    return _Pending(And, children)


def _or(children: list) -> object:
    """OR of simplified children: Const(False) dropped; one child collapses; nested ORs flatten."""
    parts = [c for c in children if not _is_false(c)]
    if not parts:
        return _FALSE
    if len(parts) == 1:
        return parts[0]
    return _Pending(Or, parts)


def _build(root: object) -> Node:
    """Turn a `_Pending` tree into real nodes, flattening same-kind children, without recursion."""
    if not isinstance(root, _Pending):
        return root  # type: ignore[return-value]
    stack = [root]
    while stack:
        p = stack[-1]
        if p.node is not None:
            stack.pop()
            continue
        if p.flat is None:
            kind = p.kind
            flat: list = []
            iters = [iter(p.parts)]
            while iters:
                for x in iters[-1]:
                    if isinstance(x, _Pending):
                        if x.node is None and x.kind is kind:
                            iters.append(iter(x.parts))
                            break
                        if x.node is not None:
                            x = x.node
                    if isinstance(x, kind):
                        flat.extend(x.children)
                    else:
                        flat.append(x)
                else:
                    iters.pop()
            p.flat = flat
            todo = [x for x in flat if isinstance(x, _Pending) and x.node is None]
            if todo:
                stack.extend(todo)
                continue
        p.node = p.kind(tuple(x.node if isinstance(x, _Pending) else x for x in p.flat))
        p.flat = None
        stack.pop()
    return root.node  # type: ignore[return-value]


class _Frame:
    """An open group: where it ends and what it holds so far."""

    __slots__ = ("bound", "negate", "items")

    def __init__(self, bound: int, negate: bool):
        self.bound = bound
        self.negate = negate
        self.items: list[object] = []


class _Parser:
    def __init__(self, query: str, is_regex: bool, case_sensitive: bool):
        self.q = query
        self.is_regex = is_regex
        self.cs = case_sensitive
        self.match, self.quote_end = _scan(query)

    # -- errors and leaves -----------------------------------------------------------------

    def _error(self, reason: str, pos: int) -> QueryParseError:
        return QueryParseError(reason, self.q, pos)

    def _check_regex(self, pattern: str, case_sensitive: bool, pos: int, what: str = "") -> None:
        try:
            compile_regex(pattern, case_sensitive)
        except RegexError as e:
            reason = str(e) or "invalid regular expression"
            raise self._error(f"{what}{reason}", pos) from None
        except Exception as e:  # noqa: BLE001 - any engine failure is a bad pattern to the user
            raise self._error(f"{what}invalid regular expression: {e}", pos) from None

    def _content(self, text: str, pos: int, what: str = "") -> Content:
        if self.is_regex:
            self._check_regex(text, self.cs, pos, what)
        return Content(text, self.is_regex, self.cs)

    def _quoted(self, s: int, bound: int) -> tuple[str, int]:
        """Decode the quoted string opened at `s`; return its text and the position after it."""
        e = self.quote_end.get(s)
        if e is None or e >= bound:
            raise self._error("unterminated quoted string (missing closing \")", s)
        return _UNESCAPE.sub(r"\1", self.q[s + 1 : e]), e + 1

    def _word_end(self, i: int, bound: int) -> int:
        """End of the word at `i`: the next whitespace outside quoted strings, or `bound`."""
        q = self.q
        j = i
        while j < bound:
            m = _WORD_RUN.match(q, j, bound)
            if m is not None:
                j = m.end()
                if j >= bound:
                    break
            if q[j] == '"':
                e = self.quote_end.get(j)
                j = e + 1 if e is not None and e < bound else j + 1
                continue
            break  # whitespace
        return j

    def _quoted_term(self, s: int, bound: int) -> tuple[Node, int]:
        text, end = self._quoted(s, bound)
        if not text:
            raise self._error('empty quoted term ""', s)
        return self._content(text, s), end

    def _prefix(self, i: int, bound: int) -> tuple[Node, int] | None:
        """The prefix expression at `i` and the position after it, or None if there is none."""
        q = self.q
        m = _PREFIX.match(q, i, bound)
        if m is None or m.group(1) not in PREFIXES:
            return None
        written = m.group(1)
        kind = PREFIXES[written]
        v = m.end()
        if v < bound and q[v] == '"':
            value, end = self._quoted(v, bound)
            if not value:
                raise self._error(f"empty value after {written}:", v)
        else:
            end = self._word_end(v, bound)
            if end == v:
                raise self._error(f"missing value after {written}:", v)
            value = q[v:end]
        return self._leaf(kind, written, value, v), end

    def _leaf(self, kind: str, written: str, value: str, v: int) -> Node:
        what = f"{written}: "
        if kind == "content":
            return self._content(value, v, what)
        if kind == "file":
            self._check_regex(value, self.cs, v, what)
            return FileName(value, self.cs)
        if kind == "repo":
            self._check_regex(value, False, v, what)
            return Repo(value)
        if kind == "sym":
            self._check_regex(value, self.cs, v, what)
            return Symbol(value, self.cs)
        if kind == "lang":
            return Language(value)
        if kind == "rev":
            return Branch(value)
        if kind == "context":
            return Context(value)
        if kind == "reposet":
            names = tuple(n for n in (p.strip() for p in value.split(",")) if n)
            if not names:
                raise self._error(f"{written}: needs at least one repository name", v)
            return RepoSet(names)
        if kind in ("archived", "fork"):
            if value not in _TRISTATE:
                raise self._error(
                    f"invalid value {value!r} for {written}: (expected yes, no or only)", v
                )
            return Archived(value) if kind == "archived" else Fork(value)
        assert kind == "visibility"
        if value not in _VISIBILITY:
            raise self._error(
                f"invalid value {value!r} for {written}: (expected public, private or any)", v
            )
        return Visibility(value)

    # -- groups ----------------------------------------------------------------------------

    def _finish(self, frame: _Frame) -> object:
        """Resolve the `or` words of a closed group: its simplified node (maybe `_Pending`)."""
        items = frame.items
        last = len(items) - 1
        clauses: list[list[object]] = [[]]
        prev_or_word = False
        for k, item in enumerate(items):
            if item is _OR_WORD:
                if 0 < k < last and not prev_or_word:
                    clauses.append([])
                    prev_or_word = True
                    continue
                prev_or_word = True
                clauses[-1].append(Content("or", self.is_regex, self.cs))
                continue
            prev_or_word = False
            clauses[-1].append(item)
        return _or([_and(c) for c in clauses if c])

    def run(self) -> Node:
        q = self.q
        frames = [_Frame(len(q), False)]
        i = 0
        while True:
            f = frames[-1]
            bound = f.bound
            m = _SPACE.match(q, i, bound)
            if m is not None:
                i = m.end()
            if i >= bound:
                node = self._finish(f)
                frames.pop()
                if not frames:
                    return _build(node)
                frames[-1].items.append(Not(_build(node)) if f.negate else node)
                i = bound + 1  # past the group's ")"
                continue

            c = q[i]
            if c == "-" and i + 1 < bound:
                d = q[i + 1]
                if d == "(" and q[i + 2 : i + 3] != "?":
                    end = self.match.get(i + 1)
                    if end is not None and end < bound:
                        frames.append(_Frame(end, True))
                        i += 2
                        continue
                elif d == '"':
                    node, i = self._quoted_term(i + 1, bound)
                    f.items.append(Not(node))
                    continue
                else:
                    r = self._prefix(i + 1, bound)
                    if r is not None:
                        f.items.append(Not(r[0]))
                        i = r[1]
                        continue
            elif c == "(":
                end = self.match.get(i)
                if end is not None and end < bound and q[i + 1 : i + 2] != "?":
                    frames.append(_Frame(end, False))
                    i += 1
                    continue
            elif c == '"':
                node, i = self._quoted_term(i, bound)
                f.items.append(node)
                continue
            else:
                r = self._prefix(i, bound)
                if r is not None:
                    f.items.append(r[0])
                    i = r[1]
                    continue

            # A plain word, running to the next whitespace (or the enclosing group's ")").
            j = self._word_end(i, bound)
            text = q[i:j]
            if text == "or":
                f.items.append(_OR_WORD)
            else:
                f.items.append(self._content(text, i))
            i = j
