"""Ask skills as the callers see them: the tools' JSON items, a skill's settings link, and a
question's ``/slug`` expanded into the skill's instructions (`expand_command`).

The store keeps the skills and decides who sees and manages which (`codesearch.store.skills`);
this module is what the MCP tools, the Ask routes and the settings page share on top of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from codesearch.errors import InsufficientPermissions, NotAuthenticated
from codesearch.permissions import Identity
from codesearch.store.models import SKILL_PERSONAL, SKILL_SHARED, Skill
from codesearch.store.skills import can_manage

#: ``/slug`` at the very start of a question, then the rest of it
_COMMAND = re.compile(r"^/([a-z0-9]+(?:-[a-z0-9]+)*)(?=\s|$)\s*(.*)\Z", re.S)


def skill_url(public_url: str, skill_id: int) -> str:
    """The skill on the settings page (Sourcebot's ``/settings/skills?skill=<id>`` link)."""
    return f"{public_url.rstrip('/')}/settings/skills?skill={skill_id}"


def manager(identity: Identity, what: str) -> int:
    """The user id of a caller who may manage skills; NotAuthenticated for an anonymous one,
    InsufficientPermissions for a repository-scoped access token (it only reads repositories,
    as in Sourcebot)."""
    user_id = identity.user_id
    if user_id is None:
        raise NotAuthenticated(f"Authentication is required to {what} skills.")
    if identity.repo_scope is not None:
        raise InsufficientPermissions("Repository-scoped access tokens cannot manage skills.")
    return int(user_id)


def list_item(skill: Skill, user_id: int) -> dict[str, Any]:
    """A `list_skills` row (Sourcebot's shape; never the instructions). Every shared skill is
    active for every member here (no per-member adoption), and none is synced from a file."""
    item: dict[str, Any] = {
        "id": str(skill.id),
        "slug": skill.slug,
        "name": skill.name,
        "description": skill.description,
        "scope": skill.scope,
        "enabled": True,
    }
    if skill.scope == SKILL_SHARED:
        item["adopted"] = True
    # the tools edit a shared skill only as its creator (Sourcebot's update_skill policy)
    item.update(isSynced=False, canEdit=can_manage(skill, user_id, False))
    return item


@dataclass
class Expansion:
    """A question with its command applied: `prompt` is what the model reads."""

    prompt: str
    skill: Skill | None = None


def expand_command(store: Any, identity: Identity, question: str) -> Expansion:
    """`question` with a leading ``/slug`` replaced by the skill's instructions (the caller's
    personal skill of that slug, else the shared one); the rest of the question follows them.
    A question without a command, or naming no skill the caller has, is left as it is (it may
    be a path such as ``/etc/hosts``)."""
    found = _COMMAND.match(question.strip()) if store is not None else None
    if found is None:
        return Expansion(question)
    skill = store.resolve_skill(identity.user_id, found.group(1))
    if skill is None:
        return Expansion(question)
    rest = found.group(2).strip()
    head = f"Use the skill /{skill.slug} ({skill.name}). Its instructions:\n\n{skill.instructions.strip()}"
    return Expansion(f"{head}\n\n---\n\n{rest}" if rest else head, skill)


def command_item(skill: Skill) -> dict[str, str]:
    """A skill as the Ask box's slash-command list shows it."""
    return {
        "slug": skill.slug,
        "name": skill.name,
        "description": skill.description,
        "scope": SKILL_PERSONAL if skill.scope == SKILL_PERSONAL else SKILL_SHARED,
    }
