"""The configuration file: Sourcebot's v3 format, loaded unchanged (docs/configuration.md).

    from codesearch.config import load_config, apply_environment_overrides, resolve_token

    config = load_config(path)                 # ConfigError with every problem, or a Config
    apply_environment_overrides(config)        # at start-up, before the environment is read
    for name, conn in config.connections.items():
        token = resolve_token(conn.raw["token"], connection=name) if "token" in conn else None

The JSON schema files ship in ``codesearch/config/schemas/v3/``; `schema_bytes` serves them,
`validator` checks documents against them.
"""

from codesearch.config.loader import apply_environment_overrides, load_config, resolve_provider_token, resolve_token
from codesearch.config.models import (
    CONNECTION_TYPES,
    DEFAULT_URLS,
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
from codesearch.config.schema import (
    SCHEMA_VERSION,
    load_schema,
    registry,
    schema_bytes,
    schema_files,
    schema_index,
    validator,
)

__all__ = [
    "CONNECTION_TYPES",
    "DEFAULT_URLS",
    "SCHEMA_VERSION",
    "Config",
    "Connection",
    "EnvironmentOverride",
    "IdentityProvider",
    "LanguageModel",
    "Revisions",
    "SearchContext",
    "Settings",
    "Token",
    "apply_environment_overrides",
    "load_config",
    "load_schema",
    "registry",
    "resolve_provider_token",
    "resolve_token",
    "schema_bytes",
    "schema_files",
    "schema_index",
    "validator",
]
