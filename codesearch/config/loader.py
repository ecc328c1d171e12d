"""Loading a config file: read, parse (comments allowed), validate, type, warn.

    config = load_config("/etc/codesearch/config.json")      # or the JSON text itself
    apply_environment_overrides(config)                      # at start-up, before env is read
    token = resolve_token(config.connections["gh"].raw["token"], connection="gh")

`load_config` reports every problem of the file at once in one `ConfigError` (never a stack
trace); it reads no secret. A file the schema accepts is still refused when one of its `models`
needs a library that is not installed (`codesearch.config.model_providers.check_model`), so that
``codesearch config validate`` and start-up say so rather than the first question. Tokens are
resolved lazily by `resolve_token`, by whoever needs one, and no token value ever appears in an
error, a log line or a repr.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from codesearch.config import problems as _problems
from codesearch.config import unsupported as _unsupported
from codesearch.config.jsonc import JsoncError, parse_jsonc
from codesearch.config.model_providers import check_model
from codesearch.config.models import (
    CODE_HOST_PROVIDERS,
    DEFAULT_URLS,
    SUPPORTED_PROVIDERS,
    Config,
    Connection,
    EnvironmentOverride,
    IdentityProvider,
    LanguageModel,
    Revisions,
    SearchContext,
    Settings,
    Token,
)
from codesearch.config.schema import validator
from codesearch.config.tokens import resolve_reference
from codesearch.errors import ConfigError

log = logging.getLogger(__name__)

#: Deprecated settings and the settings that replace them.
DEPRECATED_SETTINGS = {
    "experiment_repoDrivenPermissionSyncIntervalMs": "repoDrivenPermissionSyncIntervalMs",
    "experiment_userDrivenPermissionSyncIntervalMs": "userDrivenPermissionSyncIntervalMs",
}
_OVERRIDE_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")  # names the schema checks the entries of
_OVERRIDE_TYPES = {"string": (str,), "number": (int, float), "boolean": (bool,)}
_TRUE = {"true", "1", "yes", "on"}


# --------------------------------------------------------------------------------------- input


def _looks_like_text(value: str) -> bool:
    s = value.lstrip("\ufeff \t\r\n")
    return "\n" in value or s.startswith(("{", "[", "//", "/*")) or s == ""


def _read(path_or_text: str | os.PathLike[str] | bytes, source: str | None) -> tuple[str, str]:
    """(text, source name) of a path, of JSON text, or of bytes."""
    if isinstance(path_or_text, bytes):
        raw, src = path_or_text, source or "<config>"
    elif isinstance(path_or_text, str) and _looks_like_text(path_or_text):
        return path_or_text, source or "<config>"
    else:
        path = Path(path_or_text)
        src = source or str(path)
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise ConfigError(src, [f"cannot read the file: {e.strerror or type(e).__name__}"]) from None
    try:
        return raw.decode("utf-8-sig"), src
    except UnicodeDecodeError as e:
        raise ConfigError(src, [f"the file is not UTF-8 text (byte {e.start + 1})"]) from None


# ------------------------------------------------------------------------------------- loading


def load_config(
    path_or_text: str | os.PathLike[str] | bytes, *, source: str | None = None, environ: Mapping[str, str] = os.environ
) -> Config:
    """Load, validate and type a config file (docs/configuration.md).

    `path_or_text` is a path, or the JSON text itself (recognised by a newline or a leading
    ``{``), or bytes. `source` names it in errors (default: the path, else ``<config>``).
    `environ` is only read for PERMISSION_SYNC_ENABLED (the default of `enforcePermissions`),
    overlaid with the file's own non-token `environmentOverrides`. Raises `ConfigError` listing
    every problem (``json.path: reason``); syntax errors give the line and column.
    """
    text, src = _read(path_or_text, source)
    duplicates: list[str] = []
    try:
        doc = parse_jsonc(text, duplicates)
    except JsoncError as e:
        raise ConfigError(src, [f"line {e.line}, column {e.column}: invalid JSON: {e.reason}"]) from None

    found = _problems.collect(validator(), doc)
    if found:
        raise ConfigError(src, found)
    try:
        return _build(doc, src, environ, duplicates)
    except ConfigError:
        raise
    except Exception as e:  # a bug of ours, never a user's: no values in the message
        log.debug("config %s: building the typed config failed", src, exc_info=True)
        raise ConfigError(src, [f"(internal) the validated config could not be loaded: {type(e).__name__}"]) from None


def _num(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _token(value: Any) -> Token | None:
    return Token.model_validate(value) if isinstance(value, Mapping) else None


def _override_string(o: EnvironmentOverride) -> str:
    """The environment value of a non-token override, as Sourcebot's String(value) writes it."""
    if o.type == "boolean":
        return "true" if o.value else "false"
    if o.type == "number":
        return str(_num(o.value))
    return str(o.value)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def _build(doc: dict[str, Any], source: str, environ: Mapping[str, str], duplicates: list[str]) -> Config:
    warnings: list[str] = [f'duplicate key "{k}" (the last value is used)' for k in dict.fromkeys(duplicates)]

    # settings, deprecated names mapped to their replacements
    raw_settings = {k: _num(v) for k, v in (doc.get("settings") or {}).items()}
    for old, new in DEPRECATED_SETTINGS.items():
        if old in raw_settings:
            if new in raw_settings:
                warnings.append(f"settings.{old}: deprecated and ignored, since settings.{new} is set")
            else:
                raw_settings[new] = raw_settings[old]
                warnings.append(f"settings.{old}: deprecated; use settings.{new} (value taken over)")
    if "enablePublicAccess" in raw_settings:
        warnings.append(
            "settings.enablePublicAccess: deprecated; set the environment variable "
            "FORCE_ENABLE_ANONYMOUS_ACCESS instead (mapped to it at start-up)"
        )
    settings = Settings.model_validate(raw_settings)

    overrides: dict[str, EnvironmentOverride] = {}
    for name, o in (doc.get("environmentOverrides") or {}).items():
        problem = _override_problem(name, o)
        if problem:
            warnings.append(f"{_problems.format_path(('environmentOverrides', name))}: {problem}; not applied")
            continue
        overrides[name] = EnvironmentOverride(
            name=name, type=o["type"], value=_token(o["value"]) if o["type"] == "token" else o["value"]
        )
    # PERMISSION_SYNC_ENABLED as it will be once the overrides are applied.
    pse_override = overrides.get("PERMISSION_SYNC_ENABLED")
    if pse_override is not None and pse_override.type != "token":
        permission_sync = _truthy(_override_string(pse_override))
    else:
        permission_sync = _truthy(environ.get("PERMISSION_SYNC_ENABLED"))

    connections: dict[str, Connection] = {}
    for name, raw in (doc.get("connections") or {}).items():
        kind = raw["type"]
        deployment = raw.get("deploymentType", "cloud") if kind == "bitbucket" else raw.get("deploymentType")
        revs = raw.get("revisions") or {}
        connections[name] = Connection(
            name=name,
            type=kind,
            url=raw.get("url", DEFAULT_URLS.get(kind)),
            token=_token(raw.get("token")),
            revisions=Revisions(branches=revs.get("branches", []), tags=revs.get("tags", [])),
            deployment_type=deployment,
            enforce_permissions=permission_sync and raw.get("enforcePermissions", True) is not False,
            enforce_permissions_for_public_repos=bool(raw.get("enforcePermissionsForPublicRepos", False)),
            raw=raw,
        )
        warnings.extend(_connection_warnings(name, raw))
    warnings.extend(_unsupported.warnings_for(doc, permission_sync=permission_sync))

    contexts = {
        name: SearchContext.model_validate({"name": name, **c}) for name, c in (doc.get("contexts") or {}).items()
    }
    for cname, ctx in contexts.items():
        for field, names in (
            ("includeConnections", ctx.include_connections),
            ("excludeConnections", ctx.exclude_connections),
        ):
            for i, conn_name in enumerate(names):
                if conn_name not in connections:
                    warnings.append(
                        f'{_problems.format_path(("contexts", cname, field, i))}: no connection named "{conn_name}"'
                    )

    models, refused = [], []
    for i, m in enumerate(doc.get("models") or []):
        problems, notes = check_model(_problems.format_path(("models", i)), m)
        refused += problems
        warnings += notes
        models.append(
            LanguageModel(
                provider=m["provider"],
                model=m["model"],
                display_name=m.get("displayName"),
                base_url=m.get("baseUrl"),
                temperature=m.get("temperature"),
                token=_token(m.get("token")),
                headers=dict(m.get("headers") or {}),
                raw=m,
            )
        )
    providers, problems = _identity_providers(doc.get("identityProviders") or [], warnings)
    refused += problems
    if refused:  # a model this server cannot talk to: refuse the file rather than fail at the first question
        raise ConfigError(source, refused)
    return Config(
        source=source,
        schema_ref=doc.get("$schema"),
        settings=settings,
        contexts=contexts,
        environment_overrides=overrides,
        connections=connections,
        models=models,
        permission_sync=permission_sync,
        identity_providers=providers,
        warnings=warnings,
        raw=doc,
    )


#: Provider kinds the schema knows and codesearch does not sign in with (none at the moment: a kind
#: that lands leaves this table).
_UNSUPPORTED_PROVIDERS: dict[str, str] = {}

#: The web address of a code-host identity provider whose entry names none (bitbucket-server has no
#: default: its schema requires `baseUrl`).
_PROVIDER_WEB_URLS = {
    "github": DEFAULT_URLS["github"],
    "gitlab": DEFAULT_URLS["gitlab"],
    "gitea": DEFAULT_URLS["gitea"],
    "bitbucket-cloud": "https://bitbucket.org",
}


def bitbucket_cloud_api_url(base_url: str) -> str:
    """The REST API address of a Bitbucket Cloud provider at `base_url` that names no `apiUrl`:
    ``https://api.bitbucket.org/2.0`` for bitbucket.org, else ``<base_url>/2.0`` (a stand-in such
    as a test fake serves both under one address)."""
    base = base_url.rstrip("/")
    if urlsplit(base).hostname in ("bitbucket.org", "www.bitbucket.org"):
        return DEFAULT_URLS["bitbucket"]
    return base + "/2.0"


#: The longest id an identity provider may have (it is stored with each linked account).
MAX_PROVIDER_ID = 255


def _identity_providers(
    section: list[dict[str, Any]] | dict[str, dict[str, Any]], warnings: list[str]
) -> tuple[list[IdentityProvider], list[str]]:
    """The supported `identityProviders` entries, typed, with their ids (see `IdentityProvider`);
    warnings for entries that are accepted but not acted on; problems for clashing ids.

    The section is an array (each entry's id is its ``id``, else its provider type numbered by
    position) or, as Sourcebot also accepts, a map keyed by id (the key is the id, verbatim: it is
    the callback URL's last segment that was registered at the provider)."""
    out: list[IdentityProvider] = []
    problems: list[str] = []
    seen_types: dict[str, int] = {}
    used: dict[str, int | str] = {}
    iap_at: str | None = None  # the gcp-iap entry in use (the first)
    keyed = isinstance(section, Mapping)
    entries: list[tuple[int | str, dict[str, Any]]] = (
        list(section.items()) if isinstance(section, Mapping) else list(enumerate(section))
    )
    for i, e in entries:
        at = _problems.format_path(("identityProviders", i))
        if keyed and e.get("id") not in (None, i):
            problems.append(
                f'{at}.id: "{e["id"]}" differs from its key "{i}"; in the map form the key is the id '
                '(remove "id" or make it the key)'
            )
            continue
        if keyed and len(str(i)) > MAX_PROVIDER_ID:
            problems.append(f"{at}: an id is at most {MAX_PROVIDER_ID} characters")
            continue
        kind = e["provider"]
        if kind not in SUPPORTED_PROVIDERS:
            why = _UNSUPPORTED_PROVIDERS.get(kind, f'provider "{kind}" is not known to this version of codesearch')
            warnings.append(f"{at}: accepted but not used: {why}")
            continue
        if kind == "gcp-iap" and iap_at is not None:
            warnings.append(
                f"{at}: accepted but not used: only one gcp-iap entry is used (IAP signs each request "
                f"for one audience), and {iap_at} is the first"
            )
            continue
        seen_types[kind] = seen_types.get(kind, 0) + 1
        pid = str(i) if keyed else (e.get("id") or (kind if seen_types[kind] == 1 else f"{kind}-{seen_types[kind]}"))
        if pid in used:
            problems.append(
                f'{at}.id: the id "{pid}" is already used by identityProviders[{used[pid]}]; '
                'give each entry its own "id"'
            )
            continue
        used[pid] = i
        if seen_types[kind] > 1 and not e.get("id") and not keyed:
            warnings.append(
                f'{at}: several {kind} entries: this one is "{pid}" by its position; give it an '
                '"id" so that reordering the file keeps its linked accounts'
            )
        if kind == "gcp-iap":
            iap_at = at
            out.append(
                IdentityProvider(
                    id=pid,
                    provider=kind,
                    purpose="sso",
                    audience=_token(e["audience"]),
                    display_name=e.get("displayName"),
                    index=i,
                )
            )
            continue
        issuer = e.get("issuer")
        if kind == "google" and issuer is None:
            issuer = "https://accounts.google.com"
        base_url = api_url = None
        if kind in CODE_HOST_PROVIDERS:
            base_url = (e.get("baseUrl") or _PROVIDER_WEB_URLS.get(kind) or "").rstrip("/") or None
        if kind == "bitbucket-cloud":
            assert base_url is not None  # bitbucket-cloud has a default web URL
            api_url = (e.get("apiUrl") or bitbucket_cloud_api_url(base_url)).rstrip("/")
        out.append(
            IdentityProvider(
                id=pid,
                provider=kind,
                purpose="sso" if e["purpose"] == "sso" else "integration",
                client_id=_token(e["clientId"]),
                client_secret=_token(e["clientSecret"]),
                base_url=base_url,
                api_url=api_url,
                issuer=_token(issuer) if isinstance(issuer, Mapping) else issuer,
                display_name=e.get("displayName"),
                required=bool(e.get("accountLinkingRequired") or e.get("required")),
                index=i,
            )
        )
    return out, problems


def _override_problem(name: str, o: Any) -> str | None:
    """Why an `environmentOverrides` entry cannot be applied, None when it can.

    The schema checks only entries whose name is made of letters, digits, "_" and "-" (as
    Sourcebot's does); others pass unchecked and are applied when they have an override's shape
    and a name the environment can hold.
    """
    if _OVERRIDE_NAME.match(name):
        return None  # checked by the schema
    if not name or "=" in name or "\0" in name:
        return "not a valid environment variable name"
    if not isinstance(o, Mapping) or set(o) != {"type", "value"}:
        return 'not an override: expected {"type": ..., "value": ...}'
    kind, value = o["type"], o["value"]
    if kind == "token":
        return None if _is_token_ref(value) else "a token override needs a token reference as its value"
    if kind not in _OVERRIDE_TYPES:
        return f"unknown override type {kind!r} (expected token, string, number or boolean)"
    if isinstance(value, bool) is not (kind == "boolean") or not isinstance(value, _OVERRIDE_TYPES[kind]):
        return f"a {kind} override needs a {kind} value"
    return None


def _is_token_ref(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and len(value) == 1
        and (isinstance(value.get("env"), str) or isinstance(value.get("googleCloudSecret"), str))
    )


def _connection_warnings(name: str, raw: dict[str, Any]) -> list[str]:
    """Fields the schema accepts but that have no effect as written (docs/configuration.md#the-file)."""
    at = _problems.format_path(("connections", name))
    kind, out = raw["type"], []
    if (
        kind == "gitlab"
        and raw.get("all")
        and raw.get("url", DEFAULT_URLS["gitlab"]).rstrip("/") == DEFAULT_URLS["gitlab"]
    ):
        out.append(f"{at}.all: ignored on {DEFAULT_URLS['gitlab']} (set url to a self-managed instance)")
    if kind == "bitbucket":
        server = raw.get("deploymentType", "cloud") == "server"
        if server and raw.get("workspaces"):
            out.append(f'{at}.workspaces: ignored when deploymentType is "server"')
        if not server and raw.get("all"):
            out.append(f'{at}.all: ignored when deploymentType is "cloud"')
    if kind == "azuredevops" and raw.get("deploymentType") == "server" and "url" not in raw:
        out.append(f'{at}: deploymentType is "server" but no url is set (using {DEFAULT_URLS["azuredevops"]})')
    return out


# -------------------------------------------------------------------------------------- tokens


def resolve_token(token: Mapping[str, str] | Token, *, connection: str, environ: Mapping[str, str] = os.environ) -> str:
    """The secret a token reference points to, trimmed.

    ``{"env": NAME}`` reads the environment; ``{"googleCloudSecret": "projects/…/versions/…"}``
    reads Google Secret Manager (the optional ``gcp`` extra). A missing or empty variable, an
    unreadable secret or a missing client library raise `ConfigError` naming the connection and
    the variable or secret — never a value.
    """
    return resolve_reference(
        token,
        source=f'connection "{connection}"',
        path=f"{_problems.format_path(('connections', connection))}.token",
        environ=environ,
    )


def resolve_provider_token(
    token: Mapping[str, str] | Token | None,
    *,
    provider: IdentityProvider,
    field: str,
    environ: Mapping[str, str] = os.environ,
) -> str:
    """The value an identity provider's reference points to (`field`: ``clientId``, ``audience``,
    ``clientSecret`` or ``issuer``); `ConfigError` naming the entry and the variable, never a value
    (and for a missing reference, None, that a reference was expected)."""
    path = f"{_problems.format_path(('identityProviders', provider.index))}.{field}"
    return resolve_reference(token, source=f'identity provider "{provider.id}"', path=path, environ=environ)


# ------------------------------------------------------------------------- environment overrides


def apply_environment_overrides(config: Config, environ: Any = os.environ) -> list[str]:
    """Set the config's `environmentOverrides` in `environ` (default: the process environment).

    Call once at start-up, before anything reads the environment. Strings are set as they are,
    numbers and booleans as Sourcebot writes them ("8", "true"), tokens as their resolved value.
    The deprecated ``settings.enablePublicAccess: true`` sets FORCE_ENABLE_ANONYMOUS_ACCESS=true
    unless that variable is already set or overridden. Returns the names set, never values.
    Raises `ConfigError` if a token override cannot be resolved (nothing is set in that case).
    """
    values: dict[str, str] = {}
    for name, o in config.environment_overrides.items():
        if o.type == "token":
            path = f"{_problems.format_path(('environmentOverrides', name))}.value"
            values[name] = resolve_reference(o.value, source=config.source, path=path, environ=environ)
        else:
            values[name] = _override_string(o)
    if (
        config.settings.enable_public_access
        and "FORCE_ENABLE_ANONYMOUS_ACCESS" not in values
        and "FORCE_ENABLE_ANONYMOUS_ACCESS" not in environ
    ):
        values["FORCE_ENABLE_ANONYMOUS_ACCESS"] = "true"
    for name, value in values.items():
        environ[name] = value
    if values:
        log.info("environment overrides set: %s", ", ".join(values))
    return list(values)
