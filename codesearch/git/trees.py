"""Directory listings at a ref: `list_tree` (a bounded walk, for the file browser and the
``list_tree`` tool) and `list_files` (every file below a directory, for ``glob``).

`list_tree` reads tree objects on demand through one `objects.ObjectBatch`, so listing the
top of a huge repository reads only the trees it shows; its cap stops the walk, not a filter
applied after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from codesearch.errors import CodesearchError, FileNotFound, InvalidArgument
from codesearch.git.objects import ObjectBatch, object_info, resolve_commit
from codesearch.git.paths import check_dir, show
from codesearch.git.process import Git

__all__ = ["TreeEntry", "check_tree", "list_files", "list_tree", "not_a_dir"]

_TREE_MODE = b"40000"
_SUBMODULE_MODE = b"160000"


@dataclass(frozen=True)
class TreeEntry:
    path: str  # relative to the repository root, no trailing slash
    name: str  # the last segment of path
    is_dir: bool
    depth: int  # 1 = directly below the listed directory


def _tree_entries(data: bytes, hash_len: int) -> list[tuple[bytes, bytes, str]]:
    """(mode, name, object id hex) of each entry of a raw tree object."""
    out, i, n = [], 0, len(data)
    while i < n:
        sp = data.index(b" ", i)
        nul = data.index(b"\0", sp)
        out.append((data[i:sp], data[sp + 1 : nul], data[nul + 1 : nul + 1 + hash_len].hex()))
        i = nul + 1 + hash_len
    return out


def not_a_dir(path: str, ref: str, kind: str | None) -> FileNotFound:
    """The error for a directory `path` that is a `kind` object (or nothing) at `ref`."""
    if kind == "blob":
        return FileNotFound(f"{path!r} is a file, not a directory, at {ref!r}: use read_file to read it")
    return FileNotFound(f"directory {path!r} not found at {ref!r}")


def _kind(git_dir: str, name: str) -> str | None:
    info = object_info(git_dir, name)
    return info[0] if info else None


def check_tree(git_dir: str, commit: str, ref: str, under: str) -> None:
    """FileNotFound unless `under` ('' = the root) is a directory at `commit` (named `ref`)."""
    kind = _kind(git_dir, f"{commit}:{under}") if under else "tree"
    if kind != "tree":
        raise not_a_dir(under, ref, kind)


def list_tree(
    git_dir: str,
    ref: str,
    path: str = "",
    *,
    depth: int = 1,
    include_files: bool = True,
    include_dirs: bool = True,
    max_entries: int = 1000,
) -> tuple[list[TreeEntry], bool]:
    """The entries below directory `path` ('' = the root) at `ref`, at most `depth` levels deep.

    Order: a pre-order walk where, in each directory, subdirectories come first and then files,
    each group sorted by name (byte order); a directory's entries follow it. `include_files` /
    `include_dirs` choose what is returned (directories are walked either way). Submodules are
    listed as directories without children (their commits are not in this repository);
    symlinks as files. Returns (entries, truncated): truncated when more than `max_entries`
    entries would be listed; the walk stops there.
    FileNotFound when `path` does not exist at `ref`, or is a file.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InvalidArgument(f"depth must be a whole number of at least 1 (got {depth!r})")
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
        raise InvalidArgument(f"max_entries must be a whole number of at least 1 (got {max_entries!r})")
    under = check_dir(path)
    commit = resolve_commit(git_dir, ref)
    out: list[TreeEntry] = []
    if not include_files and not include_dirs:  # nothing to list: only check the path
        check_tree(git_dir, commit, ref, under)
        return out, False
    with ObjectBatch(git_dir) as batch:
        root = batch.get(f"{commit}:{under}" if under else f"{commit}^{{tree}}")
        if root is None or root[0] != "tree":
            raise not_a_dir(under, ref, root[0] if root else None)
        hash_len = root[2]
        prefix = under + "/" if under else ""
        # a stack of (level, directory path prefix, pending entries of that directory)
        stack = [(1, prefix, _ordered(_tree_entries(root[1], hash_len)))]
        while stack:
            level, base, pending = stack[-1]
            if not pending:
                stack.pop()
                continue
            mode, name, oid = pending.pop()
            shown = show(name)
            is_dir = mode in (_TREE_MODE, _SUBMODULE_MODE)
            if include_dirs if is_dir else include_files:
                if len(out) >= max_entries:
                    return out, True
                out.append(TreeEntry(base + shown, shown, is_dir, level))
            if mode == _TREE_MODE and level < depth:
                sub = batch.get(oid)
                if sub is None or sub[0] != "tree":
                    raise CodesearchError(f"tree {base + shown!r} is missing from the repository")
                stack.append((level + 1, base + shown + "/", _ordered(_tree_entries(sub[1], hash_len))))
    return out, False


def _ordered(entries: list[tuple[bytes, bytes, str]]) -> list[tuple[bytes, bytes, str]]:
    """Directories (and submodules) by name, then the rest by name; reversed, to pop from the end."""
    dirs = sorted((e for e in entries if e[0] in (_TREE_MODE, _SUBMODULE_MODE)), key=lambda e: e[1])
    files = sorted((e for e in entries if e[0] not in (_TREE_MODE, _SUBMODULE_MODE)), key=lambda e: e[1])
    return (dirs + files)[::-1]


def list_files(git_dir: str, ref: str, path: str = "") -> list[str]:
    """Every file (blob: regular files and symlinks, not submodules) below directory `path`
    ('' = the root) at `ref`, as paths from the repository root, sorted.

    FileNotFound when `path` does not exist at `ref`, or is a file.
    """
    under = check_dir(path)
    commit = resolve_commit(git_dir, ref)
    tree = f"{commit}:{under}" if under else f"{commit}^{{tree}}"
    git = Git.at(git_dir)
    args = ["ls-tree", "-r", "-z", "--end-of-options", tree]
    res = git.run(args)
    if res.returncode != 0:
        kind = _kind(git_dir, tree)
        if kind in (None, "blob"):
            raise not_a_dir(under, ref, kind)
        raise git.failed(args, res.returncode, res.stderr)
    prefix = under + "/" if under else ""
    out = []
    for rec in res.stdout.split(b"\0"):
        meta, tab, name = rec.partition(b"\t")
        if tab and meta.split(b" ")[1:2] == [b"blob"]:
            out.append(prefix + show(name))
    out.sort()
    return out
