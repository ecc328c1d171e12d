"""What a finished flow does with the identity: sign in, sign up, or link.

Sign-in (`sign_in`), in this order:
1. the identity is linked already (`Store.find_linked_account(provider id, subject)`): its user;
2. else a user has the identity's e-mail: the identity is linked to them and signs them in only
   when all of these hold (else a 409 page that says which does not, and what to do instead):
   the provider says the e-mail is verified (`ProviderIdentity.email_verified`, taken from the
   same answer as the address); the user's own address is verified (`User.email_verified`: an
   owner entered it, or a provider vouched for it); the user is not an OWNER (owners link
   further providers from their account page while signed in, never by e-mail), unless the
   provider is a gateway every request comes through (`Provider.is_gateway`: Google Cloud IAP,
   behind which no other sign-in is reachable);
3. else a new user (`Store.sign_up`, which links the identity in the same transaction): the
   first user ever is OWNER; with the flow's invite the invite's role (an invite for an e-mail
   needs that address, verified by the provider); with ``REQUIRE_APPROVAL_NEW_MEMBERS`` a MEMBER
   who waits for an owner. An unverified address may sign up while nobody has it; the user's
   address then does not count as verified, so no later sign-in by e-mail lands in that account
   (an attacker cannot pre-claim someone's address and wait for them).

Two callbacks for one identity at once (a double click, two tabs) race to sign up: the loser's
`sign_up` is a `Conflict` (the e-mail or the identity exists now) and stores nothing; it then
resolves again, from step 1, and signs in as the user the identity is linked to (or gets the
page of step 2).

Providers that never vouch for an address (Gitea, Bitbucket Server, Microsoft Entra ID, any
OpenID Connect provider without ``email_verified: true``) therefore sign up new users and sign
in users they are linked to, never a user found by e-mail.

Link (`link`): the identity goes to the signed-in user; an identity linked to another user is
refused. Code-host identities (github, gitlab, gitea, bitbucket-cloud, bitbucket-server) keep their
tokens (sealed) and their host key, and ask for a permission sync of the account after every
sign-in or link.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from codesearch.sso.flow import FlowError
from codesearch.sso.providers import Provider, ProviderIdentity
from codesearch.store import OWNER, Conflict
from codesearch.store.members import InviteInvalid

if TYPE_CHECKING:
    from codesearch.store import Store
    from codesearch.store.models import LinkedAccount, LinkedIdentity, User


@dataclass
class Outcome:
    user: User
    account: LinkedAccount
    created: bool = False  # a new user
    pending: bool = False  # waits for approval: no session
    linked_now: bool = False  # the identity was linked by this flow


def _identity(provider: Provider, who: ProviderIdentity, signed_in: bool) -> LinkedIdentity:
    """The keyword arguments of `Store.link_account` for `who`: the e-mail only when verified,
    tokens only for code hosts (permission syncing uses them; nothing else needs them kept)."""
    code_host = provider.host is not None
    return {
        "provider": provider.id,
        "provider_type": provider.kind,
        "subject": who.subject,
        "host": provider.host,
        "login": who.login,
        "email": who.email if who.email_verified else None,
        "access_token": who.access_token if code_host else None,
        "refresh_token": who.refresh_token if code_host else None,
        "token_expires_at": who.expires_at if code_host else None,
        "scope": who.scope,
        "signed_in": signed_in,
    }


def _link(store: Store, user_id: int, provider: Provider, who: ProviderIdentity, signed_in: bool) -> LinkedAccount:
    account = store.link_account(user_id, **_identity(provider, who, signed_in))
    if provider.host is not None:
        store.request_account_permission_sync(account.id)
    return account


def sign_in(
    store: Store, provider: Provider, who: ProviderIdentity, *, require_approval: bool, invite: str | None = None
) -> Outcome:
    try:
        return _sign_in(store, provider, who, require_approval=require_approval, invite=invite)
    except Conflict:  # a concurrent sign-in made the account or linked the identity meanwhile
        pass
    try:
        return _sign_in(store, provider, who, require_approval=require_approval, invite=invite)
    except Conflict:
        raise FlowError(
            "identity",
            f"Another sign-in with this {provider.name} account was being completed at the same time. Try again.",
            409,
        ) from None


def _sign_in(
    store: Store, provider: Provider, who: ProviderIdentity, *, require_approval: bool, invite: str | None
) -> Outcome:
    email = (who.email or "").strip().lower()
    # The e-mail is looked up before the identity: a concurrent sign-up of this same identity
    # commits its user and its link together, so an account found by e-mail here is either
    # someone else's or already shows the link below (read the other way round, the link could
    # be missed and the new account taken for an owner's to refuse joining).
    by_email = store.find_user_by_email(email) if email else None
    found = store.find_linked_account(provider.id, who.subject)
    if found is not None:
        user = store.get_user(found.user_id)
        return Outcome(user, _link(store, user.id, provider, who, True), pending=store.is_pending(user.id))
    if by_email is not None:
        _may_join_by_email(provider, who, by_email, email)
        return Outcome(
            by_email,
            _link(store, by_email.id, provider, who, True),
            pending=store.is_pending(by_email.id),
            linked_now=True,
        )
    if not email:
        raise FlowError(
            "identity",
            f"{provider.name} did not tell us your e-mail address, which an account needs. "
            "Make one visible to this app at the provider and try again.",
            403,
        )
    try:
        user, pending = store.sign_up(
            email,
            who.name or "",
            email_verified=who.email_verified,
            require_approval=require_approval,
            invite_token=invite,
            identity=_identity(provider, who, True),
        )
    except InviteInvalid as e:
        raise FlowError("identity", str(e), 403) from None
    account = store.find_linked_account(provider.id, who.subject)
    if account is None:  # `sign_up` linked it; unlinked meanwhile
        raise FlowError("identity", f"Your {provider.name} account was unlinked while signing up. Try again.", 409)
    if provider.host is not None:
        store.request_account_permission_sync(account.id)
    return Outcome(user, account, created=True, pending=pending, linked_now=True)


def _may_join_by_email(provider: Provider, who: ProviderIdentity, user: User, email: str) -> None:
    """`FlowError` (409) unless `who` may be linked to `user`, found by its e-mail (step 2 of the
    module docstring)."""
    later = f"Sign in to that account the way you usually do, then link {provider.name} from your account settings."
    if not who.email_verified:
        raise FlowError(
            "identity",
            f"An account with the e-mail {email} exists, but {provider.name} does not say "
            f"the address is verified. {later}",
            409,
        )
    if user.role == OWNER and not provider.is_gateway:
        raise FlowError(
            "identity",
            f"An owner's account has the e-mail {email}. Owner accounts are never joined by e-mail. {later}",
            409,
        )
    if not user.email_verified:
        raise FlowError(
            "identity",
            f"An account with the e-mail {email} exists, but nobody ever verified that it "
            f"is its user's address, so {provider.name} cannot sign in to it by e-mail. "
            f"If it is yours: {later} If it is not, tell an owner of this server.",
            409,
        )


def link(store: Store, provider: Provider, who: ProviderIdentity, user_id: int) -> Outcome:
    found = store.find_linked_account(provider.id, who.subject)
    if found is not None and found.user_id != user_id:
        raise FlowError(
            "identity",
            f"This {provider.name} account is linked to another user of this server. Unlink it there first.",
            409,
        )
    try:
        account = _link(store, user_id, provider, who, False)
    except Conflict:
        raise FlowError(
            "identity", f"This {provider.name} account is linked to another user of this server.", 409
        ) from None
    return Outcome(store.get_user(user_id), account, linked_now=found is None)


def sign_in_methods(store: Store, user: User, providers: dict[str, Provider]) -> int:
    """How many ways the user has to sign in: a password, and each linked identity of a
    configured sign-in provider."""
    accounts = store.list_linked_accounts(user_id=user.id)
    return (1 if user.password_hash else 0) + sum(
        1 for a in accounts if a.provider in providers and providers[a.provider].signs_in
    )
