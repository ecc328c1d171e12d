"""Property tests: random files and random queries, the engine against the brute-force oracle."""

from __future__ import annotations

import os
import tempfile

import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesearch.errors import QueryParseError
from codesearch.globs import PatternList
from codesearch.index.builder import IndexSettings, index_paths
from codesearch.search.engine import Searcher
from tests.oracle import Oracle, docs_from_dir, engine_spans

ALPHABET = "abcAB é\n_K\u212a("
texts = st.text(alphabet=ALPHABET, max_size=60)
files = st.lists(texts, min_size=1, max_size=6)
literals = st.text(alphabet="abcAB é_K(", min_size=1, max_size=5)
regex_atoms = st.sampled_from(["a", "b", "c", "A", "é", " ", "_", ".", "[ab]", "[^a]", r"\w", r"\s", "\n", "K", "(?i:ab)", "^", "$", r"\b"])


@st.composite
def regexes(draw):
    parts = draw(st.lists(regex_atoms, min_size=1, max_size=5))
    out = []
    for p in parts:
        q = draw(st.sampled_from(["", "", "*", "+", "?", "{1,2}"]))
        out.append(p + (q if p not in ("^", "$", r"\b") else ""))
    alt = draw(st.booleans())
    return "|".join(["".join(out[: len(out) // 2 + 1]), "".join(out[len(out) // 2 + 1 :]) or "b"]) if alt else "".join(out)


def _check(contents: list[str], query: str, is_regex: bool, case_sensitive: bool) -> None:
    with tempfile.TemporaryDirectory() as root:
        src = os.path.join(root, "src")
        for i, text in enumerate(contents):
            os.makedirs(os.path.join(src, f"d{i % 2}"), exist_ok=True)
            with open(os.path.join(src, f"d{i % 2}", f"f{i}.txt"), "w", encoding="utf-8") as f:
                f.write(text)
        out = os.path.join(root, "index")
        index_paths([src], out, IndexSettings(ctags=False, always_index=PatternList([])))
        oracle = Oracle(docs_from_dir(src, src.strip("/")))
        try:
            want = oracle.search(query, is_regex=is_regex, case_sensitive=case_sensitive)
        except QueryParseError:
            return
        searcher = Searcher(out)
        try:
            got = engine_spans(searcher.search(query, matches=10**6, is_regex=is_regex, case_sensitive=case_sensitive))
        finally:
            searcher.close()
        assert got == want


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(files, literals, st.booleans())
def test_random_literals(contents, literal, case_sensitive):
    _check(contents, '"' + literal.replace("\\", "\\\\").replace('"', '\\"') + '"', False, case_sensitive)


@FAST
@given(files, regexes(), st.booleans())
def test_random_regexes(contents, pattern, case_sensitive):
    _check(contents, '"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"', True, case_sensitive)


@FAST
@given(files, literals, literals)
def test_random_boolean_queries(contents, a, b):
    qa, qb = (re2.escape(x) for x in (a, b))
    for q in (f'"{qa}" or "{qb}"', f'-("{qa}") "{qb}"', f'file:f1 "{qa}"'):
        _check(contents, q, True, False)
