"""OAuth 2.0 for MCP clients: the protocol, as the MCP authorization spec asks (2025-06-18).

This package is the protocol and its checks, with no HTTP routing: the JSON endpoints are
`codesearch.service.routes.oauth`, the consent page `codesearch.web.pages_oauth_authorize`; both
import it, it imports neither.

Written by hand, with each check spelled out here and tested (tests/service/test_oauth*.py,
tests/service/test_security_oauth.py), rather than with Authlib's server classes: Authlib ships
server integrations for Flask and Django only (a Starlette one would have to be written against
its request/response abstraction), its RFC 7591 endpoint and grant classes call back into models
we would have to fake on top of our tables, and the rules that matter most here (a replayed code
revokes its grant, a reused refresh token revokes its grant, PKCE S256 only, no redirect to the
client before the user has answered) would live in those callbacks anyway. What the service runs:

- **Metadata** (`codesearch.oauth.server`). Protected resource metadata (RFC 9728) for
  ``<base>/api/mcp`` naming the authorization server, and authorization server metadata (RFC 8414).
  The issuer, and every endpoint URL, is `server.base_url`: ``AUTH_URL`` when set, else the
  request's own base URL (scheme, honouring ``X-Forwarded-Proto`` from a trusted proxy, host and
  the app's root path). The settings (``AUTH_URL``, lifetimes, registration limits) are
  `server.OAuthSettings`.
- **Registration** (RFC 7591, `codesearch.oauth.registration`): anyone may register (MCP
  clients do so on first contact), so every limit is about abuse: body size, field count and
  lengths, registrations per client address. Redirect URIs and the text a client chooses are
  checked, and drawn on pages, by `codesearch.oauth.redirects` (https, http on loopback
  only, private-use schemes of native apps, ASCII hosts, no character that hides or reorders
  text). A client that never completes an authorization is *pending*, removed after
  ``OAuthSettings.pending_client_ttl`` and beyond ``max_pending_clients``
  (`codesearch.store.oauth_clients`).
- **Authorization** (`codesearch.oauth.authorize`): the code flow with PKCE ``S256`` only;
  a refused request is a page, never a redirect to the client (RFC 9700 §4.11.2). The signed-in
  user consents on a page (`codesearch.web.pages_oauth_authorize`); only then does the client
  hear back: a code, or ``access_denied`` when the user said no.
- **Token and revocation** (`codesearch.oauth.tokens`): ``authorization_code`` (single use:
  a replay revokes the grant) and ``refresh_token`` (rotated: single use, a reuse revokes the
  grant); RFC 6749 errors, JSON, ``Cache-Control: no-store``; RFC 7009 revocation answers 200
  whatever the token.

Codes and tokens are random, prefixed and stored hashed (`codesearch.store.oauth`). Nothing here
logs or audits a code, token, secret or PKCE verifier.
"""
