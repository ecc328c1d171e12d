"""Conformance of the query parser to Sourcebot's query grammar.

Sourcebot's grammar is specified by golden files (``packages/queryLanguage/test/*.txt`` in
sourcebot-dev/sourcebot: basic, grouping, negation, operators, parenthesis, precedence, prefixes,
quoted, and regex, the last one parsed in its regex dialect). Every case of those files is a row
here, grouped by file, in our own terms:

    (query, mode, expected, sourcebot, note)

* ``mode``: LIT (bare terms are literal text) or RE (``isRegexEnabled``: bare terms are regexes);
* ``expected``: our tree in its printed form (`codesearch.query.ast`), or `Err(position, reason)`;
* ``sourcebot``: the tree the golden file gives (Lezer node names; ``⚠`` marks a syntax error,
  which Sourcebot's strict parser turns into a 400 FAILED_TO_PARSE_QUERY);
* ``note``: why ours looks different, when it does. A note starting with ``differs:`` marks a
  deliberate difference in meaning (documented in the parser's docstring); without one, the two
  trees must agree on every leaf (terms and prefix expressions), every negation, and on whether
  the query is an error. Representation differences do not count: we flatten nested groups and
  same-kind AND/OR, drop empty groups from AND/OR, and a regex group ``(a|b)`` standing alone is the
  group holding the regex ``a|b``, which matches exactly what Sourcebot's one term ``(a|b)`` does.

The golden files have been revised over time; the rows follow the latest revision of each that we
could read (``()`` is an empty group, not an error; ``or`` at the start of the query is a word).
"""

from __future__ import annotations

import re
from typing import NamedTuple

import pytest

from codesearch.errors import QueryParseError
from codesearch.query.ast import And, Const, Node, Not, Or, walk
from codesearch.query.parser import parse

LIT = "literal"
RE = "regex"


class Err(NamedTuple):
    position: int
    reason: str


NOT_A_REGEX = "differs: the value is not a valid regular expression; we say so when parsing"

BASIC = [
    ("hello", LIT, 'substr:(?i)"hello"', "Program(Term)", ""),
    ("hello world", LIT, '(and substr:(?i)"hello" substr:(?i)"world")', "Program(AndExpr(Term,Term))", ""),
    (
        "console.log error_handler", LIT, '(and substr:(?i)"console.log" substr:(?i)"error_handler")',
        "Program(AndExpr(Term,Term))", "",
    ),
    ("my_variable_name", LIT, 'substr:(?i)"my_variable_name"', "Program(Term)", ""),
    ("com.example.package", LIT, 'substr:(?i)"com.example.package"', "Program(Term)", ""),
    ("func123 test_456", LIT, '(and substr:(?i)"func123" substr:(?i)"test_456")', "Program(AndExpr(Term,Term))", ""),
    ("[a-z]+", LIT, 'substr:(?i)"[a-z]+"', "Program(Term)", ""),
    ("test.*", LIT, 'substr:(?i)"test.*"', "Program(Term)", ""),
    (
        r"\w+ [0-9]+ \s*", LIT, r'(and substr:(?i)"\\w+" substr:(?i)"[0-9]+" substr:(?i)"\\s*")',
        "Program(AndExpr(Term,Term,Term))", "",
    ),
]

GROUPING = [
    ("()", LIT, "false", "Program(ParenExpr)", "an empty group matches nothing"),
    ("(test)", LIT, 'substr:(?i)"test"', "Program(ParenExpr(Term))", ""),
    ("(hello world)", LIT, '(and substr:(?i)"hello" substr:(?i)"world")', "Program(ParenExpr(AndExpr(Term,Term)))", ""),
    ("((test))", LIT, 'substr:(?i)"test"', "Program(ParenExpr(ParenExpr(Term)))", ""),
    (
        "(first) (second)", LIT, '(and substr:(?i)"first" substr:(?i)"second")',
        "Program(AndExpr(ParenExpr(Term),ParenExpr(Term)))", "",
    ),
    (
        "(one two three)", LIT, '(and substr:(?i)"one" substr:(?i)"two" substr:(?i)"three")',
        "Program(ParenExpr(AndExpr(Term,Term,Term)))", "",
    ),
    (
        "test (grouped) another", LIT, '(and substr:(?i)"test" substr:(?i)"grouped" substr:(?i)"another")',
        "Program(AndExpr(Term,ParenExpr(Term),Term))", "",
    ),
    ("(((nested)))", LIT, 'substr:(?i)"nested"', "Program(ParenExpr(ParenExpr(ParenExpr(Term))))", ""),
    (
        "((a b) (c d))", LIT, '(and substr:(?i)"a" substr:(?i)"b" substr:(?i)"c" substr:(?i)"d")',
        "Program(ParenExpr(AndExpr(ParenExpr(AndExpr(Term,Term)),ParenExpr(AndExpr(Term,Term)))))", "",
    ),
    (
        "(start) middle end", LIT, '(and substr:(?i)"start" substr:(?i)"middle" substr:(?i)"end")',
        "Program(AndExpr(ParenExpr(Term),Term,Term))", "",
    ),
    (
        "start middle (end)", LIT, '(and substr:(?i)"start" substr:(?i)"middle" substr:(?i)"end")',
        "Program(AndExpr(Term,Term,ParenExpr(Term)))", "",
    ),
    (
        "(a (b c) d)", LIT, '(and substr:(?i)"a" substr:(?i)"b" substr:(?i)"c" substr:(?i)"d")',
        "Program(ParenExpr(AndExpr(Term,ParenExpr(AndExpr(Term,Term)),Term)))", "",
    ),
    (
        "(a)(b)(c)", LIT, 'substr:(?i)"(a)(b)(c)"',
        "Program(AndExpr(ParenExpr(Term),ParenExpr(Term),ParenExpr(Term)))",
        "differs: a group glued to more text is part of one term, in both modes, so `(int)(x)` "
        "searches the text as typed",
    ),
    ("([a-z]+)", LIT, 'substr:(?i)"[a-z]+"', "Program(ParenExpr(Term))", ""),
    ("(com.example.test)", LIT, 'substr:(?i)"com.example.test"', "Program(ParenExpr(Term))", ""),
]

NEGATION = [
    ("-test", LIT, 'substr:(?i)"-test"', "Program(Term)", ""),
    ('"-excluded"', LIT, 'substr:(?i)"-excluded"', "Program(QuotedTerm)", ""),
    ("test-case", LIT, 'substr:(?i)"test-case"', "Program(Term)", ""),
    (
        "-one -two -three", LIT, '(and substr:(?i)"-one" substr:(?i)"-two" substr:(?i)"-three")',
        "Program(AndExpr(Term,Term,Term))", "",
    ),
    ("-file:test.js", LIT, '(not file:(?i)"test.js")', "Program(NegateExpr(PrefixExpr(FileExpr)))", ""),
    ("-repo:archived", LIT, '(not repo:"archived")', "Program(NegateExpr(PrefixExpr(RepoExpr)))", ""),
    ("-lang:python", LIT, '(not lang:"python")', "Program(NegateExpr(PrefixExpr(LangExpr)))", ""),
    ("-content:TODO", LIT, '(not substr:(?i)"TODO")', "Program(NegateExpr(PrefixExpr(ContentExpr)))", ""),
    ("-rev:develop", LIT, '(not rev:"develop")', "Program(NegateExpr(PrefixExpr(RevisionExpr)))", ""),
    ("-archived:yes", LIT, "(not archived:yes)", "Program(NegateExpr(PrefixExpr(ArchivedExpr)))", ""),
    ("-fork:yes", LIT, "(not fork:yes)", "Program(NegateExpr(PrefixExpr(ForkExpr)))", ""),
    ("-visibility:any", LIT, "(not visibility:any)", "Program(NegateExpr(PrefixExpr(VisibilityExpr)))", ""),
    ("-context:backend", LIT, '(not context:"backend")', "Program(NegateExpr(PrefixExpr(ContextExpr)))", ""),
    ("-sym:OldClass", LIT, '(not sym:(?i)"OldClass")', "Program(NegateExpr(PrefixExpr(SymExpr)))", ""),
    ("-(test)", LIT, '(not substr:(?i)"test")', "Program(NegateExpr(ParenExpr(Term)))", ""),
    (
        "-(test exclude)", LIT, '(not (and substr:(?i)"test" substr:(?i)"exclude"))',
        "Program(NegateExpr(ParenExpr(AndExpr(Term,Term))))", "",
    ),
    (
        "-(file:test.js console.log)", LIT, '(not (and file:(?i)"test.js" substr:(?i)"console.log"))',
        "Program(NegateExpr(ParenExpr(AndExpr(PrefixExpr(FileExpr),Term))))", "",
    ),
    (
        "file:test.js -console", LIT, '(and file:(?i)"test.js" substr:(?i)"-console")',
        "Program(AndExpr(PrefixExpr(FileExpr),Term))", "",
    ),
    (
        "file:test.js -lang:python", LIT, '(and file:(?i)"test.js" (not lang:"python"))',
        "Program(AndExpr(PrefixExpr(FileExpr),NegateExpr(PrefixExpr(LangExpr))))", "",
    ),
    (
        "function -file:test.js -lang:java", LIT,
        '(and substr:(?i)"function" (not file:(?i)"test.js") (not lang:"java"))',
        "Program(AndExpr(Term,NegateExpr(PrefixExpr(FileExpr)),NegateExpr(PrefixExpr(LangExpr))))", "",
    ),
    ("(-file:test.js)", LIT, '(not file:(?i)"test.js")', "Program(ParenExpr(NegateExpr(PrefixExpr(FileExpr))))", ""),
    (
        "(-file:a.js -lang:python)", LIT, '(and (not file:(?i)"a.js") (not lang:"python"))',
        "Program(ParenExpr(AndExpr(NegateExpr(PrefixExpr(FileExpr)),NegateExpr(PrefixExpr(LangExpr)))))", "",
    ),
    (
        "(include -file:test.js)", LIT, '(and substr:(?i)"include" (not file:(?i)"test.js"))',
        "Program(ParenExpr(AndExpr(Term,NegateExpr(PrefixExpr(FileExpr)))))", "",
    ),
    (
        "-((file:test.js))", LIT, '(not file:(?i)"test.js")',
        "Program(NegateExpr(ParenExpr(ParenExpr(PrefixExpr(FileExpr)))))", "",
    ),
    ("-f:test.js", LIT, '(not file:(?i)"test.js")', "Program(NegateExpr(PrefixExpr(FileExpr)))", ""),
    ("-r:myrepo", LIT, '(not repo:"myrepo")', "Program(NegateExpr(PrefixExpr(RepoExpr)))", ""),
    ("-c:console", LIT, '(not substr:(?i)"console")', "Program(NegateExpr(PrefixExpr(ContentExpr)))", ""),
    ('-file:"test file.js"', LIT, '(not file:(?i)"test file.js")', "Program(NegateExpr(PrefixExpr(FileExpr)))", ""),
    (
        "lang:typescript -file:*.test.ts -file:*.spec.ts", LIT,
        Err(22, "file: invalid regular expression"),
        "Program(AndExpr(PrefixExpr(LangExpr),NegateExpr(PrefixExpr(FileExpr)),NegateExpr(PrefixExpr(FileExpr))))",
        NOT_A_REGEX + " (`*.test.ts` is a glob; write `file:\\.test\\.ts$`)",
    ),
    (
        "-(file:test.js lang:python)", LIT, '(not (and file:(?i)"test.js" lang:"python"))',
        "Program(NegateExpr(ParenExpr(AndExpr(PrefixExpr(FileExpr),PrefixExpr(LangExpr)))))", "",
    ),
    ("-()", LIT, "(not false)", "Program(NegateExpr(ParenExpr))", "not nothing: everything"),
    ("- file:test.js", LIT, '(not file:(?i)"test.js")', "Program(NegateExpr(PrefixExpr(FileExpr)))", ""),
]

OPERATORS = [
    ("test or example", LIT, '(or substr:(?i)"test" substr:(?i)"example")', "Program(OrExpr(Term,Term))", ""),
    (
        "one or two or three", LIT, '(or substr:(?i)"one" substr:(?i)"two" substr:(?i)"three")',
        "Program(OrExpr(Term,Term,Term))", "",
    ),
    (
        "file:test.js or file:example.js", LIT, '(or file:(?i)"test.js" file:(?i)"example.js")',
        "Program(OrExpr(PrefixExpr(FileExpr),PrefixExpr(FileExpr)))", "",
    ),
    (
        "test or -file:excluded.js", LIT, '(or substr:(?i)"test" (not file:(?i)"excluded.js"))',
        "Program(OrExpr(Term,NegateExpr(PrefixExpr(FileExpr))))", "",
    ),
    (
        '"first option" or "second option"', LIT, '(or substr:(?i)"first option" substr:(?i)"second option")',
        "Program(OrExpr(QuotedTerm,QuotedTerm))", "",
    ),
    (
        "lang:python or lang:javascript", LIT, '(or lang:"python" lang:"javascript")',
        "Program(OrExpr(PrefixExpr(LangExpr),PrefixExpr(LangExpr)))", "",
    ),
    (
        "function test or class example", LIT,
        '(or (and substr:(?i)"function" substr:(?i)"test") (and substr:(?i)"class" substr:(?i)"example"))',
        "Program(OrExpr(AndExpr(Term,Term),AndExpr(Term,Term)))", "",
    ),
    ("(test or example)", LIT, '(or substr:(?i)"test" substr:(?i)"example")', "Program(ParenExpr(OrExpr(Term,Term)))", ""),
    (
        "(test) or (example)", LIT, '(or substr:(?i)"test" substr:(?i)"example")',
        "Program(OrExpr(ParenExpr(Term),ParenExpr(Term)))", "",
    ),
    (
        "(file:*.js lang:javascript) or (file:*.ts lang:typescript)", LIT, Err(6, "file: invalid regular expression"),
        "Program(OrExpr(ParenExpr(AndExpr(PrefixExpr(FileExpr),PrefixExpr(LangExpr))),"
        "ParenExpr(AndExpr(PrefixExpr(FileExpr),PrefixExpr(LangExpr)))))",
        NOT_A_REGEX,
    ),
    (
        "test or file:example.js", LIT, '(or substr:(?i)"test" file:(?i)"example.js")',
        "Program(OrExpr(Term,PrefixExpr(FileExpr)))", "",
    ),
    (
        "file:test.js or example", LIT, '(or file:(?i)"test.js" substr:(?i)"example")',
        "Program(OrExpr(PrefixExpr(FileExpr),Term))", "",
    ),
    (
        "f:test.js or r:myrepo", LIT, '(or file:(?i)"test.js" repo:"myrepo")',
        "Program(OrExpr(PrefixExpr(FileExpr),PrefixExpr(RepoExpr)))", "",
    ),
    (
        "repo:project1 or repo:project2", LIT, '(or repo:"project1" repo:"project2")',
        "Program(OrExpr(PrefixExpr(RepoExpr),PrefixExpr(RepoExpr)))", "",
    ),
    (
        "rev:main or rev:develop", LIT, '(or rev:"main" rev:"develop")',
        "Program(OrExpr(PrefixExpr(RevisionExpr),PrefixExpr(RevisionExpr)))", "",
    ),
    (
        "lang:rust or lang:go", LIT, '(or lang:"rust" lang:"go")',
        "Program(OrExpr(PrefixExpr(LangExpr),PrefixExpr(LangExpr)))", "",
    ),
    (
        "content:TODO or content:FIXME", LIT, '(or substr:(?i)"TODO" substr:(?i)"FIXME")',
        "Program(OrExpr(PrefixExpr(ContentExpr),PrefixExpr(ContentExpr)))", "",
    ),
    (
        "-file:test.js or -file:spec.js", LIT, '(or (not file:(?i)"test.js") (not file:(?i)"spec.js"))',
        "Program(OrExpr(NegateExpr(PrefixExpr(FileExpr)),NegateExpr(PrefixExpr(FileExpr))))", "",
    ),
    (
        "((a or b) or (c or d))", LIT, '(or substr:(?i)"a" substr:(?i)"b" substr:(?i)"c" substr:(?i)"d")',
        "Program(ParenExpr(OrExpr(ParenExpr(OrExpr(Term,Term)),ParenExpr(OrExpr(Term,Term)))))", "",
    ),
    (
        "(a or b) and (c or d)", LIT,
        '(and (or substr:(?i)"a" substr:(?i)"b") substr:(?i)"and" (or substr:(?i)"c" substr:(?i)"d"))',
        "Program(AndExpr(ParenExpr(OrExpr(Term,Term)),Term,ParenExpr(OrExpr(Term,Term))))", "",
    ),
    ("*.test.js or *.spec.js", LIT, '(or substr:(?i)"*.test.js" substr:(?i)"*.spec.js")', "Program(OrExpr(Term,Term))", ""),
    ("[a-z]+ or [0-9]+", LIT, '(or substr:(?i)"[a-z]+" substr:(?i)"[0-9]+")', "Program(OrExpr(Term,Term))", ""),
    (
        "com.example.test or org.example.test", LIT, '(or substr:(?i)"com.example.test" substr:(?i)"org.example.test")',
        "Program(OrExpr(Term,Term))", "",
    ),
    ("test-one or test-two", LIT, '(or substr:(?i)"test-one" substr:(?i)"test-two")', "Program(OrExpr(Term,Term))", ""),
    ("order", LIT, 'substr:(?i)"order"', "Program(Term)", ""),
    ("before", LIT, 'substr:(?i)"before"', "Program(Term)", ""),
    ("or test", LIT, '(and substr:(?i)"or" substr:(?i)"test")', "Program(AndExpr(Term,Term))", ""),
    ("test or", LIT, '(and substr:(?i)"test" substr:(?i)"or")', "Program(AndExpr(Term,Term))", ""),
    ("test or or example", LIT, Err(8, "`or` right after `or`"), "Program(OrExpr(Term,⚠,Term))", ""),
    (
        "file:*.js or repo:myrepo or lang:javascript", LIT, Err(5, "file: invalid regular expression"),
        "Program(OrExpr(PrefixExpr(FileExpr),PrefixExpr(RepoExpr),PrefixExpr(LangExpr)))", NOT_A_REGEX,
    ),
    (
        "(lang:python or lang:ruby) -file:test.py", LIT, '(and (or lang:"python" lang:"ruby") (not file:(?i)"test.py"))',
        "Program(AndExpr(ParenExpr(OrExpr(PrefixExpr(LangExpr),PrefixExpr(LangExpr))),NegateExpr(PrefixExpr(FileExpr))))",
        "",
    ),
    (
        'file:"test one.js" or file:"test two.js"', LIT, '(or file:(?i)"test one.js" file:(?i)"test two.js")',
        "Program(OrExpr(PrefixExpr(FileExpr),PrefixExpr(FileExpr)))", "",
    ),
    ("() or ()", LIT, "false", "Program(OrExpr(ParenExpr,ParenExpr))", "nothing or nothing"),
    (
        "-(file:a.js) or -(file:b.js)", LIT, '(or (not file:(?i)"a.js") (not file:(?i)"b.js"))',
        "Program(OrExpr(NegateExpr(ParenExpr(PrefixExpr(FileExpr))),NegateExpr(ParenExpr(PrefixExpr(FileExpr)))))", "",
    ),
]

PARENTHESIS = [
    (r"file:\(pr", LIT, r'file:(?i)"\\(pr"', "Program(PrefixExpr(FileExpr))", ""),
    ("file:(pr", LIT, Err(5, "missing )"), "Program(PrefixExpr(FileExpr))", NOT_A_REGEX),
    ("test(", LIT, 'substr:(?i)"test("', "Program(Term)", ""),
    ("test(test", LIT, 'substr:(?i)"test(test"', "Program(Term)", ""),
    ("test)", LIT, 'substr:(?i)"test)"', "Program(Term)", ""),
    ("test)test", LIT, 'substr:(?i)"test)test"', "Program(Term)", ""),
    ("test()", LIT, 'substr:(?i)"test()"', "Program(Term)", ""),
    ("func(arg)", LIT, 'substr:(?i)"func(arg)"', "Program(Term)", ""),
    ("file:)pr", LIT, Err(5, "unexpected )"), "Program(PrefixExpr(FileExpr))", NOT_A_REGEX),
    ("file:test()", LIT, 'file:(?i)"test()"', "Program(PrefixExpr(FileExpr))", ""),
    ("content:(test", LIT, 'substr:(?i)"(test"', "Program(PrefixExpr(ContentExpr))", ""),
    ("repo:(org", LIT, Err(5, "missing )"), "Program(PrefixExpr(RepoExpr))", NOT_A_REGEX),
    ("test((nested))", LIT, 'substr:(?i)"test((nested))"', "Program(Term)", ""),
    ("test( (grouped)", LIT, '(and substr:(?i)"test(" substr:(?i)"grouped")', "Program(AndExpr(Term,ParenExpr(Term)))", ""),
    ("(test)", LIT, 'substr:(?i)"test"', "Program(ParenExpr(Term))", ""),
    ("((nested))", LIT, 'substr:(?i)"nested"', "Program(ParenExpr(ParenExpr(Term)))", ""),
    ("(one two)", LIT, '(and substr:(?i)"one" substr:(?i)"two")', "Program(ParenExpr(AndExpr(Term,Term)))", ""),
    (
        "func( (a or b)", LIT, '(and substr:(?i)"func(" (or substr:(?i)"a" substr:(?i)"b"))',
        "Program(AndExpr(Term,ParenExpr(OrExpr(Term,Term))))", "",
    ),
    ("file:(test search", LIT, Err(5, "missing )"), "Program(AndExpr(PrefixExpr(FileExpr),Term))", NOT_A_REGEX),
    (r"( file:\(pr )", LIT, r'file:(?i)"\\(pr"', "Program(ParenExpr(PrefixExpr(FileExpr)))", "an escaped ( is not a bracket"),
]

PRECEDENCE = [
    (
        "a b or c d", LIT, '(or (and substr:(?i)"a" substr:(?i)"b") (and substr:(?i)"c" substr:(?i)"d"))',
        "Program(OrExpr(AndExpr(Term,Term),AndExpr(Term,Term)))", "",
    ),
    ("a or b or c", LIT, '(or substr:(?i)"a" substr:(?i)"b" substr:(?i)"c")', "Program(OrExpr(Term,Term,Term))", ""),
    (
        "file:test.js error or file:test.go panic", LIT,
        '(or (and file:(?i)"test.js" substr:(?i)"error") (and file:(?i)"test.go" substr:(?i)"panic"))',
        "Program(OrExpr(AndExpr(PrefixExpr(FileExpr),Term),AndExpr(PrefixExpr(FileExpr),Term)))", "",
    ),
    (
        "-file:test.js error", LIT, '(and (not file:(?i)"test.js") substr:(?i)"error")',
        "Program(AndExpr(NegateExpr(PrefixExpr(FileExpr)),Term))", "",
    ),
    (
        "-file:a.js or file:b.js", LIT, '(or (not file:(?i)"a.js") file:(?i)"b.js")',
        "Program(OrExpr(NegateExpr(PrefixExpr(FileExpr)),PrefixExpr(FileExpr)))", "",
    ),
    (
        "(a or b) c", LIT, '(and (or substr:(?i)"a" substr:(?i)"b") substr:(?i)"c")',
        "Program(AndExpr(ParenExpr(OrExpr(Term,Term)),Term))", "",
    ),
    (
        "a (b or c)", LIT, '(and substr:(?i)"a" (or substr:(?i)"b" substr:(?i)"c"))',
        "Program(AndExpr(Term,ParenExpr(OrExpr(Term,Term))))", "",
    ),
    (
        "a -b or c d", LIT, '(or (and substr:(?i)"a" substr:(?i)"-b") (and substr:(?i)"c" substr:(?i)"d"))',
        "Program(OrExpr(AndExpr(Term,Term),AndExpr(Term,Term)))", "",
    ),
    (
        "-(a b) or c", LIT, '(or (not (and substr:(?i)"a" substr:(?i)"b")) substr:(?i)"c")',
        "Program(OrExpr(NegateExpr(ParenExpr(AndExpr(Term,Term))),Term))", "",
    ),
    (
        "-file:a.js or -file:b.js or file:c.js", LIT, '(or (not file:(?i)"a.js") (not file:(?i)"b.js") file:(?i)"c.js")',
        "Program(OrExpr(NegateExpr(PrefixExpr(FileExpr)),NegateExpr(PrefixExpr(FileExpr)),PrefixExpr(FileExpr)))", "",
    ),
    ("file:a.js b.js", LIT, '(and file:(?i)"a.js" substr:(?i)"b.js")', "Program(AndExpr(PrefixExpr(FileExpr),Term))", ""),
    (
        "repo:backend error or repo:frontend warning", LIT,
        '(or (and repo:"backend" substr:(?i)"error") (and repo:"frontend" substr:(?i)"warning"))',
        "Program(OrExpr(AndExpr(PrefixExpr(RepoExpr),Term),AndExpr(PrefixExpr(RepoExpr),Term)))", "",
    ),
    (
        "((a or b) c) or d", LIT, '(or (and (or substr:(?i)"a" substr:(?i)"b") substr:(?i)"c") substr:(?i)"d")',
        "Program(OrExpr(ParenExpr(AndExpr(ParenExpr(OrExpr(Term,Term)),Term)),Term))", "",
    ),
    (
        "(a or (b or c))", LIT, '(or substr:(?i)"a" substr:(?i)"b" substr:(?i)"c")',
        "Program(ParenExpr(OrExpr(Term,ParenExpr(OrExpr(Term,Term)))))", "",
    ),
    (
        "a b c or d e f", LIT,
        '(or (and substr:(?i)"a" substr:(?i)"b" substr:(?i)"c") (and substr:(?i)"d" substr:(?i)"e" substr:(?i)"f"))',
        "Program(OrExpr(AndExpr(Term,Term,Term),AndExpr(Term,Term,Term)))", "",
    ),
    (
        "lang:go func or lang:rust fn", LIT,
        '(or (and lang:"go" substr:(?i)"func") (and lang:"rust" substr:(?i)"fn"))',
        "Program(OrExpr(AndExpr(PrefixExpr(LangExpr),Term),AndExpr(PrefixExpr(LangExpr),Term)))", "",
    ),
    ("a or -b or c", LIT, '(or substr:(?i)"a" substr:(?i)"-b" substr:(?i)"c")', "Program(OrExpr(Term,Term,Term))", ""),
    (
        "a (b or c) d", LIT, '(and substr:(?i)"a" (or substr:(?i)"b" substr:(?i)"c") substr:(?i)"d")',
        "Program(AndExpr(Term,ParenExpr(OrExpr(Term,Term)),Term))", "",
    ),
    (
        "(a or b) (c or d)", LIT, '(and (or substr:(?i)"a" substr:(?i)"b") (or substr:(?i)"c" substr:(?i)"d"))',
        "Program(AndExpr(ParenExpr(OrExpr(Term,Term)),ParenExpr(OrExpr(Term,Term))))", "",
    ),
    ('"a or b"', LIT, 'substr:(?i)"a or b"', "Program(Term)", ""),
    ('file:"a.js or b.js"', LIT, 'file:(?i)"a.js or b.js"', "Program(PrefixExpr(FileExpr))", ""),
    (
        "-file:test.js lang:go error or warning", LIT,
        '(or (and (not file:(?i)"test.js") lang:"go" substr:(?i)"error") substr:(?i)"warning")',
        "Program(OrExpr(AndExpr(NegateExpr(PrefixExpr(FileExpr)),PrefixExpr(LangExpr),Term),Term))", "",
    ),
    (
        "a or (b c)", LIT, '(or substr:(?i)"a" (and substr:(?i)"b" substr:(?i)"c"))',
        "Program(OrExpr(Term,ParenExpr(AndExpr(Term,Term))))", "",
    ),
    # The stored precedence.txt predates empty groups being valid (its `()` is Term(⚠)); the
    # newer grouping, negation and operators files parse `()` as an empty ParenExpr.
    (
        "() or a b", LIT, '(and substr:(?i)"a" substr:(?i)"b")',
        "Program(OrExpr(ParenExpr(Term(⚠)),AndExpr(Term,Term)))", "nothing or (a and b)",
    ),
    ("-() a", LIT, '(and (not false) substr:(?i)"a")', "Program(AndExpr(NegateExpr(ParenExpr(Term(⚠))),Term))", ""),
]

PREFIXES = [
    ("file:README.md", LIT, 'file:(?i)"README.md"', "Program(PrefixExpr(FileExpr))", ""),
    ("f:index.ts", LIT, 'file:(?i)"index.ts"', "Program(PrefixExpr(FileExpr))", ""),
    ("repo:myproject", LIT, 'repo:"myproject"', "Program(PrefixExpr(RepoExpr))", ""),
    ("r:github.com/user/repo", LIT, 'repo:"github.com/user/repo"', "Program(PrefixExpr(RepoExpr))", ""),
    ("content:function", LIT, 'substr:(?i)"function"', "Program(PrefixExpr(ContentExpr))", ""),
    ("c:console.log", LIT, 'substr:(?i)"console.log"', "Program(PrefixExpr(ContentExpr))", ""),
    ("rev:main", LIT, 'rev:"main"', "Program(PrefixExpr(RevisionExpr))", ""),
    ("lang:typescript", LIT, 'lang:"typescript"', "Program(PrefixExpr(LangExpr))", ""),
    ("archived:no", LIT, "archived:no", "Program(PrefixExpr(ArchivedExpr))", ""),
    ("archived:only", LIT, "archived:only", "Program(PrefixExpr(ArchivedExpr))", ""),
    ("fork:yes", LIT, "fork:yes", "Program(PrefixExpr(ForkExpr))", ""),
    ("fork:only", LIT, "fork:only", "Program(PrefixExpr(ForkExpr))", ""),
    ("visibility:public", LIT, "visibility:public", "Program(PrefixExpr(VisibilityExpr))", ""),
    ("context:web", LIT, 'context:"web"', "Program(PrefixExpr(ContextExpr))", ""),
    ("sym:MyClass", LIT, 'sym:(?i)"MyClass"', "Program(PrefixExpr(SymExpr))", ""),
    ("reposet:repo1,repo2", LIT, 'reposet:"repo1,repo2"', "Program(PrefixExpr(RepoSetExpr))", ""),
    ("file:*.ts", LIT, Err(5, "file: invalid regular expression"), "Program(PrefixExpr(FileExpr))", NOT_A_REGEX),
    ("file:src/components/Button.tsx", LIT, 'file:(?i)"src/components/Button.tsx"', "Program(PrefixExpr(FileExpr))", ""),
    ("repo:github.com/org/project", LIT, 'repo:"github.com/org/project"', "Program(PrefixExpr(RepoExpr))", ""),
    (
        "file:test.js repo:myproject", LIT, '(and file:(?i)"test.js" repo:"myproject")',
        "Program(AndExpr(PrefixExpr(FileExpr),PrefixExpr(RepoExpr)))", "",
    ),
    (
        "file:test.js console.log", LIT, '(and file:(?i)"test.js" substr:(?i)"console.log")',
        "Program(AndExpr(PrefixExpr(FileExpr),Term))", "",
    ),
    (
        "console.log file:handler.ts", LIT, '(and substr:(?i)"console.log" file:(?i)"handler.ts")',
        "Program(AndExpr(Term,PrefixExpr(FileExpr)))", "",
    ),
    (
        "lang:typescript function file:handler.ts", LIT,
        '(and lang:"typescript" substr:(?i)"function" file:(?i)"handler.ts")',
        "Program(AndExpr(PrefixExpr(LangExpr),Term,PrefixExpr(FileExpr)))", "",
    ),
    (r"file:[a-z]+\.test\.js", LIT, r'file:(?i)"[a-z]+\\.test\\.js"', "Program(PrefixExpr(FileExpr))", ""),
    ("content:hello", LIT, 'substr:(?i)"hello"', "Program(PrefixExpr(ContentExpr))", ""),
    ("rev:feature/new-feature", LIT, 'rev:"feature/new-feature"', "Program(PrefixExpr(RevisionExpr))", ""),
    ("reposet:repo1,repo2,repo3", LIT, 'reposet:"repo1,repo2,repo3"', "Program(PrefixExpr(RepoSetExpr))", ""),
    ("sym:package.Class.method", LIT, 'sym:(?i)"package.Class.method"', "Program(PrefixExpr(SymExpr))", ""),
    ("lang:python", LIT, 'lang:"python"', "Program(PrefixExpr(LangExpr))", ""),
    ("archived:yes", LIT, "archived:yes", "Program(PrefixExpr(ArchivedExpr))", ""),
    ("archived:invalid", LIT, Err(9, "expected yes, no or only"), "Program(AndExpr(PrefixExpr(ArchivedExpr(⚠)),Term))", ""),
    ("fork:no", LIT, "fork:no", "Program(PrefixExpr(ForkExpr))", ""),
    ("fork:invalid", LIT, Err(5, "expected yes, no or only"), "Program(AndExpr(PrefixExpr(ForkExpr(⚠)),Term))", ""),
    ("visibility:private", LIT, "visibility:private", "Program(PrefixExpr(VisibilityExpr))", ""),
    ("visibility:any", LIT, "visibility:any", "Program(PrefixExpr(VisibilityExpr))", ""),
    (
        "visibility:invalid", LIT, Err(11, "expected public, private or any"),
        "Program(AndExpr(PrefixExpr(VisibilityExpr(⚠)),Term))", "",
    ),
    ("file:my-component.tsx", LIT, 'file:(?i)"my-component.tsx"', "Program(PrefixExpr(FileExpr))", ""),
    ("repo:project123", LIT, 'repo:"project123"', "Program(PrefixExpr(RepoExpr))", ""),
    ("content:@Component", LIT, 'substr:(?i)"@Component"', "Program(PrefixExpr(ContentExpr))", ""),
    ("context:data_engineering", LIT, 'context:"data_engineering"', "Program(PrefixExpr(ContextExpr))", ""),
    ("(file:test.js)", LIT, 'file:(?i)"test.js"', "Program(ParenExpr(PrefixExpr(FileExpr)))", ""),
    (
        "(file:*.ts lang:typescript)", LIT, Err(6, "file: invalid regular expression"),
        "Program(ParenExpr(AndExpr(PrefixExpr(FileExpr),PrefixExpr(LangExpr))))", NOT_A_REGEX,
    ),
    ("repo:localhost:12030/testrepo", LIT, 'repo:"localhost:12030/testrepo"', "Program(PrefixExpr(RepoExpr))", ""),
    ("r:myserver:3000/project", LIT, 'repo:"myserver:3000/project"', "Program(PrefixExpr(RepoExpr))", ""),
    ("reposet:localhost:12030/testrepo", LIT, 'reposet:"localhost:12030/testrepo"', "Program(PrefixExpr(RepoSetExpr))", ""),
    (
        "reposet:myserver:12030/repo1,localhost:3000/repo2", LIT, 'reposet:"myserver:12030/repo1,localhost:3000/repo2"',
        "Program(PrefixExpr(RepoSetExpr))", "",
    ),
    (
        "test.cpp repo:localhost:12030/testrepo", LIT, '(and substr:(?i)"test.cpp" repo:"localhost:12030/testrepo")',
        "Program(AndExpr(Term,PrefixExpr(RepoExpr)))", "",
    ),
    (
        "test.cpp reposet:myserver:12030/testrepo", LIT, '(and substr:(?i)"test.cpp" reposet:"myserver:12030/testrepo")',
        "Program(AndExpr(Term,PrefixExpr(RepoSetExpr)))", "",
    ),
]

QUOTED = [
    ('"hello"', LIT, 'substr:(?i)"hello"', "Program(QuotedTerm)", ""),
    ('"hello', LIT, r'substr:(?i)"\"hello"', "Program(Term)", "an unclosed quote is literal text"),
    ('hello"', LIT, r'substr:(?i)"hello\""', "Program(Term)", ""),
    ('"hello world"', LIT, 'substr:(?i)"hello world"', "Program(QuotedTerm)", ""),
    ('"this is a search term"', LIT, 'substr:(?i)"this is a search term"', "Program(QuotedTerm)", ""),
    (r'"hello \"world\""', LIT, r'substr:(?i)"hello \"world\""', "Program(QuotedTerm)", ""),
    (r'"path\\to\\file"', LIT, r'substr:(?i)"path\\to\\file"', "Program(QuotedTerm)", ""),
    (r'"test\\\\path"', LIT, r'substr:(?i)"test\\\\path"', "Program(QuotedTerm)", ""),
    (r'"\"quoted\" \"words\""', LIT, r'substr:(?i)"\"quoted\" \"words\""', "Program(QuotedTerm)", ""),
    (r'"test\\nvalue\"quoted"', LIT, r'substr:(?i)"test\\nvalue\"quoted"', "Program(QuotedTerm)", ""),
    (
        '""', LIT, "false", "Program(QuotedTerm)",
        "differs: an empty quoted term looks for nothing, like an empty group: no results",
    ),
    ('"   "', LIT, 'substr:(?i)"   "', "Program(QuotedTerm)", ""),
    ('file:"my file.txt"', LIT, 'file:(?i)"my file.txt"', "Program(PrefixExpr(FileExpr))", ""),
    ('repo:"github.com/user/repo name"', LIT, 'repo:"github.com/user/repo name"', "Program(PrefixExpr(RepoExpr))", ""),
    ('content:"console.log"', LIT, 'substr:(?i)"console.log"', "Program(PrefixExpr(ContentExpr))", ""),
    ('rev:"feature/my feature"', LIT, 'rev:"feature/my feature"', "Program(PrefixExpr(RevisionExpr))", ""),
    (
        '"first string" "second string"', LIT, '(and substr:(?i)"first string" substr:(?i)"second string")',
        "Program(AndExpr(QuotedTerm,QuotedTerm))", "",
    ),
    (
        'unquoted "quoted string" another', LIT,
        '(and substr:(?i)"unquoted" substr:(?i)"quoted string" substr:(?i)"another")',
        "Program(AndExpr(Term,QuotedTerm,Term))", "",
    ),
    ('"(test)"', LIT, 'substr:(?i)"(test)"', "Program(QuotedTerm)", ""),
    ('"[a-z]+"', LIT, 'substr:(?i)"[a-z]+"', "Program(QuotedTerm)", ""),
    ('"test@example.com"', LIT, 'substr:(?i)"test@example.com"', "Program(QuotedTerm)", ""),
    ('"key:value"', LIT, 'substr:(?i)"key:value"', "Program(QuotedTerm)", ""),
    ('"test-case-example"', LIT, 'substr:(?i)"test-case-example"', "Program(QuotedTerm)", ""),
    ('"com.example.package"', LIT, 'substr:(?i)"com.example.package"', "Program(QuotedTerm)", ""),
    (r'"\\w+\\s*=\\s*\\d+"', LIT, r'substr:(?i)"\\w+\\s*=\\s*\\d+"', "Program(QuotedTerm)", ""),
    ('"path/to/file"', LIT, 'substr:(?i)"path/to/file"', "Program(QuotedTerm)", ""),
    ('"my_variable_name"', LIT, 'substr:(?i)"my_variable_name"', "Program(QuotedTerm)", ""),
    ('"test123"', LIT, 'substr:(?i)"test123"', "Program(QuotedTerm)", ""),
    ('"CamelCaseTest"', LIT, 'substr:(?i)"CamelCaseTest"', "Program(QuotedTerm)", ""),
    ('file:"test file.js"', LIT, 'file:(?i)"test file.js"', "Program(PrefixExpr(FileExpr))", ""),
    (
        'file:"my file.txt" repo:"my repo"', LIT, '(and file:(?i)"my file.txt" repo:"my repo")',
        "Program(AndExpr(PrefixExpr(FileExpr),PrefixExpr(RepoExpr)))", "",
    ),
    ('("quoted term")', LIT, 'substr:(?i)"quoted term"', "Program(ParenExpr(QuotedTerm))", ""),
    (
        '("first" "second")', LIT, '(and substr:(?i)"first" substr:(?i)"second")',
        "Program(ParenExpr(AndExpr(QuotedTerm,QuotedTerm)))", "",
    ),
    (r'"line1\\nline2"', LIT, r'substr:(?i)"line1\\nline2"', "Program(QuotedTerm)", ""),
    (r'"value\\ttab"', LIT, r'substr:(?i)"value\\ttab"', "Program(QuotedTerm)", ""),
    ('lang:"objective-c"', LIT, 'lang:"objective-c"', "Program(PrefixExpr(LangExpr))", ""),
    ('sym:"My Class"', LIT, 'sym:(?i)"My Class"', "Program(PrefixExpr(SymExpr))", ""),
    ('content:"TODO: fix this"', LIT, 'substr:(?i)"TODO: fix this"', "Program(PrefixExpr(ContentExpr))", ""),
    ('"@decorator"', LIT, 'substr:(?i)"@decorator"', "Program(QuotedTerm)", ""),
    ('"#define"', LIT, 'substr:(?i)"#define"', "Program(QuotedTerm)", ""),
    ('"$variable"', LIT, 'substr:(?i)"$variable"', "Program(QuotedTerm)", ""),
    ('"100%"', LIT, 'substr:(?i)"100%"', "Program(QuotedTerm)", ""),
    ('"foo&bar"', LIT, 'substr:(?i)"foo&bar"', "Program(QuotedTerm)", ""),
    ('"test*"', LIT, 'substr:(?i)"test*"', "Program(QuotedTerm)", ""),
    ('"a+b"', LIT, 'substr:(?i)"a+b"', "Program(QuotedTerm)", ""),
    ('"a=b"', LIT, 'substr:(?i)"a=b"', "Program(QuotedTerm)", ""),
    ('"<template>"', LIT, 'substr:(?i)"<template>"', "Program(QuotedTerm)", ""),
    ('"a|b"', LIT, 'substr:(?i)"a|b"', "Program(QuotedTerm)", ""),
    ('"~/.config"', LIT, 'substr:(?i)"~/.config"', "Program(QuotedTerm)", ""),
    ('"`code`"', LIT, 'substr:(?i)"`code`"', "Program(QuotedTerm)", ""),
    ('"what?"', LIT, 'substr:(?i)"what?"', "Program(QuotedTerm)", ""),
    ('"important!"', LIT, 'substr:(?i)"important!"', "Program(QuotedTerm)", ""),
    ('"stmt;"', LIT, 'substr:(?i)"stmt;"', "Program(QuotedTerm)", ""),
    ('"a,b,c"', LIT, 'substr:(?i)"a,b,c"', "Program(QuotedTerm)", ""),
    (
        r'content:"function \"test\" {"', LIT, r'substr:(?i)"function \"test\" {"',
        "Program(PrefixExpr(ContentExpr))", "",
    ),
    ('"repo:hello"', LIT, 'substr:(?i)"repo:hello"', "Program(QuotedTerm)", ""),
    ('"file:test.js"', LIT, 'substr:(?i)"file:test.js"', "Program(QuotedTerm)", ""),
    ('"lang:python"', LIT, 'substr:(?i)"lang:python"', "Program(QuotedTerm)", ""),
    ('"repo:"', LIT, 'substr:(?i)"repo:"', "Program(QuotedTerm)", ""),
    (
        '"repo:test" file:actual.js', LIT, '(and substr:(?i)"repo:test" file:(?i)"actual.js")',
        "Program(AndExpr(QuotedTerm,PrefixExpr(FileExpr)))", "",
    ),
    ('"f:test"', LIT, 'substr:(?i)"f:test"', "Program(QuotedTerm)", ""),
    ('"rev:main"', LIT, 'substr:(?i)"rev:main"', "Program(QuotedTerm)", ""),
    (
        r'name\s*=\s*"projectmanagementlugapi lang:HCL', LIT,
        r'(and substr:(?i)"name\\s*=\\s*\"projectmanagementlugapi" lang:"HCL")',
        "Program(AndExpr(Term, PrefixExpr(LangExpr)))", "a quote inside a word is an ordinary character",
    ),
]

# regex.txt is parsed in Sourcebot's regex dialect: our regex mode.
REGEX = [
    ("(test|render)<", RE, 'regex:(?i)"(test|render)<"', "Program(Term)", ""),
    ("test|render", RE, 'regex:(?i)"test|render"', "Program(Term)", ""),
    ("(foo|bar)", RE, 'regex:(?i)"foo|bar"', "Program(Term)", "a group standing alone, holding the regex"),
    ("(foo|bar)baz", RE, 'regex:(?i)"(foo|bar)baz"', "Program(Term)", ""),
    ("^foo.*bar$", RE, 'regex:(?i)"^foo.*bar$"', "Program(Term)", ""),
    ("[abc]+", RE, 'regex:(?i)"[abc]+"', "Program(Term)", ""),
    (r"func\(arg\)", RE, r'regex:(?i)"func\\(arg\\)"', "Program(Term)", ""),
    ("(test|render) or (foo|bar)", RE, '(or regex:(?i)"test|render" regex:(?i)"foo|bar")', "Program(OrExpr(Term,Term))", ""),
    ("(test|render) (foo|bar)", RE, '(and regex:(?i)"test|render" regex:(?i)"foo|bar")', "Program(AndExpr(Term,Term))", ""),
    ("file:test.js", RE, 'file:(?i)"test.js"', "Program(PrefixExpr(FileExpr))", ""),
    (
        "file:test.js (test|render)<", RE, '(and file:(?i)"test.js" regex:(?i)"(test|render)<")',
        "Program(AndExpr(PrefixExpr(FileExpr),Term))", "",
    ),
    (
        "(file:.yarnrc.yml or file:README.md)", RE, '(or file:(?i)".yarnrc.yml" file:(?i)"README.md")',
        "Program(ParenExpr(OrExpr(PrefixExpr(FileExpr),PrefixExpr(FileExpr))))", "",
    ),
    (
        r"repo:^github\.com/sourcebot\x2ddev/sourcebot$ (file:.yarnrc.yml or file:README.md)", RE,
        r'(and repo:"^github\\.com/sourcebot\\x2ddev/sourcebot$" (or file:(?i)".yarnrc.yml" file:(?i)"README.md"))',
        "Program(AndExpr(PrefixExpr(RepoExpr),ParenExpr(OrExpr(PrefixExpr(FileExpr),PrefixExpr(FileExpr)))))", "",
    ),
    (
        r"repo:^github\.com/sourcebot-dev/.+$ lang:Dockerfile ( FROM\s+node or RUN\s+npm )", RE,
        r'(and repo:"^github\\.com/sourcebot-dev/.+$" lang:"Dockerfile"'
        r' (or regex:(?i)"FROM\\s+node" regex:(?i)"RUN\\s+npm"))',
        "Program(AndExpr(PrefixExpr(RepoExpr),PrefixExpr(LangExpr),ParenExpr(OrExpr(Term,Term))))", "",
    ),
    (
        "-(file:test or file:spec)", RE, '(not (or file:(?i)"test" file:(?i)"spec"))',
        "Program(NegateExpr(ParenExpr(OrExpr(PrefixExpr(FileExpr),PrefixExpr(FileExpr)))))", "",
    ),
    ("-file:test.js", RE, '(not file:(?i)"test.js")', "Program(NegateExpr(PrefixExpr(FileExpr)))", ""),
    ('"(test|render)"', RE, 'regex:(?i)"(test|render)"', "Program(QuotedTerm)", ""),
    (
        "file:test.js lang:TypeScript (render|mount)", RE,
        '(and file:(?i)"test.js" lang:"TypeScript" regex:(?i)"render|mount")',
        "Program(AndExpr(PrefixExpr(FileExpr),PrefixExpr(LangExpr),Term))", "",
    ),
    ("-pattern", RE, 'regex:(?i)"-pattern"', "Program(Term)", ""),
    ("or", RE, 'regex:(?i)"or"', "Program(Term)", ""),
    (
        "repo:myorg (init|setup)", RE, '(and repo:"myorg" regex:(?i)"init|setup")',
        "Program(AndExpr(PrefixExpr(RepoExpr),Term))", "",
    ),
]

FILES = {
    "basic": BASIC,
    "grouping": GROUPING,
    "negation": NEGATION,
    "operators": OPERATORS,
    "parenthesis": PARENTHESIS,
    "precedence": PRECEDENCE,
    "prefixes": PREFIXES,
    "quoted": QUOTED,
    "regex": REGEX,
}
ROWS = [(name, *row) for name, rows in FILES.items() for row in rows]


def _parse(query: str, mode: str) -> Node:
    return parse(query, is_regex=mode == RE)


@pytest.mark.parametrize(
    ("file", "query", "mode", "expected", "sourcebot", "note"), ROWS, ids=[f"{r[0]}:{r[1]}" for r in ROWS]
)
def test_golden_case(file, query, mode, expected, sourcebot, note):
    if isinstance(expected, Err):
        with pytest.raises(QueryParseError) as info:
            _parse(query, mode)
        assert (info.value.position, expected.reason in info.value.reason) == (expected.position, True), info.value
        return
    assert str(_parse(query, mode)) == expected


# -- the golden trees, read back: our tree has the same leaves, negations and errors ------------

_OLD_EMPTY_GROUP = "ParenExpr(Term(⚠))"  # how older golden files wrote an (then invalid) empty group
_LEAF = re.compile(r"\b(QuotedTerm|Term|PrefixExpr)\b")


def _sourcebot_shape(tree: str) -> tuple[bool, int, int]:
    """(is an error, number of leaves, number of negations) of a golden tree."""
    tree = tree.replace(_OLD_EMPTY_GROUP, "ParenExpr")
    return "⚠" in tree, len(_LEAF.findall(tree)), tree.count("NegateExpr")


def _our_shape(query: str, mode: str) -> tuple[bool, int, int]:
    try:
        node = _parse(query, mode)
    except QueryParseError:
        return True, 0, 0
    nodes = list(walk(node))
    leaves = sum(1 for n in nodes if not isinstance(n, (And, Or, Not, Const)))
    return False, leaves, sum(1 for n in nodes if isinstance(n, Not))


AGREEING = [r for r in ROWS if not r[5].startswith("differs:")]


@pytest.mark.parametrize(
    ("file", "query", "mode", "expected", "sourcebot", "note"), AGREEING, ids=[f"{r[0]}:{r[1]}" for r in AGREEING]
)
def test_same_shape_as_sourcebot(file, query, mode, expected, sourcebot, note):
    error, leaves, negations = _sourcebot_shape(sourcebot)
    if error:
        assert _our_shape(query, mode)[0], "Sourcebot rejects this query"
    else:
        assert _our_shape(query, mode) == (False, leaves, negations)


def test_every_golden_file_is_covered():
    """One table per golden file, none empty, no case listed twice in a file, every difference
    explained."""
    assert all(FILES.values())
    for rows in FILES.values():
        keys = [(q, m) for q, m, *_ in rows]
        assert len(keys) == len(set(keys))
    assert all(len(r[5]) > len("differs: ") + 20 for r in ROWS if r[5].startswith("differs:"))


# -- the regex-group cases of the spec: a group glued to more text is one regex ------------------

GLUED = [
    (r"(urlsplit|urlparse)\(", RE, r'regex:(?i)"(urlsplit|urlparse)\\("'),
    (r"(def|class)\s+url", RE, r'regex:(?i)"(def|class)\\s+url"'),
    ("(a+)+$", RE, 'regex:(?i)"(a+)+$"'),
    ("(url)+split", RE, 'regex:(?i)"(url)+split"'),
    ("(test|render)<", RE, 'regex:(?i)"(test|render)<"'),
    ("x (foo|bar)baz y", RE, '(and regex:(?i)"x" regex:(?i)"(foo|bar)baz" regex:(?i)"y")'),
    ("((foo|bar)baz)", RE, 'regex:(?i)"(foo|bar)baz"'),
    ("-(foo|bar)baz", RE, 'regex:(?i)"-(foo|bar)baz"'),
    ("-(foo|bar) baz", RE, '(and (not regex:(?i)"foo|bar") regex:(?i)"baz")'),
    ("(?i)foo", RE, 'regex:(?i)"(?i)foo"'),
    ("(?:a|b)", RE, 'regex:(?i)"(?:a|b)"'),
    ("(a)b", LIT, 'substr:(?i)"(a)b"'),
    ("(int)(x) y", LIT, '(and substr:(?i)"(int)(x)" substr:(?i)"y")'),
    ("(a))", LIT, 'substr:(?i)"(a))"'),
    (r"(a\)", LIT, r'substr:(?i)"(a\\)"'),
]


@pytest.mark.parametrize(("query", "mode", "expected"), GLUED)
def test_glued_group_is_one_term(query, mode, expected):
    assert str(_parse(query, mode)) == expected
