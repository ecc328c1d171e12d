"""``sym:`` verification in one pass over a document's names (codesearch/search/symbol_match.py).

The contract: `matching_symbols` answers what matching each name on its own answers (the rule
before, and the brute-force oracle's: tests/engine/test_differential.py has the ``sym:`` rows that run
the whole engine against it). Here, per table row: a pattern, some names, and whether one scan of
the joined names may decide (`joined_matches` gives None when a match runs across a newline, the
caller then matches name by name). And the shard's joined names are its names, for every
document of the test corpus.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

from codesearch.index.shard import Shard
from codesearch.query.regex import compile_regex
from codesearch.search.symbol_match import joined_matches, matching_symbols, one_pass

NAMES = [b"os", b"Handler1", b"parse_1", b"main", b"", b"main2", b"x_main"]

#: pattern, case-sensitive, whether one scan decides for NAMES (else None: name by name)
ROWS = [
    ("Handler", True, True),
    ("handler", False, True),
    ("^parse", True, True),
    ("\\d$", True, True),
    ("^main$", True, True),
    ("1$|^m", True, True),
    ("\\bmain\\b", True, True),
    ("\\Bmain", True, True),
    ("^$", True, True),  # the empty name
    ("x*", True, True),  # empty matches: every name
    ("nomatch", True, True),
    ("[^a-z_]main", True, False),  # "\nmain": no name of its own has it
    ("\\d\\s*", True, False),  # runs on over the newline after "Handler1"
    ("(?s)_1.", True, False),
    ("os.H", True, True),  # "." stops at the newline: no match, and none of a name
]


@pytest.mark.parametrize("pattern,case,decides", ROWS)
def test_one_scan_finds_what_each_name_finds(pattern, case, decides):
    rx = compile_regex(pattern, case)
    want = [k for k, name in enumerate(NAMES) if rx.search(name)]
    text = b"\n".join(NAMES)
    starts = np.cumsum([0] + [len(n) + 1 for n in NAMES[:-1]])
    got = joined_matches(text, starts, rx)
    if decides:
        assert got == want
    else:
        assert got is None


def test_a_name_with_a_newline_is_left_to_names_one_by_one():
    names = [b"a", b"b\nc"]
    text = b"\n".join(names)
    assert joined_matches(text, np.array([0, 2]), compile_regex("^c")) is None


#: pattern → whether one scan may be used (else names one by one, whatever the scan would say)
ONE_PASS = [
    ("foo", True),
    ("^foo$", True),
    ("(?i)foo", True),
    ("(?i:foo)bar", True),
    ("(?:foo|bar)", True),
    ("\\bfoo", True),
    ("\\Afoo", False),
    ("foo\\z", False),
    ("foo\\Z", False),
    ("\\Gfoo", False),
    ("(?s)a.b", False),
    ("(?-m)^a", False),
    ("(?m)^a", False),
    ("(?<=a)b", False),
    ("(?=a)", False),
    ("(?P<n>a)", False),
]


@pytest.mark.parametrize("pattern,allowed", ONE_PASS)
def test_which_patterns_scan_the_joined_names(pattern, allowed):
    assert one_pass(pattern) == allowed


@pytest.fixture(scope="module")
def shards(indexed_corpus):
    out = [Shard(p) for p in sorted(glob.glob(os.path.join(indexed_corpus["index"], "*.shard")))]
    yield out
    for s in out:
        s.close()


def test_the_joined_names_of_a_shard_are_its_names(shards):
    docs = 0
    for shard in shards:
        for doc in range(shard.doc_count):
            names = shard.symbol_names(doc)
            text, starts = shard.symbol_text(doc), shard.symbol_starts(doc)
            assert text == b"\n".join(names)
            assert starts.tolist() == [sum(len(n) + 1 for n in names[:k]) for k in range(len(names))]
            docs += bool(names)
    assert docs >= 5  # documents with symbols: the corpus has them


@pytest.mark.parametrize("pattern,case", [(p, c) for p, c, _ in ROWS] + [("\\Amain", True), ("(?s)n.", True)])
def test_matching_symbols_of_every_document(shards, pattern, case):
    rx = compile_regex(pattern, case)
    for shard in shards:
        for doc in range(shard.doc_count):
            want = [k for k, name in enumerate(shard.symbol_names(doc)) if rx.search(name)]
            assert matching_symbols(shard, doc, rx) == want, (shard.doc_path(doc), pattern)
