"""Identity providers every user must link (``accountLinkingRequired``, Sourcebot's field).

An `identityProviders` entry with ``"accountLinkingRequired": true`` (or codesearch's
``"required": true``) asks every signed-in user to have an account of that provider linked, so
that permission syncing knows who they are on its code host. Until they have:

* web pages send them to ``/settings/account``, whose banner names what to link
  (`codesearch.web.link_required`); that page, linking and unlinking there, signing out and the
  provider's callback stay open;
* every credential of theirs on ``/api/*`` and the MCP endpoint (API key, OAuth token, the web
  session) is refused with 403 ``INSUFFICIENT_PERMISSIONS`` naming the providers
  (`RequiredLinks`, called by `codesearch.service.auth.Authenticator` for each caller it finds).

A user who signs in *with* a required provider has it linked by that very sign-in. Anonymous
callers are not affected (they have no account to link to).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from codesearch.errors import NotAuthenticated

if TYPE_CHECKING:
    from codesearch.sso.providers import Provider
    from codesearch.store import Store
    from codesearch.store.models import User


class LinkRequired(NotAuthenticated):
    """A valid credential of a user who has not linked a required provider: 403, since the same
    credential cannot help until the user links it in the web UI. A `NotAuthenticated`, so that
    every place that refuses unauthenticated callers refuses it too."""

    status_code = 403
    error_code = "INSUFFICIENT_PERMISSIONS"


def required(providers: Iterable[Provider]) -> list[Provider]:
    """The providers (`codesearch.sso.Provider`) whose entry says ``accountLinkingRequired``."""
    return [p for p in providers if p.config.required]


def missing(store: Store, user_id: int, providers: Iterable[Provider]) -> list[Provider]:
    """The required providers the user has no linked account of, in config order."""
    needed = required(providers)
    if not needed:
        return []
    linked = {a.provider for a in store.list_linked_accounts(user_id=user_id)}
    return [p for p in needed if p.id not in linked]


def names(providers: Iterable[Provider]) -> str:
    """ "GitHub", "GitHub and GitLab", "GitHub, GitLab and Gitea"."""
    n = [p.name for p in providers]
    return n[0] if len(n) == 1 else ", ".join(n[:-1]) + " and " + n[-1]


class RequiredLinks:
    """The check `Authenticator` runs on every user it identifies (see the module docstring):
    raises `LinkRequired` for a user who misses a required provider. Costs nothing when no
    provider is required, one read of the user's linked accounts otherwise."""

    def __init__(self, get_store: Callable[[], Store | None], providers: Mapping[str, Provider], public_url: str = ""):
        self.get_store = get_store
        self.providers = list(providers.values())
        self.account_url = f"{(public_url or '').rstrip('/')}/settings/account"

    def __bool__(self) -> bool:
        return bool(required(self.providers))

    def __call__(self, user: User | None) -> None:
        store = self.get_store()
        if user is None or store is None:
            return
        lacking = missing(store, user.id, self.providers)
        if lacking:
            raise LinkRequired(
                f"this server requires every user to link their {names(lacking)} account: "
                f"sign in at {self.account_url} and link it there, then try again"
            )
