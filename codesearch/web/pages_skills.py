"""The skills page of the settings: a member's Ask skills, and the shared ones.

    GET  /settings/skills                 the caller's personal skills, the shared skills, and a form
                                          for a new one; ``?skill=<id>`` opens one (its instructions,
                                          and an edit form when the caller may manage it)
    POST /settings/skills                 create a skill (personal or shared)
    POST /settings/skills/{id}            change it (fields, and personal <-> shared)
    POST /settings/skills/{id}/delete     delete it

Any signed-in member may create personal and shared skills (as in Sourcebot 5.1.8); a personal
skill is its user's alone (anyone else, owners included, gets 404), a shared one is managed by
its creator and by owners (anyone else: 403). A bad field re-shows the form with every problem
named (400), a taken command says so (409). Every change is audited (``skill.create``,
``skill.update``, ``skill.delete``). Every POST checks the CSRF token.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from codesearch import audit, sessions
from codesearch.errors import CodesearchError, InsufficientPermissions, InvalidArgument
from codesearch.permissions import Identity
from codesearch.service.deps import StoreDep
from codesearch.store import Conflict, NotFound, Store, User
from codesearch.store.models import SKILL_PERSONAL, SKILL_SCOPES
from codesearch.store.skills import LIMITS, can_manage
from codesearch.web.templating import render

router = APIRouter(include_in_schema=False)

#: the fields' size limits, for the form's maxlength attributes
MAXLEN = {name: most for name, most, _ in LIMITS}


def _page(
    request: Request, store: Store, user: User, *, status_code: int = 200, open_id: int | None = None, **ctx: Any
) -> HTMLResponse:
    owner = user.role == "OWNER"
    skills = store.list_skills(user.id)
    opened = next((s for s in skills if s.id == open_id), None)
    return render(
        request,
        "skills.html",
        status_code=status_code,
        title="Skills",
        section="skills",
        personal=[s for s in skills if s.scope == SKILL_PERSONAL],
        shared=[s for s in skills if s.scope != SKILL_PERSONAL],
        manageable={s.id for s in skills if can_manage(s, user.id, owner)},
        opened=opened,
        maxlen=MAXLEN,
        draft=ctx.pop("draft", None) or {"scope": SKILL_PERSONAL},
        error=ctx.pop("error", None),
        notice=ctx.pop("notice", None),
        edit_error=ctx.pop("edit_error", None),
        **ctx,
    )


def _failure(e: CodesearchError) -> tuple[int, str]:
    status = 409 if isinstance(e, Conflict) else 400 if isinstance(e, InvalidArgument) else e.status_code
    return status, str(e)


@router.get("/settings/skills")
def skills_page(request: Request, store: StoreDep, skill: str = "", done: str = "") -> Response:
    user = sessions.current_user(request)
    if user is None:
        return sessions.login_redirect(request)
    if store is None:
        return Response(status_code=503)
    open_id = int(skill) if skill.isdigit() else None
    if open_id is not None:
        try:
            store.get_skill(open_id, user.id)
        except NotFound:
            return _page(request, store, user, status_code=404, error=f"Skill {open_id} not found.")
    notice = {"created": "Skill created.", "saved": "Skill saved.", "deleted": "Skill deleted."}.get(done)
    return _page(request, store, user, open_id=open_id, notice=notice)


class SkillForm:
    """The fields of the create and edit forms (one definition for both routes)."""

    def __init__(
        self,
        name: str = Form(""),
        slug: str = Form(""),
        description: str = Form(""),
        instructions: str = Form(""),
        scope: str = Form(SKILL_PERSONAL),
    ):
        self.fields = {"name": name, "slug": slug, "description": description, "instructions": instructions}
        self.scope = scope


@router.post("/settings/skills")
def create_skill(
    request: Request,
    store: StoreDep,
    form: Annotated[SkillForm, Depends()],
    csrf_token: str = Form(""),
) -> Response:
    user = sessions.form_user(request, csrf_token)
    if user is None or store is None:
        return sessions.login_redirect(request)
    draft = {**form.fields, "scope": form.scope}
    if form.scope not in SKILL_SCOPES:
        return _page(request, store, user, status_code=400, draft=draft, error="scope: choose personal or shared.")
    try:
        made = store.create_skill(user.id, form.scope, draft)
    except (InvalidArgument, Conflict) as e:
        status, message = _failure(e)
        return _page(request, store, user, status_code=status, draft=draft, error=message)
    audit.record(request, Identity(user), "skill.create", f"/{made.slug}", skill=made.id, scope=made.scope)
    return RedirectResponse(f"{sessions.root_of(request.scope)}/settings/skills?skill={made.id}&done=created", 303)


@router.post("/settings/skills/{skill_id}")
def update_skill(
    request: Request,
    skill_id: int,
    store: StoreDep,
    form: Annotated[SkillForm, Depends()],
    csrf_token: str = Form(""),
) -> Response:
    user = sessions.form_user(request, csrf_token)
    if user is None or store is None:
        return sessions.login_redirect(request)
    if form.scope not in SKILL_SCOPES:
        return _page(request, store, user, status_code=400, open_id=skill_id, edit_error="scope: personal or shared.")
    try:
        saved = store.update_skill(skill_id, user.id, user.role == "OWNER", form.fields, scope=form.scope)
    except NotFound:
        return _page(request, store, user, status_code=404, error=f"Skill {skill_id} not found.")
    except (InvalidArgument, Conflict, InsufficientPermissions) as e:
        status, message = _failure(e)
        return _page(request, store, user, status_code=status, open_id=skill_id, edit_error=message)
    audit.record(request, Identity(user), "skill.update", f"/{saved.slug}", skill=saved.id, scope=saved.scope)
    return RedirectResponse(f"{sessions.root_of(request.scope)}/settings/skills?skill={saved.id}&done=saved", 303)


@router.post("/settings/skills/{skill_id}/delete")
def delete_skill(request: Request, skill_id: int, store: StoreDep, csrf_token: str = Form("")) -> Response:
    user = sessions.form_user(request, csrf_token)
    if user is None or store is None:
        return sessions.login_redirect(request)
    try:
        gone = store.delete_skill(skill_id, user.id, user.role == "OWNER")
    except NotFound:
        return _page(request, store, user, status_code=404, error=f"Skill {skill_id} not found.")
    except InsufficientPermissions as e:
        return _page(request, store, user, status_code=403, open_id=skill_id, edit_error=str(e))
    audit.record(request, Identity(user), "skill.delete", f"/{gone.slug}", skill=gone.id)
    return RedirectResponse(f"{sessions.root_of(request.scope)}/settings/skills?done=deleted", 303)
