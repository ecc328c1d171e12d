"""How permission syncing names a code host: one key shared by connections and linked accounts.

A grant says "account `subject` on host `H` may read repository R". Connections (which list the
repositories) and identity providers (which link accounts) must agree on `H`, so both derive it
here: ``<kind>:<scheme>://<host>[:port][/path]`` of the host's *web* address, lower-cased, without
a trailing slash, e.g. ``github:https://github.com``, ``gitlab:https://gitlab.example.com``,
``bitbucketCloud:https://bitbucket.org``. A connection to Bitbucket Cloud's API address
(``https://api.bitbucket.org/2.0``) and a provider that names ``https://bitbucket.org`` get the
same key.
"""

from __future__ import annotations

from urllib.parse import urlsplit

#: The web address of each kind's public service, when the config leaves `url` out.
DEFAULT_WEB_URLS = {
    "github": "https://github.com",
    "gitlab": "https://gitlab.com",
    "gitea": "https://gitea.com",
    "bitbucketCloud": "https://bitbucket.org",
}

#: Connection kinds whose permissions can be synced (the value is the key's kind).
SYNCABLE_KINDS = ("github", "gitlab", "gitea", "bitbucketCloud", "bitbucketServer")


def normalize_web_url(url: str) -> str:
    """`url` as keys use it: lower-case scheme and host, default ports and trailing slashes dropped,
    Bitbucket Cloud's and GitHub's API hosts read as their web hosts."""
    parts = urlsplit(url.strip())
    scheme = (parts.scheme or "https").lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    path = parts.path.rstrip("/")
    if host == "api.bitbucket.org":
        host, path = "bitbucket.org", ""
    if host == "api.github.com":
        host, path = "github.com", ""
    if path.endswith("/api/v3") or path.endswith("/api/v4") or path.endswith("/api/v1"):
        path = path[:-7]
    if path.endswith("/rest/api/1.0"):
        path = path[: -len("/rest/api/1.0")]
    netloc = host if port in (None, 80 if scheme == "http" else 443) else f"{host}:{port}"
    return f"{scheme}://{netloc}{path}"


def host_key(kind: str, url: str | None) -> str:
    """The key of a code host of `kind` (a connection's `code_host_type`, e.g. ``github``,
    ``bitbucketServer``) at `url` (its configured address; None: the kind's public service)."""
    url = url or DEFAULT_WEB_URLS.get(kind)
    if not url:
        raise ValueError(f"a {kind} host needs a url")
    return f"{kind}:{normalize_web_url(url)}"
