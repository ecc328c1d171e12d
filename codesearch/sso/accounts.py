"""What a finished flow does with the identity: sign in, sign up, or link.

Sign-in (`sign_in`), in this order:
1. the identity is linked already (`Store.find_linked_account(provider id, subject)`): its user;
2. else the provider says the e-mail is verified and a user has it: that user, and the identity
   is linked to them;
3. else a new user (`Store.sign_up`): the first user ever is OWNER; with the flow's invite the
   invite's role; with ``REQUIRE_APPROVAL_NEW_MEMBERS`` a MEMBER who waits for an owner.
An unverified e-mail that belongs to a user is refused (linking it would let anyone who can
claim that address at the provider take the account): the user signs in another way and links.

Link (`link`): the identity goes to the signed-in user; an identity linked to another user is
refused. Code-host identities (github, gitlab, gitea, bitbucket-cloud, bitbucket-server) keep their
tokens (sealed) and their host key, and ask for a permission sync of the account after every
sign-in or link.
"""

from __future__ import annotations

from dataclasses import dataclass

from codesearch.sso.flow import FlowError
from codesearch.sso.providers import Provider, ProviderIdentity
from codesearch.store import Conflict
from codesearch.store.members import InviteInvalid


@dataclass
class Outcome:
    user: object  # codesearch.store.User
    account: object  # LinkedAccount
    created: bool = False  # a new user
    pending: bool = False  # waits for approval: no session
    linked_now: bool = False  # the identity was linked by this flow


def _link(store, user_id: int, provider: Provider, who: ProviderIdentity, signed_in: bool):
    code_host = provider.host is not None
    account = store.link_account(
        user_id, provider=provider.id, provider_type=provider.kind, subject=who.subject, host=provider.host,
        login=who.login, email=who.email if who.email_verified else None,
        access_token=who.access_token if code_host else None, refresh_token=who.refresh_token if code_host else None,
        token_expires_at=who.expires_at if code_host else None, scope=who.scope, signed_in=signed_in)
    if code_host:
        store.request_account_permission_sync(account.id)
    return account


def sign_in(store, provider: Provider, who: ProviderIdentity, *, require_approval: bool,
            invite: str | None = None) -> Outcome:
    found = store.find_linked_account(provider.id, who.subject)
    if found is not None:
        user = store.get_user(found.user_id)
        return Outcome(user, _link(store, user.id, provider, who, True), pending=store.is_pending(user.id))
    email = (who.email or "").strip().lower()
    user = store.find_user_by_email(email) if email else None
    if user is not None:
        if not who.email_verified:
            raise FlowError("identity", f"An account with the e-mail {email} exists, but {provider.name} does not say "
                                        "the address is verified. Sign in to that account another way, then link "
                                        f"{provider.name} from your account settings.", 409)
        return Outcome(user, _link(store, user.id, provider, who, True), pending=store.is_pending(user.id),
                       linked_now=True)
    if not email:
        raise FlowError("identity", f"{provider.name} did not tell us your e-mail address, which an account needs. "
                                    "Make one visible to this app at the provider and try again.", 403)
    try:
        user, pending = store.sign_up(email, who.name or "", require_approval=require_approval, invite_token=invite)
    except InviteInvalid as e:
        raise FlowError("identity", str(e), 403) from None
    except Conflict:  # someone made the account meanwhile
        raise FlowError("identity", "An account with this e-mail was just created. Try again.", 409) from None
    return Outcome(user, _link(store, user.id, provider, who, True), created=True, pending=pending, linked_now=True)


def link(store, provider: Provider, who: ProviderIdentity, user_id: int) -> Outcome:
    found = store.find_linked_account(provider.id, who.subject)
    if found is not None and found.user_id != user_id:
        raise FlowError("identity", f"This {provider.name} account is linked to another user of this server. "
                                    "Unlink it there first.", 409)
    try:
        account = _link(store, user_id, provider, who, False)
    except Conflict:
        raise FlowError("identity", f"This {provider.name} account is linked to another user of this server.",
                        409) from None
    return Outcome(store.get_user(user_id), account, linked_now=found is None)


def sign_in_methods(store, user, providers: dict[str, Provider]) -> int:
    """How many ways the user has to sign in: a password, and each linked identity of a
    configured sign-in provider."""
    accounts = store.list_linked_accounts(user_id=user.id)
    return (1 if user.password_hash else 0) + sum(
        1 for a in accounts if a.provider in providers and providers[a.provider].signs_in)
