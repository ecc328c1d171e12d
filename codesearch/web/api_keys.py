"""Creating an API key from a page: the one rule the keys page (``/settings/keys``) and the MCP
page (``/settings/mcp``) share, so that both refuse the same names and the same users, and both
leave the same audit event. The secret is returned once, to be shown once; the store keeps only
its HMAC."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import Request

from codesearch import audit
from codesearch.permissions import Identity
from codesearch.store import OWNER

if TYPE_CHECKING:
    from codesearch.store.models import User
    from codesearch.web.templating import WebContext

MAX_NAME = 255


@dataclass
class KeyOutcome:
    """What creating a key gave: `created` (``{id, name, secret}``) or an `error` for the user
    with its HTTP `status`."""

    status: int
    created: dict[str, Any] | None = None
    error: str | None = None


def may_create(web: WebContext, user: User) -> bool:
    """Members may create keys unless ``DISABLE_API_KEY_CREATION_FOR_NON_OWNER_USERS`` is set."""
    return user.role == OWNER or not web.keys_owner_only


def create(request: Request, web: WebContext, user: User, name: str) -> KeyOutcome:
    """Create a key named `name` for `user` (the signed-in caller), recorded in the audit log."""
    if not may_create(web, user):
        return KeyOutcome(403, error="Only owners can create API keys on this server.")
    name = (name or "").strip()
    if not name or len(name) > MAX_NAME:
        return KeyOutcome(400, error="Give the key a name (at most 255 characters), e.g. where it will be used.")
    store = web.get_store()
    if store is None:  # (a signed-in user implies a store: sessions live in it)
        return KeyOutcome(503, error="This service runs without a state database, so no key can be created.")
    key_id, secret = store.create_api_key(user.id, name)
    audit.record(request, Identity(user), "apikey.create", str(key_id), name=name)
    return KeyOutcome(201, created={"id": key_id, "name": name, "secret": secret})
