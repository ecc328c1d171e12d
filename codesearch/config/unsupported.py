"""What the schema accepts but codesearch does not act on (yet), said out loud.

The schema accepts every document Sourcebot's schema accepts, so that an existing config file
loads unchanged. Some of what such a file may say has no effect here; rather than dropping it
silently, `warnings_for` lists each such place as a warning, which ``codesearch config
validate`` prints and the service logs at start-up:

    apps[0]: GitHub App 123 is for github.example.com, where no github connection is; it is not used
    identityProviders[2]: accepted but not used: provider "idira" is not known to this version of codesearch
    connections.gh.enforcePermissions: it has no effect while PERMISSION_SYNC_ENABLED is off

The tables here are the single list of such gaps: when a feature lands, its entry goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from codesearch.config.problems import format_path

#: Top-level sections of newer Sourcebot versions, checked by the schema and then ignored.
UNUSED_SECTIONS: dict[str, str] = {}

#: Connection fields the host adapters do not read, by connection kind (a path inside the connection).
UNUSED_CONNECTION_FIELDS: dict[str, dict[tuple[str, ...], str]] = {
    "github": {
        ("exclude", "private"): "private repositories are not filtered out; "
        "use exclude.repos, or a token that cannot see them"
    },
}

#: Per-connection permission fields: they act only while PERMISSION_SYNC_ENABLED is true.
PERMISSION_FIELDS = ("enforcePermissions", "enforcePermissionsForPublicRepos")
_SYNC_OFF = "it has no effect while PERMISSION_SYNC_ENABLED is off"
#: Connection kinds whose permissions cannot be synced (`codesearch.hosts.keys.SYNCABLE_KINDS`).
UNSYNCABLE = {"gerrit": "Gerrit", "azuredevops": "Azure DevOps", "git": "plain git hosts"}


def _lookup(node: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def _host_name(url: str | None) -> str:
    return (urlsplit(url or "https://github.com").hostname or "").lower()


def _unused_apps(doc: Mapping[str, Any]) -> list[str]:
    """A GitHub App is used by the github connections on its ``deploymentHostname``: one for a host
    no connection is on does nothing (a typo, or a connection left out), which is said."""
    hosts = {_host_name(c.get("url")) for c in (doc.get("connections") or {}).values() if c.get("type") == "github"}
    out = []
    for i, app in enumerate(doc.get("apps") or ()):
        host = str(app.get("deploymentHostname") or "github.com").lower()
        if app.get("type") == "github" and host not in hosts:
            out.append(
                f"apps[{i}]: GitHub App {app.get('id')} is for {host}, where no github connection is; it is not used"
            )
    return out


def warnings_for(doc: Mapping[str, Any], *, permission_sync: bool) -> list[str]:
    """One warning per accepted-but-ignored place of a validated document, in document order.

    `permission_sync` is PERMISSION_SYNC_ENABLED as it will be once the file's own
    environment overrides are applied.
    """
    out: list[str] = []
    for key, why in UNUSED_SECTIONS.items():
        if key in doc:
            out.append(f"{key}: accepted but not used: {why}")
    out.extend(_unused_apps(doc))
    for name, conn in (doc.get("connections") or {}).items():
        at = format_path(("connections", name))
        for path, why in UNUSED_CONNECTION_FIELDS.get(conn.get("type"), {}).items():
            if _lookup(conn, path):
                out.append(f"{at}.{'.'.join(path)}: accepted but not used yet: {why}")
        if not permission_sync:
            for field in PERMISSION_FIELDS:
                if conn.get(field) is True:
                    out.append(f"{at}.{field}: {_SYNC_OFF}")
        elif conn.get("type") in UNSYNCABLE and conn.get("enforcePermissions", True) is not False:
            out.append(
                f"{at}: permission syncing does not support {UNSYNCABLE[conn['type']]}, so its private "
                "repositories are visible to nobody; set enforcePermissions to false to show them to every user"
            )
    return out
