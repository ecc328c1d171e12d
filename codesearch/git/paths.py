"""What a caller may name in a repository: refs, paths and scopes, checked before git sees them.

Refs, paths, patterns and dates come from untrusted callers (the HTTP API, MCP tools, web
pages), and git reads many strings as options or revision expressions. So:

* refs pass `check_ref` (no leading ``-``, no ``:``, NUL or whitespace, at most 1024
  characters) and are turned into a full commit sha by `objects.resolve_commit` before any
  other command sees them; later commands get the sha, never the caller's text;
* paths pass `check_path` / `check_dir` / `check_scope` (relative, no ``..``/``.``/empty
  segments, no NUL or newline) and reach git only as ``<sha>:<path>`` object names or as
  ``:(literal)`` / ``:(glob)`` pathspecs after ``--``.

A malformed value is the caller's fault: `InvalidGitRef` / `FileNotFound` naming the value.
Paths are bytes in git; they are shown decoded as UTF-8 with invalid bytes replaced (U+FFFD).
"""

from __future__ import annotations

import os

from codesearch.errors import FileNotFound, InvalidGitRef

__all__ = ["check_dir", "check_path", "check_ref", "check_scope", "encode", "git_dir_of", "scope_spec", "show"]


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


def check_ref(ref: str) -> str:
    """`ref` when git could only read it as a revision (not an option, not ``rev:path``), else
    InvalidGitRef."""
    if not ref or ref.startswith("-") or len(ref) > 1024 or any(c in ref for c in ("\0", ":", "\n", "\r", " ", "\t")):
        raise InvalidGitRef(f"invalid git ref {ref!r}")
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
