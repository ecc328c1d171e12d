"""Typed views of a validated config file (pydantic v2), defaults of docs/configuration.md applied.

Every model is built by `codesearch.config.loader.load_config` from a document the schema has
already accepted, so the models do not re-check what the schema checks. Secrets are never held
here: a `Token` is only a reference (an environment variable's name or a secret's resource
name); its value is read by `resolve_token` when someone needs it. Reprs leave out the raw
documents, header values and environment override values, which may hold sensitive strings.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from codesearch import defaults

#: `url` of each connection kind when the file leaves it out (docs/configuration.md#connection-kinds).
DEFAULT_URLS = {
    "github": "https://github.com",
    "gitlab": "https://gitlab.com",
    "gitea": "https://gitea.com",
    "bitbucket": "https://api.bitbucket.org/2.0",
    "azuredevops": "https://dev.azure.com",
}

#: Connection `type` values, in the order of connection.json.
CONNECTION_TYPES = ("github", "gitlab", "gitea", "gerrit", "bitbucket", "azuredevops", "git")

Number = int | float


class Token(BaseModel):
    """A token reference: exactly one of `env` and `google_cloud_secret` is set."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    env: str | None = None
    google_cloud_secret: str | None = Field(default=None, alias="googleCloudSecret")

    @property
    def kind(self) -> Literal["env", "googleCloudSecret"]:
        return "env" if self.env is not None else "googleCloudSecret"

    def to_dict(self) -> dict[str, str]:
        """The reference as written in the file: ``{"env": NAME}`` or ``{"googleCloudSecret": NAME}``."""
        return {"env": self.env} if self.env is not None else {"googleCloudSecret": self.google_cloud_secret or ""}

    def __repr__(self) -> str:
        return (
            f"Token(env={self.env!r})"
            if self.env is not None
            else f"Token(googleCloudSecret={self.google_cloud_secret!r})"
        )

    __str__ = __repr__


class Settings(BaseModel):
    """`settings`, every field defaulted as in docs/configuration.md#settings (attribute names are snake_case)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    max_file_size: Number = Field(default=defaults.MAX_FILE_SIZE, alias="maxFileSize")
    max_trigram_count: Number = Field(default=defaults.MAX_TRIGRAM_COUNT, alias="maxTrigramCount")
    reindex_interval_ms: Number = Field(default=3600000, alias="reindexIntervalMs")
    resync_connection_interval_ms: Number = Field(default=86400000, alias="resyncConnectionIntervalMs")
    resync_connection_polling_interval_ms: Number = Field(default=1000, alias="resyncConnectionPollingIntervalMs")
    reindex_repo_polling_interval_ms: Number = Field(default=1000, alias="reindexRepoPollingIntervalMs")
    max_connection_sync_job_concurrency: Number = Field(default=8, alias="maxConnectionSyncJobConcurrency")
    max_repo_indexing_job_concurrency: Number = Field(default=8, alias="maxRepoIndexingJobConcurrency")
    max_repo_garbage_collection_job_concurrency: Number = Field(
        default=8, alias="maxRepoGarbageCollectionJobConcurrency"
    )
    repo_garbage_collection_grace_period_ms: Number = Field(default=10000, alias="repoGarbageCollectionGracePeriodMs")
    repo_index_timeout_ms: Number = Field(default=defaults.REPO_INDEX_TIMEOUT_MS, alias="repoIndexTimeoutMs")
    #: Deprecated (FORCE_ENABLE_ANONYMOUS_ACCESS replaces it); `apply_environment_overrides` maps it.
    enable_public_access: bool = Field(default=False, alias="enablePublicAccess")
    #: Falls back to the deprecated `experiment_repoDrivenPermissionSyncIntervalMs`.
    repo_driven_permission_sync_interval_ms: Number = Field(
        default=86400000, alias="repoDrivenPermissionSyncIntervalMs"
    )
    #: Falls back to the deprecated `experiment_userDrivenPermissionSyncIntervalMs`.
    user_driven_permission_sync_interval_ms: Number = Field(
        default=86400000, alias="userDrivenPermissionSyncIntervalMs"
    )
    max_account_permission_sync_job_concurrency: Number = Field(
        default=8, alias="maxAccountPermissionSyncJobConcurrency"
    )
    max_repo_permission_sync_job_concurrency: Number = Field(default=8, alias="maxRepoPermissionSyncJobConcurrency")


class SearchContext(BaseModel):
    """One entry of `contexts` (docs/configuration.md#search-contexts); lists default to empty."""

    model_config = ConfigDict(populate_by_name=True, frozen=True)

    name: str
    include: list[str] = Field(default_factory=list)
    include_connections: list[str] = Field(default_factory=list, alias="includeConnections")
    exclude: list[str] = Field(default_factory=list)
    exclude_connections: list[str] = Field(default_factory=list, alias="excludeConnections")
    include_topics: list[str] = Field(default_factory=list, alias="includeTopics")
    exclude_topics: list[str] = Field(default_factory=list, alias="excludeTopics")
    description: str | None = None


class EnvironmentOverride(BaseModel):
    """One entry of `environmentOverrides`. `value` is a `Token` when `type` is "token"."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    type: Literal["token", "string", "number", "boolean"]
    value: Any = Field(repr=False)

    def __repr__(self) -> str:
        shown = repr(self.value) if self.type == "token" else "…"
        return f"EnvironmentOverride(name={self.name!r}, type={self.type!r}, value={shown})"


class Revisions(BaseModel):
    model_config = ConfigDict(frozen=True)

    branches: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)


class Connection(BaseModel):
    """One entry of `connections`.

    The common fields are typed, with defaults applied; everything else is read from `raw`, the
    connection's JSON object exactly as written and validated (no defaults filled in), which is
    what the host adapters take: ``conn.raw`` or ``conn.get("orgs")``.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    type: str
    #: The configured URL, else the kind's default (None for `gerrit`/`git`, where it is required anyway).
    url: str | None = None
    token: Token | None = None
    revisions: Revisions = Field(default_factory=Revisions)
    #: bitbucket / azuredevops: "cloud" or "server" (bitbucket defaults to "cloud"); None for other kinds.
    deployment_type: str | None = None
    #: Effective: PERMISSION_SYNC_ENABLED is true and `enforcePermissions` is not false
    #: (docs/permissions.md#turning-it-on).
    enforce_permissions: bool = False
    enforce_permissions_for_public_repos: bool = False
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)

    def get(self, key: str, default: Any = None) -> Any:
        """A field of the raw connection object, `default` when the file leaves it out."""
        return self.raw.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __contains__(self, key: object) -> bool:
        return key in self.raw

    @property
    def code_host_type(self) -> str:
        """The `codeHostType` (docs/configuration.md#connection-kinds) of this connection's repositories."""
        if self.type == "bitbucket":
            return "bitbucketServer" if self.deployment_type == "server" else "bitbucketCloud"
        return "genericGitHost" if self.type == "git" else self.type

    @property
    def web_address(self) -> str | None:
        """Where people browse the host: GitLab's `webUrl` when set (its API may be reached at
        another address), else `url`. Permission syncing keys hosts by it, as sign-in does."""
        web = self.raw.get("webUrl")
        return web if isinstance(web, str) and web else self.url

    @property
    def is_local(self) -> bool:
        """A `git` connection on local repositories (``file:///…``)."""
        return self.type == "git" and (self.url or "").startswith("file://")


class LanguageModel(BaseModel):
    """One entry of `models` (docs/configuration.md#language-models). Provider-specific fields stay in `raw`."""

    model_config = ConfigDict(frozen=True)

    provider: str
    model: str
    display_name: str | None = None
    base_url: str | None = None
    temperature: float | None = None
    token: Token | None = None
    headers: dict[str, Any] = Field(default_factory=dict, repr=False)
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        """What users see: `displayName`, else `model`."""
        return self.display_name or self.model

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)


#: Identity provider kinds codesearch signs in with (OAuth 2.0 code hosts, then OpenID Connect, then
#: Google Cloud IAP, which has no flow: the proxy in front signs every request, `codesearch.sso.iap`).
CODE_HOST_PROVIDERS = ("github", "gitlab", "gitea", "bitbucket-cloud", "bitbucket-server")
OIDC_PROVIDERS = ("google", "okta", "keycloak", "microsoft-entra-id", "authentik", "jumpcloud", "oidc")
PROXY_PROVIDERS = ("gcp-iap",)
SUPPORTED_PROVIDERS = CODE_HOST_PROVIDERS + OIDC_PROVIDERS + PROXY_PROVIDERS
#: The name on a provider's button when the entry gives no `displayName`.
PROVIDER_NAMES = {
    "github": "GitHub",
    "gitlab": "GitLab",
    "gitea": "Gitea",
    "bitbucket-cloud": "Bitbucket Cloud",
    "bitbucket-server": "Bitbucket Server",
    "google": "Google",
    "okta": "Okta",
    "keycloak": "Keycloak",
    "microsoft-entra-id": "Microsoft Entra ID",
    "authentik": "Authentik",
    "jumpcloud": "JumpCloud",
    "oidc": "OpenID Connect",
    "gcp-iap": "Google Cloud IAP",
}


class IdentityProvider(BaseModel):
    """One supported entry of `identityProviders` (`codesearch.sso` runs its flows).

    `id` names it in URLs (``/api/auth/callback/<id>``) and in stored linked accounts: the
    entry's own ``id``, else its type for the first entry of that type, else ``<type>-<n>`` for
    the n-th (file order). `issuer` is a URL or a `Token` reference to one (Sourcebot writes a
    token); `client_id` / `client_secret` are references, resolved by `loader.resolve_provider_token`.
    A ``gcp-iap`` entry has neither: only its `audience` reference (`codesearch.sso.iap`)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    id: str
    # github, gitlab, gitea, bitbucket-cloud, bitbucket-server, google, okta, … oidc, gcp-iap (SUPPORTED_PROVIDERS)
    provider: str
    purpose: Literal["sso", "integration"]  # Sourcebot's "account_linking" reads as "integration"
    client_id: Token | None = None  # every kind but gcp-iap (the schema requires it)
    client_secret: Token | None = None  # every kind but gcp-iap (the schema requires it)
    #: gcp-iap: the reference to the expected ``aud`` of IAP's signed header
    audience: Token | None = None
    #: code hosts: the web address (default github.com, gitlab.com, gitea.com, bitbucket.org; required for
    #: bitbucket-server), where the OAuth endpoints are
    base_url: str | None = None
    #: bitbucket-cloud: the REST API's address (default https://api.bitbucket.org/2.0 for bitbucket.org,
    #: else ``<base_url>/2.0``); the host key is derived from it, as a Bitbucket Cloud connection's is
    #: from its `url` (an API address)
    api_url: str | None = None
    issuer: str | Token | None = None  # OIDC kinds (google: https://accounts.google.com)
    display_name: str | None = None
    #: accountLinkingRequired (or codesearch's `required`): every signed-in user must have an
    #: account of this provider linked (`codesearch.sso.required`)
    required: bool = False
    index: int | str = 0  # position in the file, or key in the map form (for error paths)

    @property
    def name(self) -> str:
        """What users see on the button."""
        return self.display_name or PROVIDER_NAMES.get(self.provider, self.provider)

    @property
    def is_code_host(self) -> bool:
        return self.provider in CODE_HOST_PROVIDERS

    @property
    def is_proxy(self) -> bool:
        """Signed in by a proxy in front of the service (gcp-iap), not by a flow of ours."""
        return self.provider in PROXY_PROVIDERS

    @property
    def signs_in(self) -> bool:
        return self.purpose == "sso"


class Config(BaseModel):
    """A loaded config file: typed sections with defaults, and the warnings found while loading."""

    model_config = ConfigDict(frozen=False)

    source: str = "<config>"
    #: The file's `$schema`, if any (informational: we validate against our own copy).
    schema_ref: str | None = None
    settings: Settings = Field(default_factory=Settings)
    contexts: dict[str, SearchContext] = Field(default_factory=dict)
    environment_overrides: dict[str, EnvironmentOverride] = Field(default_factory=dict)
    connections: dict[str, Connection] = Field(default_factory=dict)
    models: list[LanguageModel] = Field(default_factory=list)
    #: PERMISSION_SYNC_ENABLED as it is once the file's environment overrides are applied.
    permission_sync: bool = False
    identity_providers: list[IdentityProvider] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)

    @property
    def default_model(self) -> LanguageModel | None:
        """The first configured model, the default of `ask_codebase`; None without models."""
        return self.models[0] if self.models else None
