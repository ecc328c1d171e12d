"""What the caller of the searchers checks of a query before it asks them (`engine.check_query`).

The process in the middle of every request (a Serve replica's `SearcherPool.fan_out`) used to
plan each query only to fail early and to learn whether it names an identifier; each searcher
plans it again. `check_query` parses it and raises what planning raises, without the plan. Its
contract, per table row: the same error as `make_plan` (class and message), or none; and
`names_identifier` on the parsed query says what `searches_identifiers` says of the plan.
"""

from __future__ import annotations

import pytest

from codesearch.errors import CodesearchError
from codesearch.search.engine import MAX_QUERY_LENGTH, check_query, make_plan, names_identifier
from codesearch.search.evaluate import searches_identifiers
from codesearch.search.options import SearchOptions

CONTEXTS = {"backend": {"a/b"}, "web-ui": {"c/d"}}

#: query, regex mode
QUERIES = [
    ("getproxies_environment", False),
    ("zq_no_such_identifier_anywhere_q", False),
    ("foo bar", False),
    ("foo-bar", False),
    ("-foo", False),
    ("-foo bar_baz", False),
    ("not foo", False),
    ("foo or bar", False),
    ("sym:validate_python", False),
    ("file:\\.py$", False),
    ("lang:python Handler", False),
    ("repo:acme context:backend QuerySet", False),
    ("/QuerySet/", False),
    ("Query.*Set", True),
    ("QuerySet", True),
    ("(a or b) and not c", False),
    ("rev:* parse", False),
    ("'single'", False),
]

#: query, regex mode: each is refused, by planning and by the check alike
BAD = [
    ("foo (bar", True),
    ("sym:[", False),
    ("repo:*x", False),
    ("a or or b", False),
    ("context:backnd handler", False),
    ("context:zzzzzz handler", False),
    ("-(" * 120 + "x" + ")" * 120, False),
    ("x" * (MAX_QUERY_LENGTH + 1), False),
]


def _options(regex: bool) -> SearchOptions:
    return SearchOptions(is_regex=regex, contexts=CONTEXTS)


@pytest.mark.parametrize("query,regex", QUERIES)
def test_the_check_knows_what_the_plan_knows(query, regex):
    options = _options(regex)
    assert names_identifier(check_query(query, options)) == searches_identifiers(make_plan(query, options))


@pytest.mark.parametrize("query,regex", BAD, ids=[q[:30] for q, _ in BAD])
def test_the_check_refuses_what_planning_refuses(query, regex):
    options = _options(regex)
    with pytest.raises(CodesearchError) as planned:
        make_plan(query, options)
    with pytest.raises(CodesearchError) as checked:
        check_query(query, options)
    assert type(checked.value) is type(planned.value)
    assert str(checked.value) == str(planned.value)
    assert checked.value.status_code == planned.value.status_code


def test_the_table_has_both_answers():
    answers = {names_identifier(check_query(q, _options(r))) for q, r in QUERIES}
    assert answers == {True, False}
