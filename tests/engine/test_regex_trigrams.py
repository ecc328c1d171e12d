"""Trigram queries of regular expressions (codesearch.query.regex_trigrams)."""

from __future__ import annotations

import random

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesearch.index.trigrams import string_trigrams
from codesearch.query.regex import RegexError, RegexTimeout, compile_regex
from codesearch.query.regex_trigrams import MAX_LEAVES, regex_query
from codesearch.query.trigram_query import (
    ALL_QUERY,
    NONE_QUERY,
    TrigramQuery,
    and_,
    leaf_and,
    literal_query,
    or_,
)

# (pattern, case_sensitive, expected str(regex_query(...))), in the style of google/codesearch
# index/regexp_test.go.
QUERY_TESTS = [
    # Literals and concatenation.
    ("Abcdef", True, '"Abc" "bcd" "cde" "def"'),
    ("(abc)(def)", True, '"abc" "bcd" "cde" "def"'),
    ("abc", False, '"abc"i'),
    ("ab", True, "+"),
    ("", True, "+"),
    ("()", True, "+"),
    # Alternation.
    ("abc|xyz", True, '("abc"|"xyz")'),
    ("(abc|def)ghi", True, '"ghi" (("abc" "bcg")|("def" "efg")) ("cgh"|"fgh")'),
    ("abc.*(def|ghi)", True, '"abc" ("def"|"ghi")'),
    ("abc(def|ghi)", True, '"abc" (("bcd" "cde" "def")|("bcg" "cgh" "ghi"))'),
    ("(a+hello|b+world)", True, '(("ahe" "ell" "hel" "llo")|("bwo" "orl" "rld" "wor"))'),
    ("(abc|bac)de", True, '"cde" (("abc" "bcd")|("acd" "bac"))'),
    ("(abc|abc)", True, '"abc"'),
    ("(ab|ab)c", True, '"abc"'),
    ("ab(cab|cat)", True, '"abc" "bca" ("cab"|"cat")'),
    ("(a|ab)cde", True, '"cde" ("acd"|("abc" "bcd"))'),
    ("(a|b|c|d)(ef|g|hi|j)", True, "+"),
    ("(z*(abc|def)z*)(z*(abc|def)z*)", True, '("abc"|"def")'),
    ("(z*abcz*defz*)(z*(ghi|jkl)z*)", True, '"abc" "def" ("cde"|"zde") ("ghi"|"jkl")'),
    ("(z*abcz*defz*)|(z*(ghi|jkl)z*)", True, '("ghi"|"jkl"|("abc" "def" ("cde"|"zde")))'),
    # Character classes.
    ("[ab]cd", True, '("acd"|"bcd")'),
    ("ab[cde]f", True, '(("abc" "bcf")|("abd" "bdf")|("abe" "bef"))'),
    ("[ab][cd][ef]", True, '("ace"|"acf"|"ade"|"adf"|"bce"|"bcf"|"bde"|"bdf")'),
    ("ab[cd]e", True, '(("abc" "bce")|("abd" "bde"))'),
    ("[Aa]bc", True, '("Abc"|"abc")'),
    ("ab[^cde]f", True, "+"),
    ("[a-z]bcd", True, '"bcd"'),
    ("[abcdefgh]xyz", True, '"xyz" ("axy"|"bxy"|"cxy"|"dxy"|"exy"|"fxy"|"gxy"|"hxy")'),
    ("[\u4e00-\u9fff]abc", True, '"abc"'),
    ("[^\\s\\S]", True, "+"),
    # Any character.
    (".", True, "+"),
    ("(?s).", True, "+"),
    ("ab.f", True, "+"),
    # RE2's \d is ASCII [0-9], so the digits around "foo" give junction trigrams.
    ("\\d+foo\\d+", True, '"foo" ("0fo"|"1fo"|"2fo"|"3fo"|"4fo"|"5fo"|"6fo"|"7fo"|"8fo"|"9fo") ("oo0"|"oo1"|"oo2"|"oo3"|"oo4"|"oo5"|"oo6"|"oo7"|"oo8"|"oo9")'),
    ("_\\d{3}", True, '("_00"|"_01"|"_02"|"_03"|"_04"|"_05"|"_06"|"_07"|"_08"|"_09"|"_10"|"_11"|"_12"|"_13"|"_14"|"_15"|"_16"|"_17"|"_18"|"_19"|"_20"|"_21"|"_22"|"_23"|"_24"|"_25"|"_26"|"_27"|"_28"|"_29"|"_30"|"_31"|"_32"|"_33"|"_34"|"_35"|"_36"|"_37"|"_38"|"_39"|"_40"|"_41"|"_42"|"_43"|"_44"|"_45"|"_46"|"_47"|"_48"|"_49"|"_50"|"_51"|"_52"|"_53"|"_54"|"_55"|"_56"|"_57"|"_58"|"_59"|"_60"|"_61"|"_62"|"_63"|"_64"|"_65"|"_66"|"_67"|"_68"|"_69"|"_70"|"_71"|"_72"|"_73"|"_74"|"_75"|"_76"|"_77"|"_78"|"_79"|"_80"|"_81"|"_82"|"_83"|"_84"|"_85"|"_86"|"_87"|"_88"|"_89"|"_90"|"_91"|"_92"|"_93"|"_94"|"_95"|"_96"|"_97"|"_98"|"_99")'),
    ("ab[0-3]{2}", True, '(("ab0" ("b00"|"b01"|"b02"|"b03"))|("ab1" "b10")|("ab1" "b11")|("ab1" "b12")|("ab1" "b13")|("ab2" "b20")|("ab2" "b21")|("ab2" "b22")|("ab2" "b23")|("ab3" "b30")|("ab3" "b31")|("ab3" "b32")|("ab3" "b33"))'),
    # Repetition.
    ("a+hello", True, '"ahe" "ell" "hel" "llo"'),
    ("a+bcd", True, '"abc" "bcd"'),
    ("a*bbb", True, '"bbb"'),
    ("a?bbb", True, '"bbb"'),
    ("(bbb)a?", True, '"bbb"'),
    ("(bbb)a*", True, '"bbb"'),
    ("(abc)*", True, "+"),
    ("(abc)?def", True, '"def"'),
    ("(abc)+", True, '"abc"'),
    ("a{3}", True, '"aaa"'),
    ("(abc){2,}", True, '"abc" "bca" "cab"'),
    ("z(abcde+)?", True, "+"),
    ("(abcde+)?fgh", True, '"fgh"'),
    ("[0-9a-f]{8}", True, "+"),
    # Anchors, word boundaries, look-around and back-references carry no trigrams.
    ("^foo$", True, '"foo"'),
    ("^abc", True, '"abc"'),
    ("abc$", True, '"abc"'),
    ("\\b", True, "+"),
    ("\\bfoo\\b", True, '"foo"'),
    ("ab\\bc", True, '"abc"'),
    ("ab\\Bc", True, '"abc"'),
    ("foo(?=bar)", True, '"foo"'),
    ("foo(?!bar)", True, '"foo"'),
    ("(?<=bar)foo", True, '"foo"'),
    ("(abc)\\1", True, '"abc"'),
    ("(abc)\\1def", True, '"abc" "def"'),
    # Case-insensitive patterns: trigrams whose letters may be in any case ("abc"i).
    ("(?i)Hello", True, '"ell"i "hel"i "llo"i'),
    ("Hello", False, '"ell"i "hel"i "llo"i'),
    ("(?i)a~~", True, '"a~~"i'),
    ("(?i)abc|def", True, '("abc"i|"def"i)'),
    ("(?i:Foo)bar", True, '"[oO][oO]b" "[oO]ba" "bar" "foo"i'),
    ("(?i:Foo)BAR", False, '"bar"i "foo"i "oba"i "oob"i'),
    # Non-ASCII: exact bytes when case-sensitive, dropped when case-insensitive.
    ("héllo", True, '"\\xa9ll" "\\xc3\\xa9l" "h\\xc3\\xa9" "llo"'),
    ("héllo", False, '"llo"i'),
    ("(?i)héllo", True, '"llo"i'),
    ("(?i:é)llo", True, '"llo"'),
    ("(?-i:é)llo", False, '"\\xa9ll"i "\\xc3\\xa9l"i "llo"i'),
    # KELVIN SIGN and LONG S are k and s, as the index normalizes them.
    ("\u212abc", True, '"kbc"'),
    ("(?i)\u212a\u017fab", True, '"ksa"i "sab"i'),
    # On the fallback engine (look-around here), case-insensitive letters are unknown:
    # full case folding lets "ss" match "ß".
    ("(?i)foo(?=bar)", True, "+"),
    ("foo(?=bar)", False, "+"),
    ("(?i)123(?=bar)", True, '"123"'),
    # Syntax Python's parser lacks or reads differently.
    ("[[:alpha:]]abc", True, "+"),
    ("\\pLabc", True, "+"),
    ("abc\\z", True, "+"),
    ("abc\\Cdef", True, "+"),
    ("xa{,3}yz", True, "+"),
    ("abc(?U)def", True, "+"),
    ("abc(", True, "+"),
]


@pytest.mark.parametrize("pattern,case_sensitive,want", QUERY_TESTS)
def test_query_table(pattern, case_sensitive, want):
    assert str(regex_query(pattern, case_sensitive)) == want


def _docs_satisfy(q: TrigramQuery, text: str) -> bool:
    """Does a document holding `text` satisfy `q`? The document as the index sees it, computed
    here independently: the trigrams of its bytes with the Kelvin sign and the long s as k, s."""
    b = text.replace("\u212a", "k").replace("\u017f", "s").encode()
    return q.satisfied_by({b[i] << 16 | b[i + 1] << 8 | b[i + 2] for i in range(len(b) - 2)})


def test_huge_alternation_shared_suffix():
    pattern = "|".join(f"w{i:03d}xyz" for i in range(500))
    assert str(regex_query(pattern, True)) == '"xyz"'


def test_huge_alternation_is_capped():
    words = [f"{a}{b}{c}q" for a in "abcdefgh" for b in "ijklmnop" for c in "rstuvwxy"]
    pattern = "|".join(words)
    q = regex_query(pattern, True)
    assert q.size() <= MAX_LEAVES
    for w in words[::37]:
        assert _docs_satisfy(q, f"xx {w} yy")


def test_huge_concatenation_is_capped():
    text = "".join(chr(0x4E00 + i) for i in range(200))
    q = regex_query(text, True)
    assert 0 < q.size() <= MAX_LEAVES
    assert _docs_satisfy(q, text)


def test_large_classes_capped():
    q = regex_query("(" + "|".join(f"[a-f][g-l][m-r]{i}" for i in range(30)) + ")", True)
    assert q.size() <= MAX_LEAVES
    assert _docs_satisfy(q, "bhn7")


def test_satisfied_by():
    a, b, c = (string_trigrams(s)[0] for s in ("abc", "bcd", "cde"))
    q = and_(leaf_and([a]), or_(leaf_and([b]), leaf_and([c])))
    assert q.satisfied_by({a, b})
    assert q.satisfied_by(frozenset({a, c}))
    assert not q.satisfied_by({a})
    assert not q.satisfied_by({b, c})
    assert ALL_QUERY.satisfied_by(set())
    assert not NONE_QUERY.satisfied_by({a, b, c})


# --------------------------------------------------------------------------------------------
# No false negatives: whenever the verifier finds a match, the document passes the query.

ALPHABET = ["a", "A", "b", "B", "k", "K", "\u212a", "s", "S", "\u017f", "ß", "é", "É", "😀", " ", "\n"]
_VARIANTS = {
    "a": "aA",
    "b": "bB",
    "k": "kK\u212a",
    "s": "sS\u017f",
    "é": "éÉ",
    "ß": "ß",
}
for _k, _v in list(_VARIANTS.items()):
    for _ch in _v:
        _VARIANTS.setdefault(_ch, _v)


def _lit(c: str) -> str:
    return "\\n" if c == "\n" else ("\\ " if c == " " else c)


#: Words lean on ASCII, which trigram queries keep in both modes.
_WORD_CHARS = ALPHABET + list("aAbBkKsS \n")


def _nodes():
    char = st.sampled_from(ALPHABET)
    word = st.tuples(st.just("word"), st.text(alphabet=_WORD_CHARS, min_size=2, max_size=6))
    leaf = st.one_of(
        st.tuples(st.just("lit"), char),
        word,
        word,
        st.just(("any",)),
        st.tuples(
            st.just("class"),
            st.booleans(),
            st.lists(
                st.one_of(char, st.tuples(char, char).map(lambda p: tuple(sorted(p, key=ord)))),
                min_size=1,
                max_size=3,
            ),
        ),
        st.tuples(st.just("empty"), st.sampled_from(["^", "$", "\\b", "\\B"])),
        st.just(("cls", "\\s")),
    )

    def extend(children):
        cat = st.tuples(st.just("cat"), st.lists(children, min_size=2, max_size=4))
        alt = st.tuples(st.just("alt"), st.lists(children, min_size=2, max_size=3))
        rep = st.tuples(
            st.just("rep"),
            children,
            st.sampled_from(["*", "+", "?", "{0,2}", "{1,2}", "{2}", "{2,}", "{3,4}", "*?"]),
        )
        group = st.tuples(st.just("group"), st.sampled_from(["?i:", "?-i:", "?:", ""]), children)
        look = st.tuples(st.just("look"), st.sampled_from(["?=", "?!", "?<="]), children)
        backref = st.tuples(st.just("backref"), children)
        # Look-around and back-references (the fallback engine) are rarer.
        return st.one_of(cat, cat, cat, cat, alt, alt, rep, rep, group, group, st.one_of(look, backref))

    node = st.recursive(leaf, extend, max_leaves=8)
    # Mostly words around a random node, so that many queries are not trivial.
    return st.one_of(
        node,
        st.tuples(st.just("cat"), st.lists(st.one_of(word, node), min_size=2, max_size=4)),
        st.tuples(st.just("cat"), st.lists(st.one_of(word, node), min_size=2, max_size=4)),
    )


def _render(node, names) -> str:
    kind = node[0]
    if kind == "lit":
        return _lit(node[1])
    if kind == "word":
        return "".join(_lit(c) for c in node[1])
    if kind == "any":
        return "."
    if kind == "cls":
        return node[1]
    if kind == "class":
        body = "".join(_lit(i) if isinstance(i, str) else f"{_lit(i[0])}-{_lit(i[1])}" for i in node[2])
        return "[" + ("^" if node[1] else "") + body + "]"
    if kind == "empty":
        return node[1]
    if kind == "cat":
        return "".join(_render(n, names) for n in node[1])
    if kind == "alt":
        return "(?:" + "|".join(_render(n, names) for n in node[1]) + ")"
    if kind == "rep":
        return "(?:" + _render(node[1], names) + ")" + node[2]
    if kind == "group":
        return "(" + node[1] + _render(node[2], names) + ")"
    if kind == "look":
        return "(" + node[1] + _render(node[2], names) + ")"
    if kind == "backref":
        name = f"g{len(names)}"
        names.append(name)
        return f"(?P<{name}>{_render(node[1], names)})(?P={name})"
    raise AssertionError(kind)


def _variant(c: str, rnd: random.Random) -> str:
    """Mostly `c` itself, sometimes another case of it."""
    return c if rnd.random() < 0.85 else rnd.choice(_VARIANTS.get(c, c))


def _witness(node, rnd) -> str:
    """A string the node probably matches (up to case, anchors and look-around)."""
    kind = node[0]
    if kind == "lit":
        return _variant(node[1], rnd)
    if kind == "word":
        return "".join(_variant(c, rnd) for c in node[1])
    if kind in ("any", "cls"):
        return rnd.choice(ALPHABET)
    if kind == "class":
        if node[1]:
            return rnd.choice(ALPHABET)
        item = rnd.choice(node[2])
        return item if isinstance(item, str) else rnd.choice(item)
    if kind == "empty":
        return rnd.choice(["", "", "\n", " "])
    if kind == "cat":
        return "".join(_witness(n, rnd) for n in node[1])
    if kind == "alt":
        return _witness(rnd.choice(node[1]), rnd)
    if kind == "rep":
        return "".join(_witness(node[1], rnd) for _ in range(rnd.randint(0, 3)))
    if kind == "group":
        return _witness(node[2], rnd)
    if kind == "look":
        return _witness(node[2], rnd) if node[1] == "?<=" else ""
    if kind == "backref":
        w = _witness(node[1], rnd)
        return w + w
    raise AssertionError(kind)


_NODES = _nodes()


@st.composite
def _cases(draw):
    node = draw(_NODES)
    pattern = _render(node, [])
    rnd = random.Random(draw(st.integers(0, 2**32)))
    noise = lambda: "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 6)))  # noqa: E731
    text = noise() + _witness(node, rnd) + noise()
    return pattern, text, draw(st.booleans())


@settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_no_false_negatives(case):
    pattern, text, case_sensitive = case
    try:
        rx = compile_regex(pattern, case_sensitive)
        found = rx.search(text.encode())
    except (RegexError, RegexTimeout):
        return
    q = regex_query(pattern, case_sensitive)
    if found:
        assert _docs_satisfy(q, text), (pattern, text, case_sensitive, str(q))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHABET + ["c", "d", "x", "😀", "."], min_size=3, max_size=12), st.booleans())
def test_no_false_negatives_literal_text(text, case_sensitive):
    # Any text is found by a pattern made of one of its substrings.
    q = regex_query(re2.escape(text[1:-1]), case_sensitive)
    assert _docs_satisfy(q, text)


# --------------------------------------------------------------------------------------------
# A literal pattern gives the same query as the literal search.


@pytest.mark.parametrize(
    "lit",
    ["abc", "Hello, world", "ab", "héllo wörld", "x.y*z", "\u212aelvin", "a\nbc", "日本語テキスト", "😀ab", "ſtraße"],
)
@pytest.mark.parametrize("case_sensitive", [True, False])
def test_literal_agrees(lit, case_sensitive):
    assert regex_query(re2.escape(lit), case_sensitive) == literal_query(lit, case_sensitive)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHABET + ["c", "x", "😀", "日", ".", "*"], max_size=12), st.booleans())
def test_literal_agrees_random(lit, case_sensitive):
    want = literal_query(lit, case_sensitive)
    got = regex_query(re2.escape(lit), case_sensitive)
    assert got == want, (lit, str(got), str(want))


@pytest.mark.parametrize(
    "pattern,case_sensitive,text",
    [
        ("ssab(?=x)", False, "ßabx"),  # full case folding on the fallback engine
        ("fixy(?=z)", False, "ﬁxyz"),
        ("(?:😀)?(?:😀)*", True, "x"),  # a pattern matching "" never requires trigrams
        ("(?:😀)?(?:😀)*😀", True, "😀"),
        ("(?i)ss(?=x)", True, "\u017fS" + "x"),
        ("(?i)kab", True, "\u212aAB"),
        ("sab", False, "\u017fAB"),
        ("(?i)\u212aab", True, "kab"),
        ("(?i:é)ab", True, "Éab"),
        ("a\\nbc", False, "A\nBc"),
        ("[\\n]bc", True, "\nbc"),
        ("z(abcde+)?", True, "z"),
        ("(?:xy)+(a*bcd)", True, "xybcd"),  # an emptyable head does not hide the tail's prefixes
        ("(bcda*)(?:xy)+", True, "bcdxy"),
        ("(abc)\\1", True, "abcabc"),
        ("^foo$", True, "x\nfoo\ny"),
    ],
)
def test_known_matches_pass(pattern, case_sensitive, text):
    assert compile_regex(pattern, case_sensitive).search(text.encode())
    assert _docs_satisfy(regex_query(pattern, case_sensitive), text)
