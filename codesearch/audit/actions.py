"""What the audit log records (`ACTIONS`: an action's name, and when it is recorded).

The names are what the store keeps in each event and what owners filter by
(``GET /api/audit?action=``, the ``/settings/audit`` page).
"""

#: What is recorded, and when.
ACTIONS = {
    "search": "a search (POST /api/search, /api/stream_search, the search page, an agent's search tool, "
    "POST /api/find_definitions and /api/find_references: target the symbol)",
    "source.read": "a file read (GET /api/source, a file page, an agent's read tool)",
    "tree.read": "a directory listed (GET or POST /api/tree, a directory page)",
    "commits.read": "a history read (GET /api/commits, a history page)",
    "blame.read": "a file's blame read (GET /api/blame, a blame page)",
    "commit.read": "one commit and its changes read (GET /api/commit, a commit page)",
    "diff.read": "two refs compared (GET /api/diff, a compare page)",
    "mcp.tool": "an MCP tool called (target: the tool's name)",
    "chat.ask": "a question to ask_codebase over REST or from the web UI's chat (target: the question; details: "
    "the chat's id)",
    "chat.read": "a research session page opened (target: the chat's id)",
    "chat.share": "a chat made PUBLIC or PRIVATE by its user (target: the chat's id)",
    "login": "a web sign-in",
    "login.failed": "a refused web sign-in (target: the e-mail typed)",
    "apikey.create": "an API key created (target: its id; never the key)",
    "apikey.revoke": "an API key revoked (target: its id)",
    "user.create": "an account created (target: its e-mail)",
    "user.role": "an account's role changed (target: its e-mail)",
    "oauth.client.register": "an OAuth client registered itself (target: its client id; never its secret)",
    "oauth.consent.grant": "a user allowed an OAuth client (target: the client id)",
    "oauth.consent.deny": "a user denied an OAuth client (target: the client id)",
    "oauth.token.issue": "OAuth tokens issued for an authorization code (target: the client id; never a token)",
    "oauth.token.refresh": "OAuth tokens refreshed (target: the client id)",
    "oauth.token.revoke": "an OAuth token revoked by its client (target: the client id)",
    "oauth.grant.revoke": "a user took back an OAuth client's access on the settings page: every token of that "
    "client for the user revoked (target: the client id)",
    "oauth.replay": "a used OAuth code or refresh token presented again: its grant revoked (target: the client id)",
    "login.sso": "a web sign-in through an identity provider (target: the e-mail; detail: the provider id)",
    "account.link": "an identity linked to an account (target: <provider id>:<login>)",
    "account.unlink": "an identity unlinked from an account (target: <provider id>:<login>)",
    "member.request": "a sign-up that waits for an owner's approval (target: its e-mail)",
    "member.approve": "a waiting sign-up approved (target: its e-mail)",
    "member.decline": "a waiting sign-up declined, the account deleted (target: its e-mail)",
    "invite.create": "an invite created (target: the e-mail it is for; never its token)",
    "invite.revoke": "an invite revoked (target: the start of its id)",
    "invite.accept": "an invite used to join (target: the new account's e-mail)",
    "connection.resync": "an owner asked for a connection to be synced now (target: the connection's name)",
    "repo.reindex": "an owner asked for a repository to be re-indexed from the settings page (target: its name)",
    "settings.access": "an owner switched anonymous access (target: the setting; detail: enabled)",
    "insight.create": "an insight saved (target: its id; detail: its name)",
    "insight.read": "an insight's counts read (GET /api/insights/<id>, its CSV, its page; target: its id)",
    "usage.read": "an owner read the usage report (GET /api/usage, its CSV, the usage page; target: the range)",
    "insight.delete": "an insight deleted by its user or an owner (target: its id; detail: its name)",
}
