"""Every code-host adapter, by connection type: the one module that imports them all.

Each adapter module registers its listing function with `base.register` when imported. A process
that imported one adapter module for another purpose (permission syncing uses the Bitbucket and
GitHub pagers) has some kinds registered and not the others, so lookups go through here, where
importing this module has registered every kind.
"""

from codesearch.hosts import azuredevops, bitbucket, generic, gerrit, gitea, github, gitlab  # noqa: F401
from codesearch.hosts.base import ADAPTERS, Adapter


def adapter_for(kind: str) -> Adapter:
    """The listing function for a connection type (ValueError for a type no adapter registered)."""
    try:
        return ADAPTERS[kind]
    except KeyError:
        raise ValueError(f"unknown connection type {kind!r}") from None
