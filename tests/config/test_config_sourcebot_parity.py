"""Our config schema accepts exactly the documents Sourcebot's v3 schema accepts (differential).

Every row of `ROWS` is a config document with the verdict Sourcebot gives it, written by hand
with the rule it follows. Each row is validated three ways, and all three must agree:

* the hand-written verdict (the specification, readable here);
* Sourcebot's own schema files, copied under ``tests/data/sourcebot_schemas_v3/`` (MIT; the
  README there names the source files: ``connection.json`` from commit ``02e3c0e6`` (after
  v5.1.3), ``languageModel.json`` and ``index.json`` from commit ``0baabcba``; no tagged v5.1.9
  copy was available, these are the newest stored versions);
* codesearch's schema (`codesearch.config.validator`), the one ``codesearch config validate`` uses.

`identityProviders` is left out of the copied files (see the README); `IDP_ROWS` checks it by
hand against Sourcebot's ``schemas/v3/identityProvider.json``, with one deliberate difference: a
provider kind newer than codesearch is accepted with a warning (`test_identity_providers_as_sourcebot_checks_them`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from codesearch.config import load_config
from codesearch.errors import ConfigError
from codesearch.config import validator as our_validator

SOURCEBOT_DIR = Path(__file__).parents[1] / "data" / "sourcebot_schemas_v3"
BASE = "https://sourcebot.invalid/schemas/v3/"


def sourcebot_validator() -> Draft7Validator:
    """Sourcebot's index.json with its relative $refs resolved among the copied files (no network)."""
    resources = [(BASE + p.name, Resource.from_contents(json.loads(p.read_text()), default_specification=DRAFT7))
                 for p in SOURCEBOT_DIR.glob("*.json")]
    return Draft7Validator({"$ref": BASE + "index.json"}, registry=Registry().with_resources(resources))


THEIRS = sourcebot_validator()
OURS = our_validator()

ENV = {"env": "TOKEN"}
GCS = {"googleCloudSecret": "projects/p/secrets/s/versions/1"}
REVS = {"branches": ["main", "release/*"], "tags": ["v*"]}
PERMS = {"enforcePermissions": True, "enforcePermissionsForPublicRepos": False}
MODALITIES = {"inputModalities": ["text", "image", "audio", "video"], "supportedDocumentTypes": ["pdf"]}
HEADERS = {"headers": {"X-Team": "search", "X-Key": ENV}}


def conn(**fields) -> dict:
    return {"connections": {"c": fields}}


def model(**fields) -> dict:
    return {"models": [fields]}


ACCEPT, REJECT = True, False

# (id, document, Sourcebot's verdict)  # the rule the verdict follows
ROWS: list[tuple[str, dict, bool]] = [
    # ---------------------------------------------------------------- top level
    ("empty", {}, ACCEPT),
    ("schema-key", {"$schema": "https://example.com/schemas/v3/index.json"}, ACCEPT),
    ("schema-key-not-string", {"$schema": 3}, REJECT),  # $schema: type string
    ("unknown-top-level-key", {"repos": []}, REJECT),  # root additionalProperties false
    ("settings-every-field", {"settings": {
        "maxFileSize": 1, "maxTrigramCount": 2, "reindexIntervalMs": 3, "resyncConnectionIntervalMs": 4,
        "resyncConnectionPollingIntervalMs": 5, "reindexRepoPollingIntervalMs": 6, "maxConnectionSyncJobConcurrency": 7,
        "maxRepoIndexingJobConcurrency": 8, "maxRepoGarbageCollectionJobConcurrency": 9,
        "repoGarbageCollectionGracePeriodMs": 10, "repoIndexTimeoutMs": 11, "enablePublicAccess": True,
        "repoDrivenPermissionSyncIntervalMs": 12, "userDrivenPermissionSyncIntervalMs": 13,
        "experiment_repoDrivenPermissionSyncIntervalMs": 14, "experiment_userDrivenPermissionSyncIntervalMs": 15,
        "maxAccountPermissionSyncJobConcurrency": 16, "maxRepoPermissionSyncJobConcurrency": 17}}, ACCEPT),
    ("settings-fractional", {"settings": {"maxFileSize": 1.5}}, ACCEPT),  # type number, not integer
    ("settings-zero", {"settings": {"maxFileSize": 0}}, REJECT),  # minimum 1
    ("settings-string-number", {"settings": {"maxFileSize": "1"}}, REJECT),  # type number
    ("settings-unknown", {"settings": {"maxShardSize": 1}}, REJECT),  # Settings additionalProperties false
    ("contexts-every-field", {"contexts": {"web_1-x": {
        "include": ["github.com/acme/**"], "includeConnections": ["c"], "exclude": ["github.com/acme/old"],
        "excludeConnections": ["d"], "includeTopics": ["backend"], "excludeTopics": ["archived-*"],
        "description": "Web"}}}, ACCEPT),
    ("contexts-empty-context", {"contexts": {"all": {}}}, ACCEPT),  # SearchContext has no required list
    ("contexts-bad-name", {"contexts": {"my context": {}}}, REJECT),  # name pattern ^[a-zA-Z0-9_-]+$
    ("contexts-unknown-field", {"contexts": {"x": {"repos": ["a"]}}}, REJECT),  # additionalProperties false
    ("overrides-every-type", {"environmentOverrides": {
        "A_TOKEN": {"type": "token", "value": ENV}, "B": {"type": "string", "value": "x"},
        "C": {"type": "number", "value": 8}, "D": {"type": "boolean", "value": False}}}, ACCEPT),
    ("overrides-config-path", {"environmentOverrides": {"CONFIG_PATH": {"type": "string", "value": "/x"}}},
     REJECT),  # not: anyOf required CONFIG_PATH
    ("overrides-type-mismatch", {"environmentOverrides": {"B": {"type": "string", "value": 1}}}, REJECT),  # oneOf
    ("overrides-literal-token", {"environmentOverrides": {"T": {"type": "token", "value": "sk-123"}}}, REJECT),
    ("overrides-name-outside-pattern", {"environmentOverrides": {"MY.VAR": 42}},
     ACCEPT),  # patternProperties only; environmentOverrides has no additionalProperties: false
    ("apps-github-app", {"apps": [{"type": "github", "id": "123", "privateKey": ENV,
                                   "deploymentHostname": "github.example.com"}]}, ACCEPT),
    ("apps-unknown-type", {"apps": [{"type": "githubApp", "id": "123", "privateKey": ENV}]}, REJECT),  # const github
    ("apps-missing-private-key", {"apps": [{"type": "github", "id": "123"}]}, REJECT),  # required privateKey
    ("apps-not-an-array", {"apps": {"type": "github", "id": "1", "privateKey": ENV}}, REJECT),  # type array
    ("models-empty", {"models": []}, ACCEPT),
    ("models-not-an-array", {"models": {"provider": "openai", "model": "gpt-4o"}}, REJECT),  # type array
    # ---------------------------------------------------------------- connections (common)
    ("connection-name-with-dot", {"connections": {"my.conn": {"type": "github"}}}, REJECT),  # name pattern
    ("connection-without-type", conn(url="https://github.com"), REJECT),  # every kind requires type
    ("connection-unknown-type", conn(type="svn"), REJECT),  # type is one of seven consts
    # ---------------------------------------------------------------- github
    ("github-minimal", conn(type="github"), ACCEPT),
    ("github-every-field", conn(type="github", token=ENV, url="https://github.example.com", users=["torvalds", "a.b-c_d"],
                                orgs=["acme"], repos=["acme/api", "me/dot.files"], topics=["docs"],
                                exclude={"forks": True, "archived": True, "private": True, "repos": ["acme/old-*"],
                                         "topics": ["ci"], "size": {"min": 1000, "max": 100000000}},
                                revisions=REVS, **PERMS), ACCEPT),
    ("github-exclude-private", conn(type="github", orgs=["acme"], exclude={"private": True}), ACCEPT),
    ("github-google-cloud-secret", conn(type="github", token=GCS), ACCEPT),
    ("github-literal-token", conn(type="github", token="ghp_123"), REJECT),  # Token is an object reference
    ("github-token-both-forms", conn(type="github", token={**ENV, **GCS}), REJECT),  # each form: additionalProperties false
    ("github-repo-without-owner", conn(type="github", repos=["api"]), REJECT),  # pattern owner/name
    ("github-org-with-space", conn(type="github", orgs=["my org"]), REJECT),  # pattern ^[\w.-]+$
    ("github-topics-empty", conn(type="github", topics=[]), REJECT),  # minItems 1
    ("github-size-fractional", conn(type="github", exclude={"size": {"min": 1.5}}), REJECT),  # integer
    ("github-url-ftp", conn(type="github", url="ftp://github.example.com"), REJECT),  # url pattern
    ("github-url-one-char-host", conn(type="github", url="http://a"), REJECT),  # pattern needs two characters
    ("github-url-two-char-host", conn(type="github", url="http://ab"), ACCEPT),
    ("github-url-with-space", conn(type="github", url="https://exa mple.com"), REJECT),  # [^\s]*
    ("github-web-url", conn(type="github", webUrl="https://github.com"), REJECT),  # only gitlab has webUrl
    # ---------------------------------------------------------------- gitlab
    ("gitlab-minimal", conn(type="gitlab"), ACCEPT),
    ("gitlab-every-field", conn(type="gitlab", token=ENV, url="https://api.gitlab.example.com",
                                webUrl="https://gitlab.example.com", all=True, users=["me"], groups=["eng/sub"],
                                projects=["eng/api"], topics=["docs"],
                                exclude={"forks": True, "archived": True, "userOwnedProjects": True,
                                         "projects": ["eng/old-*"], "topics": ["ci"]},
                                revisions=REVS, **PERMS), ACCEPT),
    ("gitlab-web-url", conn(type="gitlab", webUrl="https://gitlab.example.com"), ACCEPT),
    ("gitlab-web-url-not-a-url", conn(type="gitlab", webUrl="gitlab.example.com"), REJECT),  # url pattern
    ("gitlab-exclude-size", conn(type="gitlab", exclude={"size": {"min": 1}}), REJECT),  # exclude has no size
    ("gitlab-min-access-level", conn(type="gitlab", minAccessLevel=30), REJECT),  # no such field
    ("gitlab-topics-empty", conn(type="gitlab", topics=[]), REJECT),  # minItems 1
    ("gitlab-group-any-string", conn(type="gitlab", groups=["My Group/with space"]), ACCEPT),  # no pattern
    # ---------------------------------------------------------------- gitea
    ("gitea-every-field", conn(type="gitea", token=ENV, url="https://gitea.example.com", orgs=["acme"],
                               repos=["acme/api"], users=["me"],
                               exclude={"forks": True, "archived": True, "repos": ["acme/old"]},
                               revisions=REVS, **PERMS), ACCEPT),
    ("gitea-repo-three-parts", conn(type="gitea", repos=["a/b/c"]), REJECT),  # pattern owner/name
    ("gitea-exclude-topics", conn(type="gitea", exclude={"topics": ["x"]}), REJECT),  # not a gitea filter
    # ---------------------------------------------------------------- gerrit
    ("gerrit-minimal", conn(type="gerrit", url="https://gerrit.example.com"), ACCEPT),
    ("gerrit-every-field", conn(type="gerrit", url="https://gerrit.example.com", projects=["core/**"],
                                exclude={"projects": ["core/old"], "readOnly": True, "hidden": True},
                                revisions=REVS, **PERMS), ACCEPT),
    ("gerrit-without-url", conn(type="gerrit"), REJECT),  # required url
    ("gerrit-with-token", conn(type="gerrit", url="https://gerrit.example.com", token=ENV), REJECT),  # no token
    # ---------------------------------------------------------------- bitbucket
    ("bitbucket-cloud-explicit", conn(type="bitbucket", deploymentType="cloud", user="me", token=ENV,
                                      workspaces=["ws"]), ACCEPT),
    ("bitbucket-no-deployment-type-no-url", conn(type="bitbucket", workspaces=["ws"]),
     REJECT),  # if {properties: deploymentType const server} holds vacuously when it is absent: then url required
    ("bitbucket-no-deployment-type-with-url", conn(type="bitbucket", url="https://api.bitbucket.org/2.0",
                                                   workspaces=["ws"]), ACCEPT),
    ("bitbucket-server-with-url", conn(type="bitbucket", deploymentType="server", url="https://bb.example.com",
                                       projects=["PROJ"]), ACCEPT),
    ("bitbucket-server-without-url", conn(type="bitbucket", deploymentType="server"), REJECT),  # then: required url
    ("bitbucket-every-field", conn(type="bitbucket", user="me", gitUser="git-me", token=ENV,
                                   url="https://bb.example.com", deploymentType="server", all=True, workspaces=["ws"],
                                   projects=["PROJ"], repos=["PROJ/repo"],
                                   exclude={"archived": True, "forks": True, "repos": ["PROJ/old"]},
                                   revisions=REVS, **PERMS), ACCEPT),
    ("bitbucket-data-center", conn(type="bitbucket", deploymentType="datacenter", url="https://bb.example.com"),
     REJECT),  # enum cloud|server
    # ---------------------------------------------------------------- azuredevops
    ("ado-minimal", conn(type="azuredevops", token=ENV, deploymentType="cloud"), ACCEPT),
    ("ado-without-token", conn(type="azuredevops", deploymentType="cloud"), REJECT),  # required token
    ("ado-without-deployment-type", conn(type="azuredevops", token=ENV), REJECT),  # required deploymentType
    ("ado-project-with-spaces", conn(type="azuredevops", token=ENV, deploymentType="cloud",
                                     projects=["org/My Project"]), ACCEPT),
    ("ado-repo-with-spaces", conn(type="azuredevops", token=ENV, deploymentType="cloud",
                                  repos=["org/My Project/my repo"]), ACCEPT),  # repo part allows spaces too
    ("ado-repo-two-parts", conn(type="azuredevops", token=ENV, deploymentType="cloud", repos=["org/proj"]),
     REJECT),  # org/project/repo
    ("ado-org-with-space", conn(type="azuredevops", token=ENV, deploymentType="cloud", orgs=["my org"]),
     REJECT),  # orgs pattern has no space
    ("ado-every-field", conn(type="azuredevops", token=ENV, url="https://ado.example.com", deploymentType="server",
                             useTfsPath=True, orgs=["coll"], projects=["coll/proj"], repos=["coll/proj/repo"],
                             exclude={"disabled": True, "repos": ["proj/old"], "projects": ["old*"],
                                      "size": {"min": 1, "max": 2}},
                             revisions=REVS, **PERMS), ACCEPT),
    # ---------------------------------------------------------------- git
    ("git-https", conn(type="git", url="https://github.com/acme/api", revisions=REVS, **PERMS), ACCEPT),
    ("git-local-glob", conn(type="git", url="file:///srv/repos/*"), ACCEPT),
    ("git-local-two-slashes", conn(type="git", url="file://srv/repos"), REJECT),  # file:/// then a path
    ("git-without-url", conn(type="git"), REJECT),  # required url
    ("git-with-token", conn(type="git", url="https://github.com/acme/api", token=ENV), REJECT),  # no token
    # ---------------------------------------------------------------- models, every provider, every field
    ("bedrock-every-field", model(provider="amazon-bedrock", model="anthropic.claude-3-7-sonnet", displayName="Bedrock",
                                  accessKeyId=ENV, accessKeySecret=ENV, sessionToken=ENV, region="us-east-1",
                                  baseUrl="https://bedrock.example.com", temperature=0.1, **HEADERS, **MODALITIES), ACCEPT),
    ("bedrock-token", model(provider="amazon-bedrock", model="m", token=ENV), REJECT),  # Bedrock has no token
    ("anthropic-every-field", model(provider="anthropic", model="claude-sonnet-4-5", displayName="Claude", token=ENV,
                                    authToken=ENV, baseUrl="https://api.anthropic.com", temperature=0.2,
                                    **HEADERS, **MODALITIES), ACCEPT),
    ("anthropic-auth-token", model(provider="anthropic", model="claude-sonnet-4-5", authToken=ENV), ACCEPT),
    ("anthropic-reasoning-effort", model(provider="anthropic", model="m", reasoningEffort="high"), REJECT),
    ("azure-every-field", model(provider="azure", model="gpt-4o-deployment", displayName="Azure",
                                resourceName="res", token=ENV, apiVersion="preview",
                                baseUrl="https://res.openai.azure.com/openai", reasoningEffort="low",
                                reasoningSummary="auto", temperature=0.3, **HEADERS, **MODALITIES), ACCEPT),
    ("deepseek-every-field", model(provider="deepseek", model="deepseek-chat", displayName="DS", token=ENV,
                                   baseUrl="https://api.deepseek.com/v1", temperature=0.4, **HEADERS, **MODALITIES), ACCEPT),
    ("gemini-every-field", model(provider="google-generative-ai", model="gemini-2.5-pro", displayName="Gemini",
                                 token=ENV, baseUrl="https://generativelanguage.googleapis.com/v1beta",
                                 thinkingLevel="high", thinkingBudget=2048, temperature=0.5, **HEADERS, **MODALITIES),
     ACCEPT),
    ("gemini-dynamic-thinking", model(provider="google-generative-ai", model="gemini-2.5-flash", thinkingBudget=-1),
     ACCEPT),  # integer, no minimum
    ("gemini-thinking-level-max", model(provider="google-generative-ai", model="m", thinkingLevel="max"),
     REJECT),  # enum minimal|low|medium|high
    ("gemini-thinking-budget-fractional", model(provider="google-generative-ai", model="m", thinkingBudget=1.5),
     REJECT),  # integer
    ("vertex-anthropic-every-field", model(provider="google-vertex-anthropic", model="claude-sonnet-4", displayName="VA",
                                           project="p", region="us-east5", credentials=GCS,
                                           baseUrl="https://vertex.example.com", temperature=0.6,
                                           **HEADERS, **MODALITIES), ACCEPT),
    ("vertex-anthropic-thinking", model(provider="google-vertex-anthropic", model="m", thinkingBudget=1024),
     REJECT),  # only the Gemini providers have thinking fields
    ("vertex-every-field", model(provider="google-vertex", model="gemini-2.5-pro", displayName="Vertex", project="p",
                                 region="us-central1", credentials=ENV, baseUrl="https://vertex.example.com",
                                 thinkingLevel="low", thinkingBudget=0, temperature=0.7, **HEADERS, **MODALITIES), ACCEPT),
    ("mistral-every-field", model(provider="mistral", model="mistral-large-latest", displayName="Mistral", token=ENV,
                                  baseUrl="https://api.mistral.ai/v1", temperature=0.8, **HEADERS, **MODALITIES), ACCEPT),
    ("openai-every-field", model(provider="openai", model="o4-mini", displayName="o4", token=ENV,
                                 baseUrl="https://api.openai.com/v1", reasoningEffort="minimal",
                                 reasoningSummary="detailed", temperature=0.9, **HEADERS, **MODALITIES), ACCEPT),
    ("openai-reasoning-effort-free-text", model(provider="openai", model="o3", reasoningEffort="turbo"),
     ACCEPT),  # a string with examples, not an enum
    ("openai-thinking-budget", model(provider="openai", model="o3", thinkingBudget=100), REJECT),
    ("openai-query-params", model(provider="openai", model="o3", queryParams={"a": "b"}), REJECT),  # compatible only
    ("openai-compatible-every-field", model(provider="openai-compatible", model="llama3", displayName="Llama", token=ENV,
                                           baseUrl="http://localhost:8080/v1", queryParams={"api-version": "1", "k": ENV},
                                           reasoningTag="thinking", temperature=1.0, **HEADERS, **MODALITIES), ACCEPT),
    ("openai-compatible-without-base-url", model(provider="openai-compatible", model="llama3"), REJECT),
    ("openrouter-every-field", model(provider="openrouter", model="anthropic/claude-3.5", displayName="OR", token=ENV,
                                     baseUrl="https://openrouter.ai/api/v1", temperature=1.1, **HEADERS, **MODALITIES),
     ACCEPT),
    ("xai-every-field", model(provider="xai", model="grok-beta", displayName="Grok", token=ENV,
                              baseUrl="https://api.x.ai/v1", temperature=1.2, **HEADERS, **MODALITIES), ACCEPT),
    ("model-unknown-provider", model(provider="ollama", model="llama3"), REJECT),  # oneOf of twelve consts
    ("model-without-model", model(provider="openai"), REJECT),  # required model
    ("model-unknown-modality", model(provider="openai", model="m", inputModalities=["smell"]), REJECT),  # enum
    ("model-unknown-document-type", model(provider="openai", model="m", supportedDocumentTypes=["docx"]), REJECT),
    ("model-header-name-with-space", model(provider="openai", model="m", headers={"X Bad": "1"}), REJECT),
    ("model-header-number", model(provider="openai", model="m", headers={"X-N": 1}), REJECT),  # string or Token
    ("model-temperature-string", model(provider="openai", model="m", temperature="hot"), REJECT),  # number
    ("model-temperature-negative", model(provider="openai", model="m", temperature=-1), ACCEPT),  # no minimum
    ("model-base-url-without-scheme", model(provider="openai", model="m", baseUrl="localhost:8080"), REJECT),
]


def test_the_table_is_large_and_ids_are_unique():
    ids = [r[0] for r in ROWS]
    assert len(ids) == len(set(ids)) and len(ids) >= 60
    assert sum(1 for r in ROWS if r[2]) >= 25 and sum(1 for r in ROWS if not r[2]) >= 25
    assert not any("identityProviders" in doc for _, doc, _ in ROWS)  # not in the copied reference


@pytest.mark.parametrize("doc,verdict", [(d, v) for _, d, v in ROWS], ids=[r[0] for r in ROWS])
def test_sourcebot_and_codesearch_agree(doc, verdict):
    assert THEIRS.is_valid(doc) is verdict, f"Sourcebot's schema: {[e.message for e in THEIRS.iter_errors(doc)][:3]}"
    assert OURS.is_valid(doc) is verdict, f"ours: {[e.message for e in OURS.iter_errors(doc)][:3]}"


def test_every_connection_kind_and_provider_is_covered():
    kinds = {d["connections"]["c"].get("type") for _, d, v in ROWS if v and "connections" in d and "c" in d["connections"]}
    assert kinds == {"github", "gitlab", "gitea", "gerrit", "bitbucket", "azuredevops", "git"}
    providers = {d["models"][0]["provider"] for _, d, v in ROWS if v and d.get("models")}
    theirs = {p["properties"]["provider"]["const"] for p in
              json.loads((SOURCEBOT_DIR / "languageModel.json").read_text())["definitions"].values()}
    assert providers == theirs and len(theirs) == 12


def test_every_field_of_every_kind_is_exercised():
    """Each property Sourcebot defines for a connection kind or a provider appears in an accepted row."""
    seen: dict[str, set] = {}
    for _, doc, verdict in ROWS:
        if not verdict:
            continue
        for c in (doc.get("connections") or {}).values():
            seen.setdefault(c["type"], set()).update(c)
        for m in doc.get("models") or ():
            seen.setdefault(m["provider"], set()).update(m)
    for branch in json.loads((SOURCEBOT_DIR / "connection.json").read_text())["oneOf"]:
        kind = branch["properties"]["type"]["const"]
        assert set(branch["properties"]) <= seen[kind], (kind, set(branch["properties"]) - seen[kind])
    for definition in json.loads((SOURCEBOT_DIR / "languageModel.json").read_text())["definitions"].values():
        provider = definition["properties"]["provider"]["const"]
        assert set(definition["properties"]) <= seen[provider], (provider, set(definition["properties"]) - seen[provider])


# identityProviders, by hand from Sourcebot's schemas/v3/identityProvider.json (not copied): each
# entry Sourcebot accepts loads here, what it refuses is refused, and a provider kind newer than
# codesearch is accepted with a warning rather than refusing the whole file.
IDP_ROWS = [
    # (name, section, accepted, warning fragment)
    ("github-sso", [{"provider": "github", "purpose": "sso", "clientId": ENV, "clientSecret": ENV}], True, None),
    ("github-linking-ghe", [{"provider": "github", "purpose": "account_linking", "clientId": ENV, "clientSecret": ENV,
                             "baseUrl": "https://github.example.com", "accountLinkingRequired": False}], True, None),
    ("gitlab-sso", [{"provider": "gitlab", "purpose": "sso", "clientId": ENV, "clientSecret": ENV}], True, None),
    ("google-sso", [{"provider": "google", "purpose": "sso", "clientId": ENV, "clientSecret": ENV}], True, None),
    ("okta-issuer-token", [{"provider": "okta", "purpose": "sso", "clientId": ENV, "clientSecret": ENV, "issuer": ENV}], True, None),
    ("keycloak", [{"provider": "keycloak", "purpose": "sso", "clientId": ENV, "clientSecret": ENV, "issuer": ENV}], True, None),
    ("entra", [{"provider": "microsoft-entra-id", "purpose": "sso", "clientId": ENV, "clientSecret": ENV, "issuer": ENV}], True, None),
    ("authentik", [{"provider": "authentik", "purpose": "sso", "clientId": ENV, "clientSecret": ENV, "issuer": ENV}], True, None),
    ("gcp-iap", [{"provider": "gcp-iap", "purpose": "sso", "audience": ENV}], True, None),
    ("gcp-iap-no-audience", [{"provider": "gcp-iap", "purpose": "sso"}], False, None),
    ("gcp-iap-client-id", [{"provider": "gcp-iap", "purpose": "sso", "audience": ENV, "clientId": ENV}], False, None),
    ("bitbucket-server", [{"provider": "bitbucket-server", "purpose": "account_linking", "clientId": ENV,
                           "clientSecret": ENV, "baseUrl": "https://bb.example.com"}], True, None),
    ("bitbucket-server-no-base-url", [{"provider": "bitbucket-server", "purpose": "sso", "clientId": ENV,
                                       "clientSecret": ENV}], False, None),
    ("bitbucket-cloud", [{"provider": "bitbucket-cloud", "purpose": "sso", "clientId": ENV, "clientSecret": ENV,
                          "accountLinkingRequired": False}], True, None),
    ("newer-kind", [{"provider": "idira", "purpose": "sso", "anything": 1}], True, 'provider "idira" is not known'),
    # the map form, keyed by id (Sourcebot's schema takes a map or an array; the map is its canonical form)
    ("map-keyed-by-id", {"corp-sso": {"provider": "okta", "purpose": "sso", "clientId": ENV, "clientSecret": ENV,
                                      "issuer": ENV},
                         "GitHub_2": {"provider": "github", "purpose": "account_linking", "clientId": ENV,
                                      "clientSecret": ENV}}, True, None),
    ("map-empty", {}, True, None),
    ("map-bad-key", {"corp sso": {"provider": "github", "purpose": "sso", "clientId": ENV, "clientSecret": ENV}},
     False, None),
    ("map-entry-refused", {"corp": {"provider": "github", "purpose": "sso", "clientId": ENV}}, False, None),
    ("map-newer-kind", {"idira": {"provider": "idira", "purpose": "sso"}}, True, 'provider "idira" is not known'),
    ("github-no-secret", [{"provider": "github", "purpose": "sso", "clientId": ENV}], False, None),
    ("google-linking", [{"provider": "google", "purpose": "account_linking", "clientId": ENV, "clientSecret": ENV}], False, None),
    ("okta-no-issuer", [{"provider": "okta", "purpose": "sso", "clientId": ENV, "clientSecret": ENV}], False, None),
    ("github-unknown-field", [{"provider": "github", "purpose": "sso", "clientId": ENV, "clientSecret": ENV, "x": 1}], False, None),
    ("github-bad-purpose", [{"provider": "github", "purpose": "login", "clientId": ENV, "clientSecret": ENV}], False, None),
]


@pytest.mark.parametrize("section,accepted,warning", [r[1:] for r in IDP_ROWS], ids=[r[0] for r in IDP_ROWS])
def test_identity_providers_as_sourcebot_checks_them(section, accepted, warning):
    doc = {"identityProviders": section}
    assert OURS.is_valid(doc) is accepted, [e.message for e in OURS.iter_errors(doc)][:3]
    if accepted:
        config = load_config(json.dumps(doc), environ={})
        assert [w for w in config.warnings if warning and warning in w] or (warning is None and not config.warnings)
        if isinstance(section, dict):  # the map's keys are the ids, verbatim
            assert [p.id for p in config.identity_providers] == [k for k, e in section.items() if e["provider"] != "idira"]


@pytest.mark.parametrize("section, problem", [
    ({"okta": {"provider": "okta", "purpose": "sso", "clientId": ENV, "clientSecret": ENV, "issuer": ENV, "id": "corp"}},
     'identityProviders.okta.id: "corp" differs from its key "okta"'),
    ({"o" * 256: {"provider": "github", "purpose": "sso", "clientId": ENV, "clientSecret": ENV}},
     "an id is at most 255 characters"),
])
def test_identity_provider_map_ids_that_cannot_be(section, problem):
    with pytest.raises(ConfigError, match=re.escape(problem)):
        load_config(json.dumps({"identityProviders": section}), environ={})
