"""Files mentioned in an Ask question (``@path`` in the web UI), put into the question's context.

Sourcebot's Ask sends each mentioned file as a message part ``{type: "data-source", data: {type:
"file", repo, path, name, revision}}`` and gives the model the files' text with the question; so
do we. `mentioned_files` reads the parts of the question, `read_mentions` reads each file as the
caller may (a repository they may not read is refused exactly as an unknown one, `git_reads`),
and `context_text` is what the model gets, bounded: at most `MAX_FILES` files of at most
`MAX_FILE_CHARS` characters each (a longer one is cut, and says so, so the model reads the rest
with its tools).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codesearch.errors import ToolInputError

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext

MAX_FILES = 5
MAX_FILE_CHARS = 20000


@dataclass(frozen=True)
class Mention:
    repo: str
    path: str
    ref: str | None = None


@dataclass(frozen=True)
class MentionedFile:
    repo: str  # the repository's name
    path: str
    ref: str
    text: str  # at most MAX_FILE_CHARS characters
    size: int  # characters of the whole file


def mentioned_files(parts: Iterable[Mapping[str, Any]]) -> list[Mention]:
    """The files of a message's ``data-source`` parts, each once, in order; `ToolInputError`
    (naming the part) for one that is not a file with a repo and a path, or more than `MAX_FILES`."""
    out: list[Mention] = []
    for n, part in enumerate(parts):
        if part.get("type") != "data-source":
            continue
        data = part.get("data")
        where = f"messages[-1].parts[{n}].data"
        if not isinstance(data, Mapping) or data.get("type") != "file":
            raise ToolInputError(f"{where}: a data-source part must be {{type: 'file', repo, path}}")
        repo, path, ref = data.get("repo"), data.get("path"), data.get("revision") or None
        if not isinstance(repo, str) or not repo or not isinstance(path, str) or not path:
            raise ToolInputError(f"{where}: repo and path must be non-empty strings")
        if ref is not None and not isinstance(ref, str):
            raise ToolInputError(f"{where}.revision: must be a string")
        mention = Mention(repo, path.strip("/"), ref)
        if mention not in out:
            out.append(mention)
    if len(out) > MAX_FILES:
        raise ToolInputError(f"a question mentions at most {MAX_FILES} files, not {len(out)}")
    return out


def read_mentions(tc: ToolContext, mentions: list[Mention]) -> list[MentionedFile]:
    """Each mentioned file's text as `tc`'s caller may read it (`RepositoryNotFound`,
    `FileNotFound` or `InvalidGitRef` for one they may not, or that is not there)."""
    from codesearch.app.git_reads import read_file

    files = []
    for m in mentions:
        got = read_file(tc, m.repo, m.path, m.ref)
        text = got.data.decode("utf-8", errors="replace")
        files.append(MentionedFile(got.repo.name, got.path, got.ref, text[:MAX_FILE_CHARS], len(text)))
    return files


def context_text(files: list[MentionedFile]) -> str:
    """What the model gets with the question: each file's text, fenced, with its name."""
    if not files:
        return ""
    blocks = ["The user attached these files to the question (cite them as repo/path:line like any other):"]
    for f in files:
        cut = (
            f"\n[cut at {MAX_FILE_CHARS} of {f.size} characters: read the rest with the tools]"
            if f.size > len(f.text)
            else ""
        )
        fence = "````" if "```" in f.text else "```"
        blocks.append(f'<file repo="{f.repo}" path="{f.path}" ref="{f.ref}">\n{fence}\n{f.text}\n{fence}{cut}\n</file>')
    return "\n\n".join(blocks)
