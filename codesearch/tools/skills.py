"""The skill tools of the MCP server: `create_skill`, `update_skill` and `list_skills`, with
Sourcebot 5.1.8's names, arguments and JSON answers (docs/mcp-tools.md#create_skill).

They need a signed-in caller (an API key or OAuth token; a repository-scoped access token may
not manage skills). `create_skill` makes a personal skill; `update_skill` edits a personal skill
of the caller's or a shared one the caller created (owners manage other people's shared skills
on the settings page, as in Sourcebot); `list_skills` never shows instructions. Bad fields fail
with every problem named (`codesearch.store.skills.check_skill`); each call is audited by the MCP
server (``mcp.tool``, with its arguments).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field

from codesearch.app import skills as app_skills
from codesearch.app.context import ToolContext
from codesearch.errors import InsufficientPermissions
from codesearch.store.models import SKILL_PERSONAL, SKILL_SHARED
from codesearch.store.skills import normalize_slug
from codesearch.tools.repos import iso

Scope = Literal["personal", "shared"]


def create_skill(
    tc: ToolContext,
    name: Annotated[str, Field(description="Display name for the skill, 1-80 characters.")],
    slug: Annotated[
        str,
        Field(
            description="Slash command for the skill, without the leading '/'. Lowercase letters, numbers, and "
            "hyphens; at most 64 characters (e.g. 'review-pr')."
        ),
    ],
    description: Annotated[
        str, Field(description="When to use the skill, 1-500 characters. Shown in the slash-command list.")
    ],
    instructions: Annotated[
        str,
        Field(description="Markdown instructions the agent follows when the skill is invoked, 1-20,000 characters."),
    ],
) -> str:
    """Create a new skill: a reusable, named instruction set the user can invoke later in Ask as
    /<slug>. ONLY call this when the user explicitly asks to create or save a skill. The skill is
    personal to the requesting user. The slug must be unique among the user's skills (list_skills
    shows which are taken). The result includes a url to the skill in Settings -> Skills, where the
    user can edit, share or delete it; update_skill changes it later."""
    user_id = app_skills.manager(tc.identity, "create")
    skill = tc.store.create_skill(
        user_id,
        SKILL_PERSONAL,
        {"name": name, "slug": slug, "description": description, "instructions": instructions},
    )
    return json.dumps(
        {
            "id": str(skill.id),
            "slug": skill.slug,
            "name": skill.name,
            "description": skill.description,
            "enabled": True,
            "createdAt": iso(skill.created_at),
            "url": app_skills.skill_url(tc.public_url, skill.id),
        }
    )


def update_skill(
    tc: ToolContext,
    slug: Annotated[str, Field(description="Current slash command of the skill to update, without the leading '/'.")],
    scope: Annotated[
        Scope,
        Field(description="Which catalog the skill lives in: 'personal' (your skills) or 'shared' (everyone's)."),
    ],
    name: Annotated[str | None, Field(description="New display name, 1-80 characters; omit to keep it.")] = None,
    newSlug: Annotated[  # noqa: N803
        str | None,
        Field(description="New slash command, without the leading '/'; omit to keep the current command."),
    ] = None,
    description: Annotated[
        str | None, Field(description="New description of when to use the skill, 1-500 characters; omit to keep it.")
    ] = None,
    instructions: Annotated[
        str | None, Field(description="New markdown instructions, 1-20,000 characters; omit to keep them.")
    ] = None,
) -> str:
    """Update an existing skill in place. ONLY call this when the user explicitly asks to change a
    skill. Identify it by its current slug and scope (list_skills shows both); omitted fields keep
    their values, newSlug renames the slash command. Personal skills are editable by their owner;
    shared skills only by the user who created them. Editing a shared skill changes it for
    everyone at once. This tool never moves a skill between the personal and shared catalogs."""
    user_id = app_skills.manager(tc.identity, "update")
    skill = tc.store.find_skill(user_id, scope, normalize_slug(slug))
    if scope == SKILL_SHARED and skill.user_id != user_id:
        raise InsufficientPermissions("You do not have sufficient permissions to manage this skill.")
    fields = {"name": name, "slug": newSlug, "description": description, "instructions": instructions}
    skill = tc.store.update_skill(skill.id, user_id, False, fields)
    return json.dumps(
        {
            "id": str(skill.id),
            "slug": skill.slug,
            "name": skill.name,
            "description": skill.description,
            "scope": scope,
            "enabled": True,
            "updatedAt": iso(skill.updated_at),
            "url": app_skills.skill_url(tc.public_url, skill.id),
        }
    )


def list_skills(
    tc: ToolContext,
    scope: Annotated[
        Scope | None,
        Field(description="Filter to one catalog: 'personal' or 'shared'. Omit to list both."),
    ] = None,
) -> str:
    """List the skills the user may use: their personal skills plus the shared catalog. Each row
    has slug and scope (what update_skill needs), enabled, isSynced, canEdit (whether update_skill
    may edit it) and, on shared rows, adopted. Instructions are never included. Use it before
    create_skill to avoid slug conflicts and before update_skill to find the skill."""
    user_id = app_skills.manager(tc.identity, "list")
    return json.dumps({"skills": [app_skills.list_item(s, user_id) for s in tc.store.list_skills(user_id, scope)]})
