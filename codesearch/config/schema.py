"""The configuration schema (v3, JSON Schema draft-07) shipped with the package.

The files live in ``codesearch/config/schemas/v3/``: ``index.json`` (the whole file) refers to
the others (``shared.json``, ``connection.json``, one file per connection kind,
``languageModel.json``, ``searchContext.json``, ``environmentOverrides.json``) by relative
``$ref``s such as ``./shared.json#/definitions/Token``. The files carry no ``$id``, so the same
bytes work wherever they are published (the service serves them at ``/schemas/v3/<file>``):
relative references resolve against the address they were fetched from.

Here they are resolved in memory through a `referencing.Registry` that holds every file under
`SCHEMA_BASE_URI`; nothing is ever fetched from the network.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

#: The schema version published by this package (the path segment of the files).
SCHEMA_VERSION = "v3"
#: A private base URI under which the files are registered (never fetched).
SCHEMA_BASE_URI = "https://codesearch.invalid/schemas/v3/"
#: The top-level schema file.
INDEX_FILE = "index.json"


def _dir() -> Traversable:
    return resources.files("codesearch.config").joinpath("schemas", SCHEMA_VERSION)


@cache
def schema_files() -> tuple[str, ...]:
    """Names of the schema files, sorted (``("azuredevops.json", …, "shared.json")``)."""
    return tuple(sorted(p.name for p in _dir().iterdir() if p.name.endswith(".json")))


def _normalize(name: str) -> str:
    """``github.json``, ``v3/github.json``, ``schemas/v3/github.json`` and ``/schemas/v3/github.json``
    all name the same file; anything that is not one of `schema_files` raises FileNotFoundError."""
    n = name.strip().lstrip("/")
    for prefix in ("schemas/", f"{SCHEMA_VERSION}/"):
        if n.startswith(prefix):
            n = n[len(prefix) :]
    if n not in schema_files():
        raise FileNotFoundError(f"no schema file {name!r} (files: {', '.join(schema_files())})")
    return n


@cache
def schema_bytes(name: str = INDEX_FILE) -> bytes:
    """The exact bytes of one schema file, by name relative to the v3 folder (``"github.json"``).

    Stable for a given package version, so the HTTP layer can serve them with a strong ETag.
    Raises FileNotFoundError for a name that is not a schema file (no path traversal possible).
    """
    return _dir().joinpath(_normalize(name)).read_bytes()


@cache
def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(schema_bytes(name))
    return schema


def load_schema(name: str = INDEX_FILE) -> dict[str, Any]:
    """One schema file as a dict (a fresh copy: callers may modify it)."""
    return copy.deepcopy(_schema(_normalize(name)))


def schema_index() -> dict[str, Any]:
    """The top-level schema (``index.json``), as printed by ``codesearch config schema``."""
    return load_schema(INDEX_FILE)


@cache
def registry() -> Registry:
    """Every schema file, registered under ``SCHEMA_BASE_URI + name`` as draft-07 resources."""
    return Registry().with_resources(
        (SCHEMA_BASE_URI + name, Resource.from_contents(_schema(name), default_specification=DRAFT7))
        for name in schema_files()
    )


@cache
def validator(name: str = INDEX_FILE) -> Draft7Validator:
    """A draft-07 validator for one schema file (default: the whole config), references resolved
    through `registry`. Thread-safe to share: validators keep no state between calls."""
    name = _normalize(name)
    return Draft7Validator({"$ref": SCHEMA_BASE_URI + name}, registry=registry())
