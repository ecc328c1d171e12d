"""``git grep`` at any commit: the ``grep`` tool's search for refs the index does not hold.

Why git's grep and not the index: the index holds only the configured revisions; any other
ref (an old tag, a review branch) is searched in git's object store, still bounded (caps on
files and hits, git stopped at the cap) and with the caller's pattern passed behind ``-e``.
The caller's ``include`` glob is in `codesearch.globs` syntax; it is turned into ``:(glob)``
pathspecs when git's wildmatch agrees with it (so git reads only those files) and always
checked again on the paths git returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from codesearch.errors import InvalidArgument
from codesearch.git.objects import resolve_commit
from codesearch.git.paths import check_dir, show
from codesearch.git.process import Git, first_line
from codesearch.git.trees import check_tree
from codesearch.globs import glob_to_regex

__all__ = ["GREP_MAX_LINE_CHARS", "GrepHit", "grep"]

#: a matching line is cut at this many characters
GREP_MAX_LINE_CHARS = 2000


@dataclass(frozen=True)
class GrepHit:
    path: str  # from the repository root
    line: int  # 1-based
    text: str  # the line (without its line end), cut at GREP_MAX_LINE_CHARS characters


#: set once git says it was built without PCRE: grep then uses -E
_pcre_missing = False


def _braces(glob: str, limit: int = 64) -> list[str] | None:
    """`glob` with ``{a,b}`` alternatives expanded (None when there would be more than `limit`)."""
    start = glob.find("{")
    if start < 0:
        return [glob]
    depth, parts, last = 0, [], start + 1
    for i in range(start, len(glob)):
        c = glob[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                parts.append(glob[last:i])
                out: list[str] = []
                for alt in parts:
                    rests = _braces(alt + glob[i + 1 :], limit)
                    if not rests:
                        return None
                    for rest in rests:
                        if len(out) >= limit:
                            return None
                        out.append(glob[:start] + rest)
                return out
        elif c == "," and depth == 1:
            parts.append(glob[last:i])
            last = i + 1
    return [glob]  # an unclosed brace is literal


def _wild_escape(s: str) -> str:
    return re.sub(r"([*?\[\\])", r"\\\1", s)


def _include_pathspecs(include: str, under: str) -> list[str] | None:
    """``:(glob)`` pathspecs selecting at least the files `include` matches (so git reads only
    those), or None when git's wildmatch and our glob syntax could disagree (``\\``, ``**``
    inside a segment) or braces expand too far: then the path scope alone narrows the search."""
    if "\\" in include:
        return None
    alts = _braces(include)
    if alts is None:
        return None
    base = _wild_escape(under) + "/" if under else ""
    specs = []
    for g in alts:
        g = g.lstrip("/")
        if not g or any("**" in seg and seg != "**" for seg in g.split("/")):
            return None
        if "[" in g and not re.search(r"\[!?\^?.[^\]]*\]", g):  # an unclosed [ is literal for us, not for git
            return None
        specs.append(":(glob)" + base + ("" if "/" in g else "**/") + g)
    return specs


def _include_regex(include: str, under: str) -> re.Pattern[str]:
    """The paths `include` selects below `under`: codesearch glob syntax (`codesearch.globs`);
    a glob without '/' matches file names at any depth, one with '/' the path below `under`."""
    glob = include.lstrip("/")
    prefix = re.escape(under + "/") if under else ""
    if "/" not in glob.strip("/"):
        prefix += "(?:.*/)?"
    return re.compile(prefix + glob_to_regex(glob))


def _grep_error(pattern: str, stderr: str) -> InvalidArgument | None:
    m = re.match(r"-e option, '.*': (.*)$", first_line(stderr), re.DOTALL)
    if m:
        return InvalidArgument(f"invalid regular expression {pattern!r}: {m.group(1)}")
    return None


def grep(
    git_dir: str,
    ref: str,
    pattern: str,
    *,
    path: str = "",
    include: str | None = None,
    max_files: int = 100,
    case_sensitive: bool = True,
    max_hits: int = 10_000,
) -> tuple[list[GrepHit], bool]:
    """Lines matching the regular expression `pattern` in the text files at `ref` (``git grep``;
    for refs the index does not hold).

    Syntax: Perl-compatible (``git grep -P``: ``\\d``, ``\\b``, ``(?:…)``, lazy quantifiers),
    or POSIX extended (``-E``) when git was built without PCRE. Matching is per line on bytes
    (C locale), so ``.`` matches one byte and ignoring case works on ASCII letters only.
    Binary files are skipped. `path` limits the search to a directory; `include` is a glob over
    file paths in `codesearch.globs` syntax (``*.py`` = file names at any depth; with a ``/``
    it matches the path below `path`, e.g. ``src/**/*.{ts,tsx}``).

    Returns (hits in path order, then line order; truncated): truncated when files beyond the
    first `max_files` with a match exist, or more than `max_hits` lines matched (git is stopped
    there). InvalidArgument for an empty or multi-line pattern or one that does not compile.
    """
    global _pcre_missing
    if not isinstance(pattern, str) or not pattern:
        raise InvalidArgument("pattern is empty: give a regular expression to search for")
    if any(c in pattern for c in "\0\n\r"):
        raise InvalidArgument("pattern must be one line (no newline or NUL characters)")
    for name, value in (("max_files", max_files), ("max_hits", max_hits)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgument(f"{name} must be a whole number of at least 1 (got {value!r})")
    under = check_dir(path)
    if include is not None and (not include.strip("/") or any(c in include for c in "\0\n\r")):
        raise InvalidArgument(f"include {include!r} is not a usable glob: give one such as *.py or src/**/*.ts")
    commit = resolve_commit(git_dir, ref)
    if under:
        check_tree(git_dir, commit, ref, under)
    keep = _include_regex(include, under) if include else None
    specs = (_include_pathspecs(include, under) if include else None) or ([f":(literal){under}"] if under else [])
    while True:
        flavour = "-E" if _pcre_missing else "-P"
        args = [
            "grep",
            "--no-color",
            "-n",
            "-I",
            "-z",
            "--full-name",
            "--no-textconv",
            flavour,
            *([] if case_sensitive else ["-i"]),
            "-e",
            pattern,
            commit,
            "--",
            *specs,
        ]
        hits, truncated, retry = _run_grep(Git.at(git_dir), args, commit, pattern, keep, max_files, max_hits)
        if not retry:
            return hits, truncated
        _pcre_missing = True


def _run_grep(
    git: Git,
    args: list[str],
    commit: str,
    pattern: str,
    keep: re.Pattern[str] | None,
    max_files: int,
    max_hits: int,
) -> tuple[list[GrepHit], bool, bool]:
    hits: list[GrepHit] = []
    files = 0
    last = None
    truncated = False
    prefix = commit.encode() + b":"
    with git.stream(args) as p:
        while True:
            got = p.out.until(b"\0", 1 << 16)
            if got is None:
                break
            raw_path = got[0]
            num = p.out.until(b"\0", 32)
            text = p.out.until(b"\n", GREP_MAX_LINE_CHARS * 4)
            if num is None or text is None:
                break
            name = show(raw_path.removeprefix(prefix))
            if keep is not None and not keep.match(name):
                continue
            if name != last:
                if files >= max_files:
                    truncated = True
                    break
                files, last = files + 1, name
            if len(hits) >= max_hits:
                truncated = True
                break
            try:
                line_no = int(num[0])
            except ValueError:
                continue
            hits.append(GrepHit(name, line_no, show(text[0].removesuffix(b"\r"))[:GREP_MAX_LINE_CHARS]))
        rc = p.finish(stop=truncated)
        if truncated or rc in (0, 1):
            return hits, truncated, False
        failure = p.failed()
    if "-P" in args and "USE_LIBPCRE" in failure.stderr:  # git built without PCRE: use -E
        return [], False, True
    bad = _grep_error(pattern, failure.stderr)
    if bad is not None:
        raise bad
    raise failure
