"""Generic git hosts and local repositories: connection type ``git`` (docs/configuration.md#connection-kinds).

``url`` is either

* ``http(s)://…``: one remote repository. Its name is ``<host[:port]>/<path without .git>``
  (`repo_name_from_url`), its clone URL the url itself. Nothing is asked of the host here: a
  repository that cannot be reached fails at clone time, like any other;
* ``file:///abs/path``, where the path may hold globs (``*``, ``?``, ``[…]``, ``**``, ``{a,b}``):
  every matching directory that is the root of a git repository, bare or not, is indexed in
  place (`HostRepo.local_path`; never fetched, never deleted). A repository's name comes from its
  ``remote.origin.url`` when that is a remote URL, else from its path (`local_repo_name`); the
  default branch is what its HEAD points at.

  Display names: with an origin, the name without its host (as Sourcebot, which names a local
  repository by its origin and skips one without). Without one, the name is the absolute path
  (every folder above the repository: long, and alike from one repository to the next), so
  the display name is the repository's folder below the connection's base path, the part of
  the URL above its first glob character (`local_display_name`: ``file:///srv/git/*`` →
  ``api``; ``file:///srv/git/**`` → ``team/api``). The name itself stays the path: it is what
  indexes, URLs, search contexts and permissions know a repository by, and a rename would
  orphan them. Installations that synced before this get the new display name at their next
  sync, which re-indexes the repositories whose listing changed (the index carries it). A
  pattern that matches nothing, and a match that is not a directory or not a git repository,
  are warnings naming the connection.

There is no token and no git user for this connection type.
"""

from __future__ import annotations

import glob
import os
import re
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codesearch.errors import HostError
from codesearch.git.process import Git
from codesearch.hosts.base import HostRepo, ListResult, register
from codesearch.index.sources import local_repo_name, repo_git_dir, repo_name_from_url
from codesearch.plurals import plural

if TYPE_CHECKING:
    from codesearch.hosts.http import HostHttp


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c{d,e}}f`` → ``[abf, acdf, acef]`` (shell-style, nested; unbalanced braces are literal)."""
    depth, start = 0, -1
    for i, c in enumerate(pattern):
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}" and depth:
            depth -= 1
            if depth == 0:
                body, parts, level, last = pattern[start + 1 : i], [], 0, 0
                for j, d in enumerate(body):
                    if d == "{":
                        level += 1
                    elif d == "}":
                        level -= 1
                    elif d == "," and level == 0:
                        parts.append(body[last:j])
                        last = j + 1
                parts.append(body[last:])
                if len(parts) == 1:  # "{x}" is literal, like the shell
                    return [pattern[: i + 1] + rest for rest in expand_braces(pattern[i + 1 :])]
                head, tail = pattern[:start], pattern[i + 1 :]
                out: list[str] = []
                for p in parts:
                    for x in expand_braces(head + p + tail):
                        if x not in out:
                            out.append(x)
                return out
    return [pattern]


def is_repo_root(path: str) -> bool:
    """True when `path` is the top of a git repository: a work tree with ``.git``, or a bare repository."""
    git_dir = repo_git_dir(path)
    if git_dir is None:
        return False
    if os.path.lexists(os.path.join(path, ".git")):
        return True
    res = Git.at(git_dir).run(["rev-parse", "--is-bare-repository"])  # not the .git folder of a work tree
    return res.returncode == 0 and res.stdout.strip() == b"true"


def _default_branch(path: str) -> str | None:
    git_dir = repo_git_dir(path)
    if git_dir is None:
        return None
    res = Git.at(git_dir).run(["symbolic-ref", "-q", "HEAD"])
    ref = res.stdout.decode("utf-8", "replace").strip() if res.returncode == 0 else ""
    return ref[len("refs/heads/") :] if ref.startswith("refs/heads/") else (ref or None)


def _display(name: str) -> str:
    return name.split("/", 1)[1] if "/" in name else name


def local_display_name(path: str, base: str) -> str:
    """The folder of a local repository at `path` below the connection's base path `base`
    (`_fixed_prefix`), or its own folder name when it is the base itself."""
    rel = os.path.relpath(path, base)
    if rel == "." or rel.startswith(".."):
        return os.path.basename(path.rstrip("/")) or path
    return rel.replace(os.sep, "/")


def _list_file(name: str, url: str, result: ListResult) -> None:
    def warn(what: str) -> None:
        result.warnings.append(f"connection {name}: {what}")

    parsed = urllib.parse.urlsplit(url)
    if parsed.netloc not in ("", "localhost"):
        raise HostError(f"connection {name}: file URL {url!r} names a host; use file:///absolute/path")
    pattern = urllib.parse.unquote(parsed.path)
    if not pattern.startswith("/"):
        raise HostError(f"connection {name}: file URL {url!r} needs an absolute path")
    matches: list[str] = []
    for p in expand_braces(pattern):
        for m in sorted(glob.glob(p, recursive=True)):
            m = os.path.abspath(m)
            if m not in matches:
                matches.append(m)
    if not matches:
        warn("no path matches the connection's file:// url")
        return
    base = _fixed_prefix(pattern)
    seen: set[str] = set()
    for path in matches:
        shown = os.path.relpath(path, base)  # warnings reach every user: no server paths in them
        if not os.path.isdir(path):
            warn(f"skipped {shown}: not a directory")
            continue
        if not is_repo_root(path):
            warn(f"skipped {shown}: not a git repository")
            continue
        repo_name = local_repo_name(path)
        if repo_name in seen:
            warn(f"skipped {shown}: another repository here is already named {repo_name!r}")
            continue
        seen.add(repo_name)
        named_by_path = repo_name == os.path.abspath(path).strip("/")
        result.repos.append(
            HostRepo(
                name=repo_name,
                display_name=local_display_name(path, base) if named_by_path else _display(repo_name),
                code_host_type="genericGitHost",
                clone_url=Path(path).as_uri(),
                default_branch=_default_branch(path),
                external_id=Path(path).as_uri(),
                local_path=path,
            )
        )
    if not result.repos:
        warn(f"none of the {plural(len(matches), 'path')} matching the connection's file:// url is a git repository")


def _fixed_prefix(pattern: str) -> str:
    """The folder of `pattern` above its first glob character: what warnings name paths under."""
    head = re.split(r"[*?\[{]", pattern, maxsplit=1)[0]
    return head if head.endswith("/") else os.path.dirname(head) or "/"


@register("git")
def list_git(name: str, conn: dict[str, Any], token: str | None, http: HostHttp | None = None) -> ListResult:
    url = (conn.get("url") or "").strip()
    result = ListResult()
    if url.lower().startswith("file:"):
        _list_file(name, url, result)
        return result
    if not re.match(r"^https?://[^/]+/.", url, re.I):
        raise HostError(f"connection {name}: url must be http(s)://host/path or file:///path, not {url!r}")
    clean = re.sub(r"^([a-zA-Z][\w+.-]*://)[^@/?#]*@", r"\1", url)  # never keep credentials of a URL
    repo_name = repo_name_from_url(clean.split("?", 1)[0].split("#", 1)[0])
    result.repos.append(
        HostRepo(
            name=repo_name,
            display_name=_display(repo_name),
            code_host_type="genericGitHost",
            clone_url=clean,
            web_url=clean,
            external_id=clean,
        )
    )
    return result
