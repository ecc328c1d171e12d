"""Ask skills: named instructions a question runs with when it starts with ``/slug``.

A skill is PERSONAL (only its user sees, uses and manages it: not even an owner of the
instance) or SHARED (every member sees and uses it; its creator and the instance's owners edit
or delete it), as in Sourcebot 5.1.8, where any member may publish a skill to the shared catalog.
A slug is unique among one user's personal skills and among the shared skills; a personal
skill wins over a shared one with the same slug when a question names it (`resolve_skill`).

The fields are checked here, with Sourcebot's limits and messages (`check_skill`): a name of
1..80 characters, a slug (the command, without ``/``) of 1..64 lowercase letters, digits and
hyphens (what is typed is normalized first: ``Review PR`` is ``review-pr``), a description of
1..500 and instructions of 1..20,000 characters. A user keeps at most `MAX_PERSONAL` personal
skills and the instance at most `MAX_SHARED` shared ones, so lists and the Ask box stay small.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.errors import InsufficientPermissions, InvalidArgument
from codesearch.store.base import StoreBase
from codesearch.store.errors import Conflict, NotFound
from codesearch.store.models import SKILL_PERSONAL, SKILL_SCOPES, SKILL_SHARED, Skill
from codesearch.store.rows import from_row, inserted_id
from codesearch.store.tables import skills

MAX_PERSONAL = 100
MAX_SHARED = 500
#: (field, most characters, the message when empty)
LIMITS = (
    ("name", 80, "Name is required."),
    ("slug", 64, "Command is required."),
    ("description", 500, "Description is required."),
    ("instructions", 20000, "Instructions are required."),
)
_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def normalize_slug(value: str) -> str:
    """A typed command as a slug: lower case, runs of other characters as one hyphen, no leading
    ``/`` or hyphens, at most 64 characters (Sourcebot's normalization)."""
    slug = re.sub(r"[^a-z0-9]+", "-", (value or "").strip().lower()).strip("-")
    return slug[:64].rstrip("-")


def check_skill(fields: Mapping[str, Any]) -> dict[str, str]:
    """The four fields, trimmed and the slug normalized; InvalidArgument names every field that
    is missing, empty or too long."""
    out: dict[str, str] = {}
    problems: list[str] = []
    for name, most, empty in LIMITS:
        value = fields.get(name)
        if not isinstance(value, str):
            problems.append(f"{name}: {empty}" if value is None else f"{name}: must be a string.")
            continue
        value = normalize_slug(value) if name == "slug" else value.strip()
        if not value:
            problems.append(f"{name}: {empty}")
        elif len(value) > most:
            problems.append(f"{name}: must be {most:,} characters or fewer (got {len(value):,}).")
        elif name == "slug" and not _SLUG.match(value):
            problems.append(f"{name}: Command can only contain lowercase letters, numbers, and hyphens.")
        out[name] = value
    if problems:
        raise InvalidArgument("invalid skill: " + " ".join(problems))
    return out


def _owner_key(scope: str, user_id: int) -> str:
    if scope not in SKILL_SCOPES:
        raise InvalidArgument(f"scope: must be 'personal' or 'shared', not {scope!r}.")
    return SKILL_SHARED if scope == SKILL_SHARED else f"u{user_id}"


def can_manage(skill: Skill, user_id: int | None, is_owner: bool) -> bool:
    """Whether the user may edit or delete `skill`: a personal one's user; a shared one's creator
    or an owner of the instance."""
    if user_id is None:
        return False
    if skill.scope == SKILL_PERSONAL:
        return skill.user_id == user_id
    return skill.user_id == user_id or is_owner


class SkillsMixin(StoreBase):
    """The `Store` methods for Ask skills (mixed into `Store`)."""

    def create_skill(self, user_id: int, scope: str, fields: Mapping[str, Any]) -> Skill:
        """A new skill of `user_id`. InvalidArgument for a bad field, Conflict when the slug is
        taken or the user (or the shared catalog) is full."""
        values = check_skill(fields)
        key = _owner_key(scope, user_id)
        now = self._now()
        with self._tx(write=True) as c:
            self._get_user(c, user_id)
            count = c.scalar(select(func.count()).select_from(skills).where(skills.c.owner_key == key)) or 0
            most = MAX_SHARED if scope == SKILL_SHARED else MAX_PERSONAL
            if count >= most:
                raise Conflict(f"at most {most} {scope} skills may exist; delete one first")
            self._check_free(c, key, values["slug"], None)
            result = c.execute(
                insert(skills).values(
                    user_id=user_id, scope=scope, owner_key=key, created_at=now, updated_at=now, **values
                )
            )
            return self._skill(c, inserted_id(result))

    def update_skill(
        self, skill_id: int, user_id: int, is_owner: bool, fields: Mapping[str, Any], scope: str | None = None
    ) -> Skill:
        """Change the given fields (the others are kept) and, with `scope`, move it between the
        personal and shared catalogs. NotFound when the user may not see it, InsufficientPermissions
        when they see it but may not manage it (see `can_manage`)."""
        with self._tx(write=True) as c:
            skill = self._visible_skill(c, skill_id, user_id)
            if not can_manage(skill, user_id, is_owner):
                raise InsufficientPermissions(
                    f"skill /{skill.slug} is shared: only its creator or an owner may change it"
                )
            values = check_skill({**skill.__dict__, **{k: v for k, v in fields.items() if v is not None}})
            scope = scope or skill.scope
            key = _owner_key(scope, skill.user_id)
            self._check_free(c, key, values["slug"], skill.id)
            c.execute(
                update(skills)
                .where(skills.c.id == skill.id)
                .values(scope=scope, owner_key=key, updated_at=self._now(), **values)
            )
            return self._skill(c, skill.id)

    def delete_skill(self, skill_id: int, user_id: int, is_owner: bool) -> Skill:
        """Delete it and return what it was (NotFound / InsufficientPermissions as `update_skill`)."""
        with self._tx(write=True) as c:
            skill = self._visible_skill(c, skill_id, user_id)
            if not can_manage(skill, user_id, is_owner):
                raise InsufficientPermissions(
                    f"skill /{skill.slug} is shared: only its creator or an owner may delete it"
                )
            c.execute(delete(skills).where(skills.c.id == skill.id))
            return skill

    def get_skill(self, skill_id: int, user_id: int) -> Skill:
        """The skill if `user_id` may see it (theirs, or shared), else NotFound."""
        with self._tx() as c:
            return self._visible_skill(c, skill_id, user_id)

    def list_skills(self, user_id: int, scope: str | None = None) -> list[Skill]:
        """The user's personal skills, then the shared ones, each by slug; `scope` keeps one kind."""
        keys = [k for s, k in ((SKILL_PERSONAL, f"u{user_id}"), (SKILL_SHARED, SKILL_SHARED)) if scope in (None, s)]
        with self._tx() as c:
            rows = c.execute(select(skills).where(skills.c.owner_key.in_(keys)).order_by(skills.c.slug))
            found = [from_row(Skill, r) for r in rows]
        return sorted(found, key=lambda s: s.scope != SKILL_PERSONAL)

    def resolve_skill(self, user_id: int | None, slug: str) -> Skill | None:
        """The skill ``/slug`` names for `user_id` (None: anonymous, shared skills only): their
        personal one, else the shared one, else None."""
        keys = [SKILL_SHARED] + ([f"u{user_id}"] if user_id is not None else [])
        with self._tx() as c:
            rows = [
                from_row(Skill, r)
                for r in c.execute(select(skills).where(skills.c.slug == slug, skills.c.owner_key.in_(keys)))
            ]
        rows.sort(key=lambda s: s.scope != SKILL_PERSONAL)
        return rows[0] if rows else None

    def find_skill(self, user_id: int, scope: str, slug: str) -> Skill:
        """The skill `scope`/`slug` as `user_id` sees it, else NotFound."""
        key = _owner_key(scope, user_id)
        with self._tx() as c:
            row = c.execute(select(skills).where(skills.c.owner_key == key, skills.c.slug == slug)).first()
        if row is None:
            raise NotFound(f"{scope} skill", slug)
        return from_row(Skill, row)

    def _check_free(self, c: SAConnection, key: str, slug: str, skill_id: int | None) -> None:
        q = select(skills.c.id).where(skills.c.owner_key == key, skills.c.slug == slug)
        if skill_id is not None:
            q = q.where(skills.c.id != skill_id)
        if c.scalar(q) is not None:
            raise Conflict(f"A skill with command /{slug} already exists.")

    def _visible_skill(self, c: SAConnection, skill_id: int, user_id: int) -> Skill:
        row = c.execute(
            select(skills).where(
                skills.c.id == skill_id, or_(skills.c.owner_key == SKILL_SHARED, skills.c.user_id == user_id)
            )
        ).first()
        if row is None:
            raise NotFound("skill", skill_id)
        return from_row(Skill, row)

    def _skill(self, c: SAConnection, skill_id: int) -> Skill:
        return from_row(Skill, c.execute(select(skills).where(skills.c.id == skill_id)).one())
