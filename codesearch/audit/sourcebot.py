"""The audit log in Sourcebot's words: its action names and its record shape (``GET /api/ee/audit``).

Our events keep our own action names (`codesearch.audit.actions.ACTIONS`: what ``GET /api/audit``
and the ``/settings/audit`` page show). A tool written for Sourcebot's audit API (a SIEM import,
a compliance report) reads ``GET /api/ee/audit`` instead, where each event is translated here:
its action to Sourcebot's name for the same thing (`SOURCEBOT_ACTIONS`; an action Sourcebot has no
name for keeps ours), its actor and target to Sourcebot's ``actorId``/``actorType`` and
``targetId``/``targetType``, and what Sourcebot keeps in ``metadata`` (the query of a search is
its ``message``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codesearch.store.models import AuditEvent

#: Sourcebot's organisation id: codesearch serves one organisation.
ORG_ID = 1

#: Our action → (Sourcebot's action, its target type). Target type ``org``: the event's target (a
#: query, a path) goes into ``metadata.message`` and the target is the organisation, as Sourcebot
#: records these.
SOURCEBOT_ACTIONS: dict[str, tuple[str, str]] = {
    "search": ("user.performed_code_search", "org"),
    "source.read": ("user.fetched_file_source", "org"),
    "tree.read": ("user.fetched_file_tree", "org"),
    "blame.read": ("user.fetched_file_blame", "org"),
    "repos.list": ("user.listed_repos", "org"),
    "chat.ask": ("user.created_ask_chat", "org"),
    "chat.share": ("chat.visibility_updated", "chat"),
    "login": ("user.signed_in", "user"),
    "login.sso": ("user.signed_in", "user"),
    "logout": ("user.signed_out", "user"),
    "apikey.create": ("api_key.created", "api_key"),
    "apikey.revoke": ("api_key.deleted", "api_key"),
    "user.create": ("org.member_added", "user"),
    "member.approve": ("user.join_request_approved", "account_join_request"),
    "invite.create": ("user.invites_created", "org"),
    "invite.accept": ("user.invite_accepted", "invite"),
    "audit.read": ("audit.fetch", "org"),
}

#: Code navigation is recorded as a ``search`` with the kind of lookup in ``symbols``.
_SYMBOL_ACTIONS = {"definitions": "user.performed_goto_definition", "references": "user.performed_find_references"}


def sourcebot_action(action: str, details: dict[str, Any]) -> tuple[str, str | None]:
    """Sourcebot's name for our `action` and its target type (ours and None when it has none)."""
    if action == "search" and details.get("symbols") in _SYMBOL_ACTIONS:
        return _SYMBOL_ACTIONS[details["symbols"]], "org"
    if action == "user.role":
        role = str(details.get("role") or "").upper()
        return ("org.member_promoted_to_owner" if role == "OWNER" else "org.owner_demoted_to_member"), "user"
    name, target_type = SOURCEBOT_ACTIONS.get(action, (action, ""))
    return name, target_type or None


def actions_named(name: str) -> list[str]:
    """Our actions that Sourcebot calls `name` (to filter by Sourcebot's name)."""
    out = [ours for ours, (theirs, _) in SOURCEBOT_ACTIONS.items() if theirs == name]
    if name in _SYMBOL_ACTIONS.values():
        out.append("search")
    if name in ("org.member_promoted_to_owner", "org.owner_demoted_to_member"):
        out.append("user.role")
    return out or [name]


def iso_ms(event: AuditEvent) -> str:
    """The event's time as JavaScript prints it (ISO 8601, UTC, milliseconds, ``Z``)."""
    return event.at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{event.at.microsecond // 1000:03d}Z"


def sourcebot_record(event: AuditEvent, version: str) -> dict[str, Any]:
    """`event` as one item of Sourcebot's ``GET /api/ee/audit`` answer."""
    details = dict(event.details or {})
    action, target_type = sourcebot_action(event.action, details)
    metadata: dict[str, Any] = {**details, "actor": event.actor}
    if event.request_id:
        metadata["requestId"] = event.request_id
    if target_type == "org":
        target_id = str(ORG_ID)
        if event.target:
            metadata["message"] = event.target
    else:
        target_id = event.target
        target_type = target_type or "other"
    if event.actor_user_id is not None:
        actor_id, actor_type = str(event.actor_user_id), "user"
    else:  # "anonymous", "cli": no account acted
        actor_id, actor_type = event.actor, event.actor
    return {
        "id": str(event.id),
        "timestamp": iso_ms(event),
        "action": action,
        "actorId": actor_id,
        "actorType": actor_type,
        "targetId": target_id,
        "targetType": target_type,
        "sourcebotVersion": version,
        "metadata": metadata,
        "orgId": ORG_ID,
    }
