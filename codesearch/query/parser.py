"""The query parser: a query string (docs/query-language.md#syntax) to a query AST (`codesearch.query.ast`).

Sourcebot's grammar golden files are the reference for every parsing question; their cases are
tests (tests/engine/test_parser_conformance.py), with the few deliberate differences listed below.

Grammar, as an EBNF-ish sketch (``WS`` is whitespace; ``(``/``)`` count as brackets only where
the group rule below says so)::

    query      = group-body
    group-body = WS* [ or-expr ] WS*
    or-expr    = and-expr { WS+ "or" WS+ and-expr }        (* `or` binds looser than AND *)
    and-expr   = expr { WS* expr }                          (* juxtaposition is AND *)
    expr       = "-" WS* ( group | prefix )                 (* negation *)
               | group | prefix | quoted | word
    group      = "(" group-body ")"                         (* balanced and standing alone *)
    prefix     = NAME ":" ( quoted | word )                 (* NAME: content c file f repo r lang
                                                               sym rev context reposet archived
                                                               fork visibility path language *)
    quoted     = '"' { char | '\\"' | '\\\\' } '"'
    word       = { non-WS char | '"' ... '"' }              (* runs to whitespace *)

Why these rules:

* ``(`` opens a group only where an expression starts, when it has a matching ``)`` and that
  ``)`` stands alone: it is followed by whitespace, by the ``)`` of the group around it, or by the
  end of the query. Otherwise the bracket is an ordinary character of a word: ``foo(``,
  ``test()`` and ``(void`` search as typed, and a group glued to more text is part of one term,
  so in regex mode ``(foo|bar)baz``, ``(a+)+$`` and ``(def|class)\\s+url`` are each one regular
  expression. A ``(`` followed by ``?`` never opens a group, so regex flags and groups
  (``(?i)foo``, ``(?:a|b)``) work unquoted. A group standing alone in regex mode, ``(foo|bar)``,
  is the group holding the regex ``foo|bar``: the same matches as the regex ``(foo|bar)``.
* Bracket matching skips quoted strings and backslash-escaped characters (``\\(`` is not a
  bracket, as in Sourcebot), is computed once for the whole query with a stack (linear time), and
  the parser keeps an explicit stack of open groups, so 10,000 nested brackets neither recurse
  nor go quadratic.
* ``or`` is an operator only as an unquoted, lower-case word between two expressions of the same
  group; as the first or last word of a group it is the literal text "or" (``or test``,
  ``test or``), and so is ``OR`` or ``"or"``. Two operators in a row (``test or or example``) are
  an error, as in Sourcebot. ``a b or c d`` reads as (a AND b) OR (c AND d).
* ``-`` negates only a prefix expression or a group, which may follow after whitespace
  (``-file:test``, ``- file:test``, ``-(a or b)``). Anything else keeps the dash as text: ``-foo``
  is the literal ``-foo`` (flags, ``->``, ``a-b`` are common in code), ``-"foo"`` is a word.
* Quotes: inside ``"…"``, ``\\"`` is a quote and ``\\\\`` a backslash; any other backslash is
  kept, so ``"\\d+ x"`` is a usable regex. A quote opens a quoted string wherever it stands
  (outside another quoted string, not escaped) when a closing quote follows; at the start of an
  expression (or of a prefix value) the string is decoded, inside a word it is kept verbatim,
  spaces included. A quote with no closing quote is an ordinary character: ``"hello`` searches
  for the text ``"hello``.

Decisions beyond docs/query-language.md#syntax (documented here and in the tests):

* Deliberate differences from Sourcebot's grammar: glued groups are one term in both modes
  (``(a)(b)(c)`` is the text as typed, where Sourcebot's literal mode sees three groups); ``""``
  looks for nothing, like ``()`` (no results); a ``file:``/``repo:``/``sym:`` value that is not a
  regular expression (``file:*.ts``, ``file:(pr``) is an error here, at parse time; ``or`` at the
  edge of a group is the word (Sourcebot rejects ``(a or)``); a word keeps a closed quoted string
  whole (``print("hello world")`` is one word, Sourcebot splits it at the space).
* After a quoted string's closing quote, the next expression may start at once: ``"a"b`` is
  ``a AND b``.
* An empty prefix value (``file:`` or ``file:""``) is an error; so is an unknown value of
  ``archived:``/``fork:``/``visibility:`` (those values are case-sensitive, lower case).
* ``reposet:`` names are split on commas, stripped, and empty names dropped; none left is an error.
* A prefix value that starts with an unclosed quote is a word, quote included (``file:"abc``).
* GitHub code search's spellings are accepted too: ``path:`` is ``file:``, ``language:`` is
  ``lang:``, and a word written between slashes, ``/fo+/``, is a regex in either mode (at least
  one character between the slashes; ``//`` stays text; like every word it ends at whitespace,
  so write ``\\s`` for a space). Sourcebot has none of them, and none of
  them changes a query Sourcebot's grammar reads: its queries never spell these prefixes, and
  a quoted ``"/x/"`` is still the text. A slashed word that is not a valid regex is an error
  that says how to search for the text (quote it), since ``/**/`` is common in code.
* Regex errors point at the character of the query where the regex engine found the problem
  (an unclosed ``(`` or ``[`` at that bracket), mapped back through quotes and escapes. A
  missing value points just after the colon.
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
    # GitHub code search's names, accepted as aliases (not in Sourcebot's grammar).
    "path": "file",
    "language": "lang",
}

_TRISTATE = ("yes", "no", "only")
_VISIBILITY = ("public", "private", "any")

_SPACE = re.compile(r"\s+")
_SPECIAL = re.compile(r'[()"\\]')
# The rest of a quoted string after its opening quote, through the closing quote.
_QUOTE_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_WORD_RUN = re.compile(r'[^\s"]+')
_PREFIX = re.compile(r"([a-z]+):")
_UNESCAPE = re.compile(r'\\(["\\])')

_FALSE = Const(False)


class _OrWord:
    """A bare lower-case ``or`` word at `pos`: an operator or a literal, decided when its group
    closes (only then is it known whether it is the group's last word)."""

    __slots__ = ("pos",)

    def __init__(self, pos: int):
        self.pos = pos


def parse(query: str, *, is_regex: bool = False, case_sensitive: bool = False) -> Node:
    """Parse `query` (docs/query-language.md#syntax) into an AST; raise `QueryParseError` when it does not parse.

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
    inside quoted strings are skipped, and so is any character after a backslash (``\\(`` and
    ``\\"`` are ordinary characters). A quote without a closing quote is an ordinary character
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
        elif c == "\\":
            pos = i + 2
            continue
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

    def __init__(self, kind: type[And] | type[Or], parts: list[Node | _Pending]):
        self.kind = kind
        self.parts = parts
        self.flat: list[Node | _Pending] | None = None
        self.node: Node | None = None


def _is_false(x: object) -> bool:
    return isinstance(x, Const) and not x.value


def _and(children: list[Node | _Pending]) -> Node | _Pending:
    """AND of simplified children: Const(False) wins; one child collapses; nested ANDs flatten."""
    for c in children:
        if _is_false(c):
            return _FALSE
    if not children:
        return _FALSE
    if len(children) == 1:
        return children[0]
    return _Pending(And, children)


def _or(children: list[Node | _Pending]) -> Node | _Pending:
    """OR of simplified children: Const(False) dropped; one child collapses; nested ORs flatten."""
    parts = [c for c in children if not _is_false(c)]
    if not parts:
        return _FALSE
    if len(parts) == 1:
        return parts[0]
    return _Pending(Or, parts)


def _built(x: Node | _Pending) -> Node:
    """The node of `x`, a node or a `_Pending` that `_build` has built."""
    if isinstance(x, _Pending):
        assert x.node is not None, "children are built before their parent"
        return x.node
    return x


def _build(root: Node | _Pending) -> Node:
    """Turn a `_Pending` tree into real nodes, flattening same-kind children, without recursion."""
    if not isinstance(root, _Pending):
        return root
    stack = [root]
    while stack:
        p = stack[-1]
        if p.node is not None:
            stack.pop()
            continue
        if p.flat is None:
            kind = p.kind
            flat: list[Node | _Pending] = []
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
        p.node = p.kind(tuple(_built(x) for x in p.flat))
        p.flat = None
        stack.pop()
    return _built(root)


class _Frame:
    """An open group: where it ends and what it holds so far."""

    __slots__ = ("bound", "negate", "items")

    def __init__(self, bound: int, negate: bool):
        self.bound = bound
        self.negate = negate
        self.items: list[Node | _Pending | _OrWord] = []


class _Parser:
    def __init__(self, query: str, is_regex: bool, case_sensitive: bool):
        self.q = query
        self.is_regex = is_regex
        self.cs = case_sensitive
        self.match, self.quote_end = _scan(query)

    # -- errors and leaves -----------------------------------------------------------------

    def _error(self, reason: str, pos: int) -> QueryParseError:
        return QueryParseError(reason, self.q, pos)

    def _check_regex(
        self,
        pattern: str,
        case_sensitive: bool,
        pos: int,
        what: str = "",
        *,
        quoted: bool = False,
        skip: int = 0,
        advice: str = "",
    ) -> None:
        """Compile `pattern`, written at `pos` of the query (after `skip` characters such as
        the ``/`` of ``/…/``, or inside a quoted string when `quoted`); a bad pattern is an error
        at the character of the query where the regex engine found the problem."""
        try:
            compile_regex(pattern, case_sensitive)
        except RegexError as e:
            reason = str(e) or "invalid regular expression"
            at = self._query_offset(pos, quoted, skip, e.offset)
            raise self._error(f"{what}{reason}{advice}", at) from None
        except Exception as e:  # noqa: BLE001 - any engine failure is a bad pattern to the user
            raise self._error(f"{what}invalid regular expression: {e}{advice}", pos) from None

    def _query_offset(self, pos: int, quoted: bool, skip: int, offset: int) -> int:
        """The query position of character `offset` of a value written at `pos`: a quoted
        value starts after its quote, and each ``\\"`` or ``\\\\`` in it is one character."""
        if not quoted:
            return min(pos + skip + offset, len(self.q))
        q, j = self.q, pos + 1
        for _ in range(offset):
            if j >= len(q):
                break
            j += 2 if q[j] == "\\" and j + 1 < len(q) and q[j + 1] in '"\\' else 1
        return min(j, len(q))

    def _content(self, text: str, pos: int, what: str = "", quoted: bool = False) -> Content:
        if self.is_regex:
            self._check_regex(text, self.cs, pos, what, quoted=quoted)
        return Content(text, self.is_regex, self.cs)

    def _slashed(self, text: str, pos: int) -> Content:
        """A ``/…/`` term (GitHub's way to write a regex): the regex between the slashes, in
        either mode. A bad regex is an error that says how to search for the text instead."""
        pattern = text[1:-1]
        self._check_regex(pattern, self.cs, pos, skip=1, advice=f'; to search for the text, quote it: "{text}"')
        return Content(pattern, True, self.cs)

    def _quoted(self, s: int, bound: int) -> tuple[str, int] | None:
        """The decoded text of the quoted string opened at `s` and the position after it, or
        None when the quote at `s` opens none (no closing quote: it is an ordinary character)."""
        e = self.quote_end.get(s)
        if e is None or e >= bound:
            return None
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

    def _group_end(self, i: int, bound: int) -> int | None:
        """The ``)`` closing the group the ``(`` at `i` opens, or None when that bracket opens
        no group: unmatched, followed by ``?``, or its ``)`` glued to more text."""
        q = self.q
        end = self.match.get(i)
        if end is None or end >= bound or q[i + 1] == "?":
            return None
        after = end + 1
        if after == bound or q[after].isspace():
            return end
        return None

    def _prefix(self, i: int, bound: int) -> tuple[Node, int] | None:
        """The prefix expression at `i` and the position after it, or None if there is none."""
        q = self.q
        m = _PREFIX.match(q, i, bound)
        if m is None or m.group(1) not in PREFIXES:
            return None
        written = m.group(1)
        kind = PREFIXES[written]
        v = m.end()
        quoted = self._quoted(v, bound) if v < bound and q[v] == '"' else None
        if quoted is not None:
            value, end = quoted
            if not value:
                raise self._error(f"empty value after {written}:", v)
        else:
            end = self._word_end(v, bound)
            if end == v:
                raise self._error(f"missing value after {written}:", v)
            value = q[v:end]
        return self._leaf(kind, written, value, v, quoted is not None), end

    def _leaf(self, kind: str, written: str, value: str, v: int, quoted: bool = False) -> Node:
        what = f"{written}: "
        if kind == "content":
            return self._content(value, v, what, quoted)
        if kind == "file":
            self._check_regex(value, self.cs, v, what, quoted=quoted)
            return FileName(value, self.cs)
        if kind == "repo":
            self._check_regex(value, False, v, what, quoted=quoted)
            return Repo(value)
        if kind == "sym":
            self._check_regex(value, self.cs, v, what, quoted=quoted)
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
                raise self._error(f"invalid value {value!r} for {written}: (expected yes, no or only)", v)
            return Archived(value) if kind == "archived" else Fork(value)
        assert kind == "visibility"
        if value not in _VISIBILITY:
            raise self._error(f"invalid value {value!r} for {written}: (expected public, private or any)", v)
        return Visibility(value)

    # -- groups ----------------------------------------------------------------------------

    def _finish(self, frame: _Frame) -> Node | _Pending:
        """Resolve the `or` words of a closed group: its simplified node (maybe `_Pending`).

        An `or` word is an operator between the group's first and last items, the literal word
        at either edge; an operator right after another has nothing on its left.
        """
        items = frame.items
        last = len(items) - 1
        clauses: list[list[Node | _Pending]] = [[]]
        after_operator = False
        for k, item in enumerate(items):
            if isinstance(item, _OrWord):
                if 0 < k < last:
                    if after_operator:
                        raise self._error('`or` right after `or` (write "or" to search for the word)', item.pos)
                    clauses.append([])
                    after_operator = True
                    continue
                item = Content("or", self.is_regex, self.cs)
            after_operator = False
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
            if c == "-":
                # A negation: the dash, maybe whitespace, then a group or a prefix expression.
                m = _SPACE.match(q, i + 1, bound)
                j = m.end() if m is not None else i + 1
                if j < bound:
                    if q[j] == "(":
                        end = self._group_end(j, bound)
                        if end is not None:
                            frames.append(_Frame(end, True))
                            i = j + 1
                            continue
                    else:
                        r = self._prefix(j, bound)
                        if r is not None:
                            f.items.append(Not(r[0]))
                            i = r[1]
                            continue
            elif c == "(":
                end = self._group_end(i, bound)
                if end is not None:
                    frames.append(_Frame(end, False))
                    i += 1
                    continue
            elif c == '"':
                quoted = self._quoted(i, bound)
                if quoted is not None:
                    text, end = quoted
                    # An empty quoted term looks for nothing, like an empty group.
                    f.items.append(self._content(text, i, quoted=True) if text else _FALSE)
                    i = end
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
                f.items.append(_OrWord(i))
            elif len(text) >= 3 and text[0] == "/" and text[-1] == "/":
                f.items.append(self._slashed(text, i))
            else:
                f.items.append(self._content(text, i))
            i = j
