"""Token references: how a config names a secret without holding it, and how the secret is read.

A reference is ``{"env": "<VARIABLE>"}`` (the process environment) or ``{"googleCloudSecret":
"projects/<p>/secrets/<s>/versions/<v>"}`` (Google Secret Manager, the optional ``gcp`` extra). The
config loader resolves connections', identity providers' and overrides' references with it; the
language-model client resolves a model's when it first calls the model. Errors name where the
reference is and which variable or secret, never a value.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any

from codesearch.config.models import Token
from codesearch.errors import ConfigError

_GCP_SECRET = re.compile(r"^projects/[^/\s]+/secrets/[^/\s]+/versions/[^/\s]+$")


def _fail(source: str, path: str, reason: str) -> ConfigError:
    return ConfigError(source, [f"{path}: {reason}"])


def resolve_reference(token: Any, *, source: str, path: str, environ: Mapping[str, str]) -> str:
    """The secret `token` (``{"env": NAME}`` or ``{"googleCloudSecret": "projects/…/versions/…"}``) points to,
    trimmed; a `ConfigError` of `source` at `path` naming the variable or secret, never a value."""
    if isinstance(token, Token):
        token = token.to_dict()
    if not isinstance(token, Mapping) or len(token) != 1 or not ({"env", "googleCloudSecret"} & set(token)):
        raise _fail(
            source,
            path,
            'expected a token reference: {"env": "<VARIABLE>"} or '
            '{"googleCloudSecret": "projects/<p>/secrets/<s>/versions/<v>"}',
        )
    if "env" in token:
        var = token["env"]
        value = environ.get(var)
        if value is None:
            raise _fail(source, path, f'environment variable "{var}" is not set')
        value = value.strip()
        if not value:
            raise _fail(source, path, f'environment variable "{var}" is empty')
        return value
    return _read_google_cloud_secret(str(token["googleCloudSecret"]), source=source, path=path)


def _read_google_cloud_secret(resource: str, *, source: str, path: str) -> str:
    if not _GCP_SECRET.match(resource):
        raise _fail(
            source,
            path,
            f'googleCloudSecret "{resource}" must be of the form '
            "projects/<project-id>/secrets/<secret-name>/versions/<version-id>",
        )
    try:
        secretmanager = importlib.import_module("google.cloud.secretmanager")
    except ImportError:
        raise _fail(
            source,
            path,
            "reading a googleCloudSecret token needs the Google Secret Manager client: "
            'pip install "codesearch-ray[gcp]"',
        ) from None
    try:
        client = secretmanager.SecretManagerServiceClient()
        response = client.access_secret_version(request={"name": resource})
        data = response.payload.data
    except Exception as e:  # API errors name the resource and the reason, never a secret value
        reason = " ".join(str(e).split())[:300] or type(e).__name__
        raise _fail(source, path, f'cannot read Google Cloud secret "{resource}": {reason}') from None
    try:
        value = (data.decode("utf-8") if isinstance(data, bytes) else str(data)).strip()
    except UnicodeDecodeError:
        raise _fail(source, path, f'Google Cloud secret "{resource}" is not UTF-8 text') from None
    if not value:
        raise _fail(source, path, f'Google Cloud secret "{resource}" is empty')
    return value
