"""The queries of a batch: what the caller wrote (a query string, or a ``POST /api/search`` body)
made into `QuerySpec`s, each with its own options and its position in the batch (`query_id`),
and checked before any work starts, so that a mistake is reported with where it is.

A string is a query of the ordinary query language with the batch's defaults (`Defaults`); a dict
is a search body as ``POST /api/search`` takes it: ``query`` (required), ``matches``,
``isRegexEnabled``, ``isCaseSensitivityEnabled`` (each defaulting to the batch's), and, as the API
does, other fields are ignored (``contextLines``, ``whole`` and ``source`` change nothing in a row
of a batch).

`queries_from_lines` reads a queries file's lines (``codesearch batch``): one query per line, or
JSON Lines of bodies; every non-blank line is a query and gets the next `query_id`, a bad one too
(reported with its line number, then left out), so ids follow the file whatever goes wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codesearch.errors import CodesearchError, InvalidArgument, Reduced, SearchContextNotFound
from codesearch.search.engine import check_query
from codesearch.search.options import SearchOptions

#: The fields of a search body a batch reads (the others are ignored, as ``POST /api/search`` does).
BODY_FIELDS = ("query", "matches", "isRegexEnabled", "isCaseSensitivityEnabled")


class BadQuery(InvalidArgument):
    """A query of a batch that cannot run: `query_id` says which, `line` (1-based, 0 when it did
    not come from a file) where it is in its file."""

    def __init__(self, query_id: int, reason: str, line: int = 0):
        self.query_id = query_id
        self.reason = reason
        self.line = line
        where = f"line {line} (query {query_id})" if line else f"query {query_id}"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> Reduced:
        return (type(self), (self.query_id, self.reason, self.line))


@dataclass(frozen=True)
class Defaults:
    """What a query string (or a body without the field) is run with."""

    matches: int = 10_000
    regex: bool = False
    case_sensitive: bool = False
    #: Seconds each query may take; None: no limit in-process (each document's fallback regex
    #: keeps its own budget), a service's own limit through one.
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.matches, bool) or not isinstance(self.matches, int) or self.matches < 1:
            raise InvalidArgument(f"matches must be a positive integer, not {self.matches!r}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise InvalidArgument(f"timeout_s must be a positive number of seconds, not {self.timeout_s!r}")


@dataclass(frozen=True)
class QuerySpec:
    """One query of a batch, ready to run: its id (position in the batch, from 0), its text and
    its options."""

    query_id: int
    query: str
    options: SearchOptions = field(default_factory=SearchOptions)
    #: The line of the queries file it came from (1-based; 0: not from a file).
    line: int = 0


def spec_of(query_id: int, query: str | Mapping[str, Any], defaults: Defaults, line: int = 0) -> QuerySpec:
    """`query` (a string or a search body) as a `QuerySpec`, or `BadQuery` saying what is wrong
    with its shape (its text is checked by `check`)."""
    if isinstance(query, str):
        text, matches, regex, case = query, defaults.matches, defaults.regex, defaults.case_sensitive
    elif isinstance(query, Mapping):
        given = query.get("query")
        if not isinstance(given, str):
            raise BadQuery(query_id, f"a search body needs a string 'query', not {_shown(given)}", line)
        text = given
        matches = query.get("matches", defaults.matches)
        if isinstance(matches, bool) or not isinstance(matches, int) or matches < 1:
            raise BadQuery(query_id, f"'matches' must be a positive integer, not {_shown(matches)}", line)
        regex = query.get("isRegexEnabled", defaults.regex)
        case = query.get("isCaseSensitivityEnabled", defaults.case_sensitive)
        for name, value in (("isRegexEnabled", regex), ("isCaseSensitivityEnabled", case)):
            if not isinstance(value, bool):
                raise BadQuery(query_id, f"{name!r} must be true or false, not {_shown(value)}", line)
    else:
        raise BadQuery(query_id, f"a query is a string or a search body (a dict), not {type(query).__name__}", line)
    if not text.strip():
        raise BadQuery(query_id, "the query is empty", line)
    timeout = math.inf if defaults.timeout_s is None else defaults.timeout_s
    options = SearchOptions(matches=matches, is_regex=regex, case_sensitive=case, timeout_s=timeout)
    return QuerySpec(query_id, text, options, line)


def check(spec: QuerySpec, *, contexts_known: bool) -> None:
    """Raise `BadQuery` for a query that does not parse (or nests too deep), before any work. With
    `contexts_known` False (a service over HTTP, whose search contexts are its own), a
    ``context:`` is left for the service to judge."""
    try:
        check_query(spec.query, spec.options)
    except SearchContextNotFound as e:
        if contexts_known:
            raise BadQuery(spec.query_id, str(e), spec.line) from None
    except CodesearchError as e:
        raise BadQuery(spec.query_id, str(e), spec.line) from None


def specs_of(
    queries: Sequence[str | Mapping[str, Any]], defaults: Defaults, *, contexts_known: bool
) -> list[QuerySpec]:
    """The queries of `codesearch.data.search`, checked: the first bad one raises `BadQuery`."""
    if isinstance(queries, (str, bytes, Mapping)):
        raise InvalidArgument("queries is a list of queries (strings or search bodies), not a single one")
    specs = [spec_of(i, q, defaults) for i, q in enumerate(queries)]
    for spec in specs:
        check(spec, contexts_known=contexts_known)
    return specs


def queries_from_lines(
    lines: Iterable[str], defaults: Defaults, *, contexts_known: bool, jsonl: bool | None = None
) -> tuple[list[QuerySpec], list[BadQuery], int]:
    """The queries of a queries file: ``(good specs, bad queries, number of queries)``.

    One query per line, or JSON Lines of search bodies: `jsonl`, or when None, JSON Lines when the
    first non-blank line is a JSON object. Blank lines are not queries. There are no comments:
    ``#include`` is a query like any other (as a line of ``grep -f``)."""
    good: list[QuerySpec] = []
    bad: list[BadQuery] = []
    query_id = 0
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if jsonl is None:
            jsonl = _is_json_object(line)
        query_id += 1
        try:
            body: str | Mapping[str, Any] = line
            if jsonl:
                try:
                    body = json.loads(line)
                except ValueError as e:
                    raise BadQuery(query_id - 1, f"not a JSON search body: {e}", number) from None
            spec = spec_of(query_id - 1, body, defaults, number)
            check(spec, contexts_known=contexts_known)
        except BadQuery as e:
            bad.append(e)
            continue
        good.append(spec)
    return good, bad, query_id


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _shown(value: object) -> str:
    text = json.dumps(value) if isinstance(value, (str, int, float, bool, type(None))) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."
