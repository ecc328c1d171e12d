"""``GET /api/permission_sync``: where permission syncing stands, for owners.

One answer: whether the rule is on, and for each repository and linked account that is synced
its last success, last attempt and last error (never a token). Owners read it to see why someone
cannot find a repository: a grant that is missing, stale (older than twice the interval) or
revoked by a host error. The rule itself: `codesearch.permissions`; docs/permissions.md.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from codesearch.errors import InsufficientPermissions
from codesearch.service.deps import Caller, StoreDep
from codesearch.tools.repos import iso

router = APIRouter()


@router.get("/api/permission_sync")
def permission_sync(identity: Caller, store: StoreDep) -> dict[str, Any]:
    if identity.role != "OWNER":
        raise InsufficientPermissions("only owners may read the state of permission syncing")
    policy = identity.policy
    out: dict[str, Any] = {"enabled": bool(policy is not None and policy.enabled()), "repos": [], "accounts": []}
    if store is None:
        return out
    from codesearch.permissions import filter_repos

    # owners are not exempt from the rule: a repository hidden from them is left out here too
    names = {r.id: r.name for r in filter_repos(identity, store.list_repos(page=1, per_page=1_000_000)[0])}
    for repo_id, s in sorted(store.repo_permission_syncs().items()):
        if repo_id not in names:
            continue
        out["repos"].append(
            {
                "repoId": repo_id,
                "repoName": names.get(repo_id),
                "syncedAt": iso(s.synced_at),
                "attemptedAt": iso(s.attempted_at),
                "error": s.error,
                "readers": len(store.repo_grant_subjects(repo_id)),
            }
        )
    emails = {u.id: u.email for u in store.list_users()}
    for a in store.list_linked_accounts(with_host=True):
        out["accounts"].append(
            {
                "id": a.id,
                "user": emails.get(a.user_id),
                "host": a.host,
                "login": a.login,
                "syncedAt": iso(a.permission_synced_at),
                "attemptedAt": iso(a.permission_attempted_at),
                "error": a.permission_error,
            }
        )
    return out
