"""What a caller may name in a repository: refs, paths and scopes, checked before git sees them.

Refs, paths, patterns and dates come from untrusted callers (the HTTP API, MCP tools, web
pages), and git reads many strings as options or revision expressions. So:

* refs pass `check_ref` (the grammar of `parse_ref`: a branch or tag name, ``HEAD`` or a hex
  object name, with at most a short ``~N`` / ``^N`` ancestry suffix) and are turned into a
  full commit sha by `objects.resolve_commit` before any other command sees them; later
  commands get the sha, never the caller's text;
* paths pass `check_path` / `check_dir` / `check_scope` (relative, no ``..``/``.``/empty
  segments, no NUL or newline) and reach git only as ``<sha>:<path>`` object names or as
  ``:(literal)`` / ``:(glob)`` pathspecs after ``--``.

A malformed value is the caller's fault: `MalformedGitRef` / `FileNotFound` naming the value.
Paths are bytes in git; they are shown decoded as UTF-8 with invalid bytes replaced (U+FFFD).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from codesearch.errors import FileNotFound, MalformedGitRef

__all__ = [
    "MAX_REF_CHARS",
    "MAX_REF_GENERATIONS",
    "MAX_REF_SUFFIXES",
    "REF_FORMS",
    "RefSpec",
    "check_dir",
    "check_path",
    "check_ref",
    "check_scope",
    "encode",
    "git_dir_of",
    "parse_ref",
    "scope_spec",
    "show",
]


def check_path(path: str) -> str:
    """`path` when it is a plain relative path inside a repository, else FileNotFound."""
    bad = not path or path.startswith("/") or any(c in path for c in ("\0", "\n", "\r"))
    if not bad:
        bad = any(seg in ("", ".", "..") for seg in path.split("/"))
    if bad:
        raise FileNotFound(f"file {path!r} not found: give a path relative to the repository root")
    return path


def check_dir(path: str | None) -> str:
    """A directory path for listing: '' for the root (given as None, '', '/' or '.'), else
    `path` without one trailing '/', checked like `check_path` (FileNotFound otherwise)."""
    if path is None or path in ("", "/", "."):
        return ""
    clean = path.removesuffix("/")
    try:
        return check_path(clean)
    except FileNotFound:
        raise FileNotFound(
            f"directory {path!r} not found: give a path relative to the repository root ('' for the root)"
        ) from None


def check_scope(path: str | None) -> str:
    """A path that narrows a history or a diff to one file or directory: '' for the whole
    repository (None, '', '/' or '.'), else `path` without a leading or trailing '/', checked
    like `check_path` (FileNotFound otherwise). It need not exist at any ref: a path deleted
    long ago still has a history."""
    if path is None or path in ("", "/", "."):
        return ""
    clean = path.removeprefix("/").removesuffix("/")
    try:
        return check_path(clean)
    except FileNotFound:
        raise FileNotFound(
            f"path {path!r} not found: give a file or directory relative to the repository root"
        ) from None


def scope_spec(scope: str) -> list[str]:
    """The pathspec after ``--`` for a `check_scope` path: literal, so no glob magic."""
    return [f":(literal){scope}"] if scope else []


# ---------------------------------------------------------------------- refs

#: a ref is at most this many characters
MAX_REF_CHARS = 1024
#: at most this many ``~N`` / ``^N`` suffixes after the name ...
MAX_REF_SUFFIXES = 16
#: ... walking at most this many generations in all (each N, and their sum: ``~N`` walks N
#: commits, ``^N`` one); git walks 10,000 commits in a few tens of milliseconds
MAX_REF_GENERATIONS = 10_000
#: what an error about a ref says the caller may give
REF_FORMS = (
    "give a branch or tag name (main, release/1.0, refs/heads/main, refs/tags/v1.0), HEAD or a commit "
    "sha (4 to 40 hex digits, 64 for SHA-256), optionally followed by ~N or ^N"
)

_HEX = re.compile(r"[0-9a-fA-F]{4,40}|[0-9a-fA-F]{64}")
_SUFFIX = re.compile(r"([~^])([0-9]*)")
#: characters git's check-ref-format refuses in a name (besides control characters), and ``{``
#: after ``@`` (reflog syntax) is refused on its own
_NOT_IN_NAME = frozenset(" ~^:?*[\\")
_FULL_PREFIXES = ("refs/heads/", "refs/tags/")


@dataclass(frozen=True)
class RefSpec:
    """A ref as `parse_ref` read it: `kind` is ``head`` (``HEAD``), ``full`` (``refs/heads/…`` or
    ``refs/tags/…``), ``name`` (a short branch or tag name) or ``hex`` (hex digits: an object
    name, or a short name made of hex digits); `suffix` the ``~N`` / ``^N`` steps as given."""

    kind: str
    base: str
    suffix: str = ""

    def candidates(self) -> list[str]:
        """What git may read the base as, in the order git itself tries them: a short name as
        a tag, then as a branch (then, made of hex digits, as an abbreviated object name); a
        full 40- or 64-digit object name first as an object. Nothing else: never a pseudo-ref
        (``FETCH_HEAD``), a remote-tracking branch or a path in the git directory."""
        if self.kind in ("head", "full"):
            return [self.base]
        names = [f"refs/tags/{self.base}", f"refs/heads/{self.base}"]
        if self.kind == "name":
            return names
        return [self.base, *names] if len(self.base) in (40, 64) else [*names, self.base]


def _refuse(ref: str, why: str) -> MalformedGitRef:
    shown = ref if len(ref) <= 200 else ref[:200] + "…"
    return MalformedGitRef(f"invalid git ref {shown!r}: {why}; {REF_FORMS}")


def _name_problem(name: str) -> str | None:
    """Why `name` is not a ref name by git's check-ref-format rules (one-level names allowed),
    or None."""
    for c in name:
        if ord(c) < 32 or ord(c) == 127:
            return "it contains a control character"
        if c in _NOT_IN_NAME:
            return f"{c!r} is not allowed in a ref"
    if "@{" in name:
        return "'@{' (reflog syntax) is not allowed"
    if name == "@":
        return "'@' alone is not a ref name"
    if ".." in name:
        return "'..' (a range) is not allowed"
    if name.endswith("."):
        return "a ref name cannot end with '.'"
    for part in name.split("/"):
        if not part:
            return "a ref name cannot have an empty part (a leading, trailing or double '/')"
        if part.startswith("."):
            return "a part of a ref name cannot start with '.'"
        if part.endswith(".lock"):
            return "a part of a ref name cannot end with '.lock'"
    return None


def parse_ref(ref: str) -> RefSpec:
    """`ref` read by the one grammar every route, page and tool accepts, or MalformedGitRef
    saying why not and which forms are accepted:

    * ``HEAD``;
    * a branch or tag: its short name (``main``, ``release/1.0``) or its full name
      (``refs/heads/main``, ``refs/tags/v1.0``), by git's check-ref-format rules (no control
      characters, space, ``~ ^ : ? * [ \\``, ``..``, ``@{``, no part starting with ``.`` or
      ending in ``.lock``, no empty part); a short name may not start with ``-`` (git would
      read an option: ``refs/heads/-x`` names such a branch) nor with ``refs/`` unless it is
      a branch or a tag;
    * an object name: 4 to 40 hex digits, or 64 (SHA-256);
    * each optionally followed by at most `MAX_REF_SUFFIXES` ``~N`` / ``^N`` steps (``~`` is
      ``~1``, ``^`` is ``^1``), `MAX_REF_GENERATIONS` generations in all.

    Everything else git would read as a revision expression is refused: ``^{…}`` (peeling,
    ``^{/regex}`` message searches), ``@{…}`` (reflog), ``:/text``, ``rev:path``, a leading
    ``^`` (exclusion), ``..`` / ``...`` ranges, ``^@`` / ``^!`` / ``^-``, globs, and anything
    longer than `MAX_REF_CHARS` characters or that is not Unicode text."""
    if not isinstance(ref, str) or not ref:
        raise _refuse(str(ref), "it is empty")
    if len(ref) > MAX_REF_CHARS:
        raise _refuse(ref, f"it is longer than {MAX_REF_CHARS} characters")
    try:
        ref.encode("utf-8")
    except UnicodeEncodeError:
        raise _refuse(ref, "it is not valid Unicode text") from None
    cut = min((i for i in (ref.find("~"), ref.find("^")) if i >= 0), default=len(ref))
    base, suffix = ref[:cut], ref[cut:]
    if not base:
        raise _refuse(ref, f"it starts with {ref[0]!r}")
    if base.startswith("-"):
        raise _refuse(ref, f"it starts with '-' (for a branch of that name, give refs/heads/{base})")
    why = _name_problem(base)
    if why:
        raise _refuse(ref, why)
    if base.startswith("refs/"):
        if not base.startswith(_FULL_PREFIXES):
            raise _refuse(ref, "only branches (refs/heads/…) and tags (refs/tags/…) can be read")
        kind = "full"
    else:
        kind = "head" if base == "HEAD" else "hex" if _HEX.fullmatch(base) else "name"
    steps, walked = _SUFFIX.findall(suffix), 0
    if "".join(a + n for a, n in steps) != suffix:
        raise _refuse(ref, f"only ~N and ^N steps may follow the name ({suffix!r} is not such a list)")
    if len(steps) > MAX_REF_SUFFIXES:
        raise _refuse(ref, f"it has more than {MAX_REF_SUFFIXES} ~N / ^N steps")
    for op, n in steps:
        walked += (int(n) if n else 1) if op == "~" else 1
        if (n and int(n) > MAX_REF_GENERATIONS) or walked > MAX_REF_GENERATIONS:
            raise _refuse(ref, f"its ~N / ^N steps go back more than {MAX_REF_GENERATIONS:,} generations")
    return RefSpec(kind, base, suffix)


def check_ref(ref: str) -> str:
    """`ref` when `parse_ref` accepts it, else MalformedGitRef (an `InvalidGitRef`)."""
    parse_ref(ref)
    return ref


def git_dir_of(path: str) -> str:
    """The git directory of a repository: ``path/.git`` for a repository with a working tree,
    else `path` itself (a bare repository, such as a mirror)."""
    dot_git = os.path.join(path, ".git")
    return dot_git if os.path.isdir(dot_git) else path


def show(raw: bytes) -> str:
    """Bytes from git (a path, a message) as text: UTF-8, invalid bytes replaced."""
    return raw.decode("utf-8", "replace")


def encode(path: str) -> bytes:
    """A path as git's bytes (undecodable bytes kept as they came, via surrogateescape)."""
    return path.encode("utf-8", "surrogateescape")
