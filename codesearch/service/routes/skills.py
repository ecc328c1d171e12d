"""``GET /api/skills``: the skills the caller may run in Ask, for the Ask box's slash-command list.

The answer is ``{"skills": [{slug, name, description, scope}]}``: the caller's personal skills
(``scope: "personal"``), then the shared ones, each by slug; never a skill's instructions (a
question that names the skill runs them on the server: `codesearch.app.skills.expand_command`).
An anonymous caller (when anonymous access is on) gets the shared skills only; a server without
a state database, none. Skills are managed on the settings page (``/settings/skills``,
`codesearch.web.pages_skills`) and by the MCP tools (`codesearch.tools.skills`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from codesearch.app.skills import command_item
from codesearch.service.deps import Caller, StoreDep
from codesearch.store.models import SKILL_SHARED

router = APIRouter()


@router.get("/api/skills")
async def list_commands(identity: Caller, store: StoreDep) -> dict[str, Any]:
    if store is None:
        return {"skills": []}
    user_id = identity.user_id
    if user_id is None:
        found = await run_in_threadpool(store.list_skills, 0, SKILL_SHARED)
    else:
        found = await run_in_threadpool(store.list_skills, user_id)
    return {"skills": [command_item(s) for s in found]}
