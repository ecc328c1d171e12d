"""Single sign-on and account linking with the config's `identityProviders` (Authlib + joserfc).

- `providers.py`: one `Provider` per supported entry: the code hosts GitHub, GitLab, Gitea,
  Bitbucket Cloud and Bitbucket Server (OAuth 2.0 and their user APIs), Google, Okta, Keycloak,
  Microsoft Entra ID, Authentik, JumpCloud and any OpenID Connect provider (discovery, JWKS,
  signed ID tokens);
- `flow.py`: the authorization-code flow: state, nonce (OIDC) and PKCE (S256) on every flow,
  kept in a short-lived encrypted cookie bound to the browser, single use, checked on callback;
  the identity the provider vouches for (`ProviderIdentity`);
- `accounts.py`: what a sign-in or a link does with that identity (find the user by linked
  identity, else by verified e-mail, else sign them up; approval and invites: `store.members`);
- `iap.py`: Google Cloud IAP (``gcp-iap``), which has no flow: the proxy in front signs every
  request (``x-goog-iap-jwt-assertion``, checked against Google's keys), and `codesearch.web.iap`
  signs each such request in as the user it names.

Provider ids. Each entry has a stable id (`codesearch.config.models.IdentityProvider.id`): its
``id`` when the entry gives one, else its type (``github``, ``okta`` …), else ``<type>-<n>`` for
the n-th entry of one type. The id names the callback, ``<AUTH_URL>/api/auth/callback/<id>``
(Sourcebot's path, so OAuth apps registered for Sourcebot keep working), and the `provider`
column of linked accounts: changing it unlinks every account linked through the entry.

Secrets. Client secrets are resolved from their references when a flow needs them; codes,
tokens, states, nonces and verifiers are never logged, never put in an error page, and provider
tokens are stored sealed (`codesearch.store.identities`).
"""

from codesearch.sso.flow import FlowError
from codesearch.sso.providers import Provider, ProviderIdentity, build_providers

__all__ = ["FlowError", "Provider", "ProviderIdentity", "build_providers"]
