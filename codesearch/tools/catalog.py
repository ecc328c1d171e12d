"""The tool catalog: every MCP tool's name, description and typed parameters, declared once.

The read-only tools, and the machinery that turns a tool function into a schema, a validator and
a budgeted answer (`ToolSpec`, `args_model`), are in `codesearch.tools.read_tools`: the
`ask_codebase` agent (`codesearch.tools.ask`) uses them too. This module adds the two tools that are
not for the agent, `list_language_models`, `ask_codebase` itself and the skill tools
(`codesearch.tools.skills`), and is the list the MCP server
(`codesearch.service.routes.mcp`) registers.

Names, parameters, defaults and limits are those of Sourcebot's MCP server, including the tools
it added later (`list_branches`, grep's `groupByRepo`, `path`
on `list_commits` and `get_diff`), Sourcebot's own; descriptions are written for an agent
choosing a tool. docs/mcp-tools.md#tools describes them for people (a test checks that it names
every tool and parameter).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from codesearch.app.context import ToolContext
from codesearch.tools import repos
from codesearch.tools import skills as skill_tools
from codesearch.tools.ask import ask_codebase as run_ask
from codesearch.tools.read_tools import (  # noqa: F401  (the catalog's names for them)
    READ_TOOLS,
    CatalogToolSet,
    ToolSpec,
    args_model,
    describe_validation_error,
    parameters,
)


def list_language_models(tc: ToolContext) -> str:
    """List the language models configured on this instance (JSON), for use with ask_codebase."""
    return repos.list_language_models(tc)


class LanguageModelChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: str = Field(description="The model's provider, as list_language_models shows it")
    model: str = Field(description="The model's name, as list_language_models shows it")


def ask_codebase(
    tc: ToolContext,
    query: Annotated[str, Field(description="The question, in natural language", min_length=1, max_length=10000)],
    repos: Annotated[
        list[str] | None, Field(description="Repositories the agent may look at (full names); default: all")
    ] = None,
    languageModel: Annotated[
        LanguageModelChoice | None,
        Field(  # noqa: N803
            description="The model to use; default: the first configured model"
        ),
    ] = None,
    visibility: Annotated[
        Literal["PRIVATE", "PUBLIC"] | None,
        Field(
            description="PUBLIC makes the research session viewable by anyone with the link; default: "
            "PRIVATE for signed-in users, PUBLIC for anonymous ones"
        ),
    ] = None,
) -> str:
    """Answer a question about the code with an AI agent that searches code, reads files and
    follows symbols. Returns a detailed markdown answer with code references and a link to the full
    research session in the web UI. Slower than the other tools: use them for simple lookups."""
    return run_ask(tc, query, repos, languageModel.model_dump() if languageModel else None, visibility)


TOOLS: tuple[ToolSpec, ...] = (
    *READ_TOOLS,
    ToolSpec(
        "list_language_models", list_language_models, "List language models", "", json_items=None, json_noun="models"
    ),
    # it stores the research session: not read-only
    ToolSpec(
        "ask_codebase",
        ask_codebase,
        "Ask the codebase",
        "The whole answer is in the research session.",
        read_only=False,
        open_world=True,
    ),
    # Sourcebot 5.1.8's skill tools, with its hints: creating is neither idempotent nor destructive,
    # updating overwrites (destructive) and is idempotent
    ToolSpec("create_skill", skill_tools.create_skill, "Create skill", "", read_only=False),
    ToolSpec(
        "update_skill",
        skill_tools.update_skill,
        "Update skill",
        "",
        read_only=False,
        destructive=True,
        idempotent=True,
    ),
    ToolSpec(
        "list_skills",
        skill_tools.list_skills,
        "List skills",
        "narrow with scope.",
        json_items="skills",
        json_noun="skills",
    ),
)
BY_NAME = {t.name: t for t in TOOLS}
