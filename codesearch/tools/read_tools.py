"""The read-only tools: what an MCP client and the `ask_codebase` agent may both call.

Each tool is a function ``fn(tc: ToolContext, <parameters>) -> str`` whose parameters carry
their JSON-schema facts (description, bounds, defaults) as ``Annotated[..., Field(...)]``. From
that one declaration:

- the MCP server (`codesearch.service.routes.mcp`, through `codesearch.tools.catalog`) registers the tool
  with the SDK, which derives the input schema and validates arguments;
- `args_model(spec)` gives the same schema and validation to the `ask_codebase` agent
  (`CatalogToolSet`), so the model sees exactly what MCP clients see;
- `ToolSpec.call` runs it and holds its answer to the size budget (`codesearch.tools.budget`),
  with the spec's hint on how to narrow, so MCP clients and the agent get the same answer.

The tools that are not for the agent (`list_language_models`, and `ask_codebase` itself, which
runs the agent) are declared in `codesearch.tools.catalog`, above `codesearch.tools.ask`: the agent
depends on this module, the full catalog on the agent.
"""

from __future__ import annotations

import inspect
import json
import logging
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from codesearch.app.context import ToolContext
from codesearch.errors import CodesearchError
from codesearch.tools import budget, git_tools, repos, search_tools

log = logging.getLogger(__name__)

Repo = Annotated[
    str,
    Field(
        description="Full repository name including the host, e.g. github.com/org/repo (list_repos shows them)",
        min_length=1,
        max_length=1000,
    ),
]
OptRepo = Annotated[
    str | None,
    Field(
        description="Full repository name including the host, e.g. github.com/org/repo; default: all repositories",
        max_length=1000,
    ),
]
Ref = Annotated[
    str | None, Field(description="Commit SHA, branch or tag; default: the default branch", max_length=1024)
]


def grep(
    tc: ToolContext,
    pattern: Annotated[
        str,
        Field(
            description="Regular expression (RE2 syntax) searched in file contents, "
            "always case-sensitive; use (?i) for case-insensitive",
            min_length=1,
            max_length=2000,
        ),
    ],
    path: Annotated[
        str | None,
        Field(
            description="Directory to search in, relative to the repository root; default: the root", max_length=4096
        ),
    ] = None,
    include: Annotated[
        str | None,
        Field(
            description="Glob over file paths, e.g. *.py or src/**/*.{ts,tsx}; "
            "a glob without / matches file names at any depth",
            max_length=1000,
        ),
    ] = None,
    repo: OptRepo = None,
    ref: Ref = None,
    limit: Annotated[
        int | None,
        Field(description="Maximum number of matching files (default: 100; 10000 with groupByRepo)", ge=1, le=10000),
    ] = None,
    groupByRepo: Annotated[
        bool,
        Field(  # noqa: N803
            description="Instead of the matching lines, count the matches and matching files per repository: "
            "use it to learn which repositories use something"
        ),
    ] = False,
) -> str:
    """Search file contents with a regular expression across the indexed repositories. Results are
    grouped by file with line numbers. Use it to find where code, strings or identifiers appear."""
    return search_tools.grep(tc, pattern, path, include, repo, ref, limit, groupByRepo)


def list_repos(
    tc: ToolContext,
    query: Annotated[
        str | None, Field(description="Case-insensitive filter on the repository name", max_length=1000)
    ] = None,
    page: Annotated[int, Field(description="Page number", ge=1, le=repos.MAX_PAGE)] = 1,
    perPage: Annotated[int, Field(description="Repositories per page", ge=1, le=100)] = 30,  # noqa: N803
    sort: Annotated[Literal["name", "pushed"], Field(description="name, or pushed (most recent commit)")] = "name",
    direction: Annotated[Literal["asc", "desc"], Field(description="asc or desc")] = "asc",
) -> str:
    """List the indexed repositories (JSON: repos and totalCount). Use it to learn the full
    repository names that other tools take as `repo`."""
    return repos.list_repos(tc, query, page, perPage, sort, direction)


def read_file(
    tc: ToolContext,
    repo: Repo,
    path: Annotated[str, Field(description="File path relative to the repository root", min_length=1, max_length=4096)],
    ref: Ref = None,
    offset: Annotated[int | None, Field(description="First line to show, from 1; default: the beginning", ge=1)] = None,
    limit: Annotated[int | None, Field(description="Maximum number of lines, at most 500", ge=1, le=500)] = None,
) -> str:
    """Read a file's source with line numbers, at any branch, tag or commit. Long files come in
    pages: the footer gives the offset to continue with."""
    return git_tools.read_file(tc, repo, path, ref, offset, limit)


def list_tree(
    tc: ToolContext,
    repo: Repo,
    path: Annotated[
        str | None, Field(description="Directory relative to the repository root; default: the root", max_length=4096)
    ] = None,
    ref: Ref = None,
    depth: Annotated[int, Field(description="Levels below path to list", ge=1, le=10)] = 1,
    includeFiles: Annotated[bool, Field(description="List files")] = True,  # noqa: N803
    includeDirectories: Annotated[bool, Field(description="List directories")] = True,  # noqa: N803
    maxEntries: Annotated[
        int,
        Field(
            description="Maximum entries; the output is truncated beyond it",  # noqa: N803
            ge=1,
            le=10000,
        ),
    ] = 1000,
) -> str:
    """List the files and directories below a path of a repository as an indented tree
    (directories first at each level). Use it to explore a repository's layout."""
    return git_tools.list_tree(tc, repo, path, ref, depth, includeFiles, includeDirectories, maxEntries)


def list_commits(
    tc: ToolContext,
    repo: Repo,
    query: Annotated[
        str | None, Field(description="Case-insensitive text the commit message contains", max_length=1000)
    ] = None,
    since: Annotated[
        str | None,
        Field(
            description="Only commits after this date: ISO 8601 (2024-01-31) or relative (30 days ago)", max_length=100
        ),
    ] = None,
    until: Annotated[
        str | None, Field(description="Only commits before this date: ISO 8601 or relative (yesterday)", max_length=100)
    ] = None,
    author: Annotated[
        str | None, Field(description="Case-insensitive text of the author's name or e-mail", max_length=500)
    ] = None,
    ref: Ref = None,
    path: Annotated[
        str | None,
        Field(
            description="Only commits that changed this file or something "
            "below this directory (relative to the repository "
            "root)",
            max_length=4096,
        ),
    ] = None,
    page: Annotated[int, Field(description="Page number", ge=1, le=repos.MAX_PAGE)] = 1,
    perPage: Annotated[int, Field(description="Commits per page", ge=1, le=100)] = 50,
) -> str:  # noqa: N803
    """List a repository's commits, newest first (JSON: commits with hash, date, message, refs,
    body, author; and totalCount), filtered by message, dates, author and path."""
    return git_tools.list_commits(tc, repo, query, since, until, author, ref, page, perPage, path)


def list_branches(
    tc: ToolContext,
    repo: Repo,
    query: Annotated[
        str | None, Field(description="Case-insensitive text the branch name contains", max_length=1000)
    ] = None,
    page: Annotated[int, Field(description="Page number", ge=1, le=repos.MAX_PAGE)] = 1,
    perPage: Annotated[int, Field(description="Branches per page", ge=1, le=100)] = 50,
) -> str:  # noqa: N803
    """List a repository's branches, newest commit first (JSON: repo, totalCount, and branches with
    name, commit, committedAt, isDefault and isIndexed). Branches with isIndexed false exist but
    grep and glob only search them through git; use list_repos first when the name is unknown."""
    return git_tools.list_branches(tc, repo, query, page, perPage)


def glob(
    tc: ToolContext,
    pattern: Annotated[
        str,
        Field(
            description="Glob over file paths: * within a name, ** across directories, "
            "{a,b} alternatives, e.g. **/*.test.ts",
            min_length=1,
            max_length=1000,
        ),
    ],
    path: Annotated[str | None, Field(description="Only files below this directory", max_length=4096)] = None,
    repo: OptRepo = None,
    ref: Annotated[
        str | None,
        Field(description="Commit SHA, branch or tag (needs repo); default: the default branch", max_length=1024),
    ] = None,
    limit: Annotated[int, Field(description="Maximum number of files", ge=1, le=10000)] = 100,
) -> str:
    """Find files whose paths match a glob pattern, grouped by repository. Use it to locate files
    by name or extension."""
    return search_tools.glob(tc, pattern, path, repo, ref, limit)


def get_diff(
    tc: ToolContext,
    repo: Repo,
    base: Annotated[
        str, Field(description="Ref to diff from: branch, tag or commit SHA", min_length=1, max_length=1024)
    ],
    head: Annotated[str, Field(description="Ref to diff to: branch, tag or commit SHA", min_length=1, max_length=1024)],
    path: Annotated[
        str | None,
        Field(
            description="Only the changes to this file or below this directory (relative to the repository root)",
            max_length=4096,
        ),
    ] = None,
) -> str:
    """Show the changes between two refs of a repository (two-dot diff) as a unified diff."""
    return git_tools.get_diff(tc, repo, base, head, path)


Symbol = Annotated[
    str, Field(description="The symbol's name, e.g. a function, class or variable name", min_length=1, max_length=500)
]


def find_symbol_definitions(tc: ToolContext, symbol: Symbol, repo: Repo) -> str:
    """Find where a symbol (function, class, method, type, variable) is defined in a repository."""
    return search_tools.find_symbol_definitions(tc, symbol, repo)


def find_symbol_references(tc: ToolContext, symbol: Symbol, repo: Repo) -> str:
    """Find the usages of a symbol in a repository (whole-word, case-sensitive matches)."""
    return search_tools.find_symbol_references(tc, symbol, repo)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    fn: Callable[..., str]
    title: str
    #: how to ask for less when the answer is over the size budget (the end of the cut note)
    narrow: str
    read_only: bool = True
    #: answers depend on something outside this service (a language model)
    open_world: bool = False
    #: MCP hints for a tool that changes things: it may overwrite what is there; calling it
    #: again with the same arguments does nothing more (None: as `read_only`)
    destructive: bool = False
    idempotent: bool | None = None
    #: a JSON answer: its list of items (None: the answer is the list), and what they are
    json_items: str | None = None
    json_noun: str = ""

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.fn.__doc__ or "")

    def call(self, tc: ToolContext, **arguments: Any) -> str:
        """Run the tool and hold its answer to the size budget."""
        out = self.fn(tc, **arguments)
        if self.json_noun:
            return budget.fit_json(json.loads(out), self.json_items, self.json_noun, self.narrow)
        return budget.fit_text(out, self.narrow)


_NARROW_SEARCH = "Narrow it with path, include or repo or a more specific pattern, or lower limit."
READ_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "grep",
        grep,
        "Search code with a regex",
        _NARROW_SEARCH + " groupByRepo=true counts matches per repository instead.",
    ),
    ToolSpec(
        "list_repos",
        list_repos,
        "List repositories",
        "narrow the names with query.",
        json_items="repos",
        json_noun="repositories",
    ),
    ToolSpec("read_file", read_file, "Read a file", "Read fewer lines with limit and continue with offset."),
    ToolSpec(
        "list_tree",
        list_tree,
        "List a directory tree",
        "List a subdirectory with path, lower depth, or leave out files with includeFiles=false.",
    ),
    ToolSpec(
        "list_commits",
        list_commits,
        "List commits",
        "narrow with query, path, author, since or until.",
        json_items="commits",
        json_noun="commits",
    ),
    ToolSpec(
        "list_branches",
        list_branches,
        "List branches",
        "narrow the names with query.",
        json_items="branches",
        json_noun="branches",
    ),
    ToolSpec(
        "glob",
        glob,
        "Find files by path pattern",
        "Narrow it with a more specific pattern, path or repo, or lower limit.",
    ),
    ToolSpec(
        "get_diff", get_diff, "Diff two refs", "Diff one file or directory at a time with path, or compare closer refs."
    ),
    ToolSpec(
        "find_symbol_definitions",
        find_symbol_definitions,
        "Find symbol definitions",
        "Use grep with path or include to look at fewer files.",
    ),
    ToolSpec(
        "find_symbol_references",
        find_symbol_references,
        "Find symbol references",
        "Use grep with path or include to look at fewer files.",
    ),
)
READ_BY_NAME = {t.name: t for t in READ_TOOLS}


def parameters(spec: ToolSpec) -> list[inspect.Parameter]:
    """The tool's parameters (after `tc`), with their annotations resolved."""
    hints = typing.get_type_hints(spec.fn, include_extras=True)
    params = list(inspect.signature(spec.fn).parameters.values())[1:]
    return [p.replace(annotation=hints[p.name]) for p in params]


_MODELS: dict[str, type[BaseModel]] = {}


def args_model(spec: ToolSpec) -> type[BaseModel]:
    """A pydantic model of the tool's arguments (unknown arguments are refused)."""
    if spec.name not in _MODELS:
        # (annotation, default) per field, as `create_model` takes them (Any: its overloads type its
        # own keyword arguments, which a dict of field definitions cannot match)
        fields: dict[str, Any] = {
            p.name: (p.annotation, ... if p.default is inspect.Parameter.empty else p.default) for p in parameters(spec)
        }
        _MODELS[spec.name] = create_model(f"{spec.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    return _MODELS[spec.name]


def describe_validation_error(name: str, e: ValidationError) -> str:
    """`e` as one line per problem that an agent can act on."""
    problems = []
    for err in e.errors():
        where = ".".join(str(x) for x in err.get("loc", ())) or "arguments"
        problems.append(f"{where}: {err.get('msg', 'invalid')}")
    return f"invalid arguments for {name}: " + "; ".join(problems)


class CatalogToolSet:
    """The read-only tools as the `ask_codebase` agent uses them (`codesearch.llm.agent.ToolSet`)."""

    def __init__(self, tc: ToolContext, names: tuple[str, ...] | None = None):
        self.tc = tc
        self.names = names or tuple(READ_BY_NAME)

    def specs(self) -> list[dict[str, Any]]:
        return [
            {
                "name": n,
                "description": READ_BY_NAME[n].description,
                "input_schema": args_model(READ_BY_NAME[n]).model_json_schema(),
            }
            for n in self.names
        ]

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        if name not in self.names:
            return f"unknown tool {name!r}: use one of {', '.join(self.names)}", True
        spec = READ_BY_NAME[name]
        try:
            args = args_model(spec).model_validate(arguments or {})
        except ValidationError as e:
            return describe_validation_error(name, e), True
        try:
            return spec.call(self.tc, **{k: getattr(args, k) for k in args_model(spec).model_fields}), False
        except CodesearchError as e:
            return str(e), True
        except Exception:  # a bug, not the caller's fault: keep the details in the log
            log.exception("tool %s failed", name)
            return f"{name} failed unexpectedly; try other arguments or another tool", True
