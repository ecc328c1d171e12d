"""What the audit log records (`ACTIONS`: an action's name, and when it is recorded).

The names are what the store keeps in each event and what owners filter by
(``GET /api/audit?action=``, the ``/settings/audit`` page). ``GET /api/ee/audit`` shows them by
Sourcebot's names (`codesearch.audit.sourcebot`).
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
    "chat.rename": "a chat renamed by its user (target: the chat's id; detail: the new name)",
    "chat.delete": "a chat deleted by its user, with its follow-ups and shares (target: the chat's id)",
    "chat.duplicate": "a chat copied into a private chat of the caller's (target: the original's id; detail: the "
    "copy's id)",
    "chat.member.add": "a chat shared with a named member by its user (target: the chat's id; detail: the e-mail)",
    "chat.member.remove": "a member's access to a chat taken back by its user (target: the chat's id; detail: the "
    "member's user id)",
    "login": "a web sign-in",
    "login.failed": "a refused web sign-in (target: the e-mail typed)",
    "logout": "a web sign-out (target: the e-mail)",
    "repos.list": "the repositories listed (GET /api/repos; target: the name filter, if any)",
    "audit.read": "the audit log read (GET /api/audit, GET /api/ee/audit)",
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
    "user.list": "an owner listed the members (GET /api/ee/users)",
    "user.read": "an owner read one member (GET /api/ee/user; target: its e-mail)",
    "member.remove": "a member removed by an owner, the account deleted with every credential (target: its e-mail)",
    "member.leave": "a member left by themselves, the account deleted with every credential (target: its e-mail)",
    "member.deactivate": "a member deactivated by an owner: every credential ended (target: its e-mail)",
    "member.reactivate": "a deactivated member reactivated by an owner (target: its e-mail)",
    "service_account.create": "a service account created (target: its name)",
    "scoped_token.create": "a repository-scoped access token made with an API key (target: its id; detail: the "
    "repository ids; never the token)",
    "scoped_token.revoke": "a repository-scoped access token revoked (target: its id)",
    "invite.create": "an invite created (target: the e-mail it is for; never its token)",
    "invite.revoke": "an invite revoked (target: the start of its id)",
    "invite.accept": "an invite used to join (target: the new account's e-mail)",
    "connection.resync": "an owner asked for a connection to be synced now (target: the connection's name)",
    "repo.reindex": "an owner asked for a repository to be re-indexed from the settings page (target: its name)",
    "login.code.sent": "a sign-in code asked for (target: the e-mail typed; sent only if it may sign in)",
    "user.signup": "an account created by its owner (target: its e-mail; detail: password or email-code)",
    "settings.security": "an owner changed the security settings (detail: what they are now)",
    "mail.test": "an owner sent a test mail (target: the recipient; detail: whether it went out)",
    "settings.access": "an owner switched anonymous access (target: the setting; detail: enabled)",
    "insight.create": "an insight saved (target: its id; detail: its name)",
    "insight.read": "an insight's counts read (GET /api/insights/<id>, its CSV, its page; target: its id)",
    "usage.read": "an owner read the usage report (GET /api/usage, its CSV, the usage page; target: the range)",
    "insight.delete": "an insight deleted by its user or an owner (target: its id; detail: its name)",
    "skill.create": "an Ask skill created on the settings page (target: its /command; details: its id and scope)",
    "skill.update": "an Ask skill changed on the settings page (target: its /command; details: its id and scope)",
    "skill.delete": "an Ask skill deleted by its user, its creator or an owner (target: its /command; detail: its id)",
    "search.assist": "a search-assist request: a description turned into a query by the language model "
    "(target: the description; detail: whether the query parses)",
}
