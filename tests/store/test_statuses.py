"""The status enums (codesearch/statuses.py): their values are a contract (stored in the state
database, sent over the API, compared by the pages' scripts), so they are spelled out here; a
member stores, serialises and formats as its value."""

from __future__ import annotations

import json

import pytest

from codesearch.statuses import ChatStatus, IndexStatus, JobKind, JobState, SyncStatus
from codesearch.store import Store
from codesearch.store import models as m


@pytest.mark.parametrize("enum,values", [
    (SyncStatus, ["SYNC_NEEDED", "SYNCING", "SYNCED", "SYNCED_WITH_WARNINGS", "FAILED"]),
    (IndexStatus, ["NEW", "INDEXING", "INDEXED", "FAILED"]),
    (JobKind, ["sync", "index"]),
    (JobState, ["PENDING", "IN_PROGRESS", "COMPLETED", "FAILED"]),
    (ChatStatus, ["COMPLETED", "FAILED"]),
])
def test_values_are_the_contract(enum, values):
    assert [member.value for member in enum] == values
    for member in enum:
        assert member == member.value and f"{member}" == member.value and str(member) == member.value
        assert json.dumps({"status": member}) == json.dumps({"status": member.value})


def test_the_store_names_are_the_enum_members():
    assert m.SYNC_FAILED is SyncStatus.FAILED and m.INDEX_FAILED is IndexStatus.FAILED
    assert m.FAILED is JobState.FAILED and m.CHAT_FAILED is ChatStatus.FAILED
    assert m.JOB_STATES == tuple(JobState) and m.CONNECTION_STATUSES == tuple(SyncStatus)
    assert JobState.active() == (JobState.PENDING, JobState.IN_PROGRESS)


def test_members_go_into_the_database_as_their_values(tmp_path):
    with Store.open(str(tmp_path)) as store:
        store.upsert_connection("gh", "github", {"type": "github"})
        store.update_connection_status("gh", SyncStatus.SYNCED_WITH_WARNINGS)
        status = store.get_connection("gh").sync_status
        assert type(status) is str and status == "SYNCED_WITH_WARNINGS" == SyncStatus.SYNCED_WITH_WARNINGS
