"""Code navigation over the index: where a symbol is defined and where it is used.

Both answers are searches through the caller's `ToolContext`, so they go through the same
searchers and the same permission filter as ``POST /api/search`` (a repository the caller may
not see is never searched, and never named in an answer):

* definitions: ``sym:"^<name>$"``, the index's universal-ctags symbol definitions whose name is
  exactly `name` (case-sensitive);
* references: the regular expression ``\\b<name>\\b``, case-sensitive: every word-boundary
  occurrence of the name in file contents (definitions included, as Sourcebot answers); the
  ``\\b`` only on a side where the name has a word character (`word_regex`).

Either may be scoped to one repository (its full name), one language (Linguist name; the
TypeScript family expands to TypeScript, JavaScript, TSX and JSX as Sourcebot does) and one
indexed revision. The answer has Sourcebot's shape (``FindRelatedSymbolsResponse``)::

    {stats: {matchCount}, files: [{fileName, repository, repositoryId, webUrl, language,
     matches: [{lineContent, range: {start, end}}]}], repositoryInfo, isSearchExhaustive}

with one ``matches`` entry per occurrence and ``lineContent`` the single line it is on (the
search merges adjacent matching lines into one chunk; here each match gets its own line).
At most `MAX_MATCHES` occurrences are returned; ``isSearchExhaustive`` says whether there were
more.
"""

from __future__ import annotations

import re
from typing import Any

from codesearch.app.context import ToolContext
from codesearch.errors import ToolInputError
from codesearch.tools.search_tools import literal_regex as regex_literal
from codesearch.tools.search_tools import quote as _quoted

#: Sourcebot's MAX_REFERENCE_COUNT: occurrences per answer.
MAX_MATCHES = 1000
MAX_SYMBOL_LENGTH = 256
#: Languages searched together, as Sourcebot's code navigation groups them.
LANGUAGE_FAMILIES = {
    name: ("TypeScript", "JavaScript", "JSX", "TSX") for name in ("TypeScript", "JavaScript", "JSX", "TSX")
}

_BAD_CHAR = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def check_symbol(name: object) -> str:
    """`name` when it can be looked up: 1-256 characters on one line, no control characters
    (spaces are fine: a Markdown heading is a ctags symbol); else a `ToolInputError` that says
    which rule it breaks."""
    if not isinstance(name, str) or not name:
        raise ToolInputError("symbolName: give the name of a symbol (a non-empty string)")
    if len(name) > MAX_SYMBOL_LENGTH:
        raise ToolInputError(f"symbolName: a symbol name is at most {MAX_SYMBOL_LENGTH} characters, not {len(name)}")
    m = _BAD_CHAR.search(name)
    if m:
        raise ToolInputError(
            f"symbolName: a symbol name is one line without control characters "
            f"(found {m.group()!r} at character {m.start() + 1})"
        )
    return name


def scope_terms(repo: str | None, language: str | None, revision: str | None) -> list[str]:
    """The query terms that restrict a lookup to a repository, a language and a revision."""
    terms: list[str] = []
    if repo:
        terms.append("repo:" + _quoted("^" + regex_literal(repo) + "$"))
    if language:
        family = LANGUAGE_FAMILIES.get(language, (language,))
        langs = " or ".join("lang:" + _quoted(x) for x in family)
        terms.append(f"({langs})" if len(family) > 1 else langs)
    if revision and revision != "HEAD":
        terms.append("rev:" + _quoted(revision))
    return terms


def definitions_query(
    name: str, repo: str | None = None, language: str | None = None, revision: str | None = None
) -> str:
    return " ".join(["sym:" + _quoted("^" + regex_literal(name) + "$"), *scope_terms(repo, language, revision)])


def word_regex(name: str) -> str:
    """`name` as a whole word: ``\\b`` on each side that is a word character (a ``\\b`` next to
    ``$`` or ``+`` would demand a word character there: ``operator+`` is matched as typed)."""
    left = r"\b" if re.match(r"\w", name) else ""
    right = r"\b" if re.search(r"\w$", name) else ""
    return left + regex_literal(name) + right


def references_query(
    name: str, repo: str | None = None, language: str | None = None, revision: str | None = None
) -> str:
    return " ".join([_quoted(word_regex(name)), *scope_terms(repo, language, revision)])


def _on_revision(branches: list[str], revision: str) -> bool:
    """Whether a file found on `branches` is on `revision` itself (``rev:`` matches substrings)."""
    for b in branches or []:
        short = b.split("/", 2)[2] if b.startswith(("refs/heads/", "refs/tags/")) else b
        if revision in (b, short):
            return True
    return False


def related_symbols(resp: dict[str, Any], revision: str | None = None, limit: int = MAX_MATCHES) -> dict[str, Any]:
    """A search response reshaped as Sourcebot's ``FindRelatedSymbolsResponse``: one match per
    occurrence with the text of its own line, at most `limit` of them."""
    files: list[dict[str, Any]] = []
    count, exhaustive = 0, bool(resp.get("isSearchExhaustive", True))
    for f in resp.get("files", []):
        if revision and revision != "HEAD" and not _on_revision(f.get("branches", []), revision):
            continue
        matches: list[dict[str, Any]] = []
        for chunk in f.get("chunks", []):
            lines = chunk.get("content", "").split("\n")
            first = chunk.get("contentStart", {}).get("lineNumber", 1)
            for rng in chunk.get("matchRanges", []):
                if count >= limit:
                    exhaustive = False
                    break
                i = rng["start"]["lineNumber"] - first
                matches.append({"lineContent": lines[i] if 0 <= i < len(lines) else "", "range": rng})
                count += 1
        if matches:
            out: dict[str, Any] = {
                "fileName": f["fileName"]["text"],
                "repository": f["repository"],
                "repositoryId": f["repositoryId"],
                "language": f.get("language", ""),
                "matches": matches,
            }
            if f.get("webUrl"):
                out["webUrl"] = f["webUrl"]
            files.append(out)
    repo_ids = {f["repositoryId"] for f in files}
    return {
        "stats": {"matchCount": count},
        "files": files,
        "repositoryInfo": [r for r in resp.get("repositoryInfo", []) if r.get("id") in repo_ids],
        "isSearchExhaustive": exhaustive,
    }


def find_definitions(
    tc: ToolContext,
    name: str,
    *,
    repo: str | None = None,
    language: str | None = None,
    revision: str | None = None,
) -> dict[str, Any]:
    """Where `name` is defined, in the repositories `tc`'s caller may see."""
    query = definitions_query(check_symbol(name), repo, language, revision)
    resp = tc.search(query, regex=True, case_sensitive=True, matches=MAX_MATCHES + 1)
    return related_symbols(resp, revision)


def find_references(
    tc: ToolContext,
    name: str,
    *,
    repo: str | None = None,
    language: str | None = None,
    revision: str | None = None,
) -> dict[str, Any]:
    """Where `name` occurs as a whole word, in the repositories `tc`'s caller may see."""
    query = references_query(check_symbol(name), repo, language, revision)
    resp = tc.search(query, regex=True, case_sensitive=True, matches=MAX_MATCHES + 1)
    return related_symbols(resp, revision)
