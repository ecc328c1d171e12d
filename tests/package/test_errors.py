"""The error hierarchy: every error survives a trip between processes (Ray) unchanged."""

from __future__ import annotations

import pickle

import pytest

from codesearch.errors import (ConfigError, DiskFull, GitError, HostAuthError, HostError, HostNotFound, IndexBuildError,
                               IndexFormatError, QueryParseError, SearchContextNotFound)


@pytest.mark.parametrize("error", [
    QueryParseError("unexpected )", "a )", 2), SearchContextNotFound("web"), SearchContextNotFound("webb", ("web",)),
    IndexFormatError("/ix/a.shard", "truncated"),
    IndexBuildError("/src: not a directory"), DiskFull("/ix/a.shard", "writing the shard"), ConfigError("config.json", ["settings.maxFileSize: must be at least 1"]),
    HostError("x answered 500", "https://h/api", 500), HostAuthError("refused", "https://h", 401),
    HostNotFound("not found", "https://h/orgs/x", 404), GitError("clone failed"),
])
def test_errors_pickle_round_trip(error):
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert (again.error_code, again.status_code) == (error.error_code, error.status_code)


@pytest.mark.parametrize(("error", "full"), [  # what a job worker retries later without using up an attempt
    (DiskFull("/ix/a.shard", "writing the shard"), True),
    (OSError(28, "No space left on device"), True),
    (OSError(122, "Disk quota exceeded"), True),
    (RuntimeError("git fetch failed: fatal: write error: No space left on device"), True),
    (RuntimeError("(sqlite3.OperationalError) database or disk is full"), True),
    (OSError(13, "Permission denied"), False),
    (RuntimeError("the host answered 500"), False),
])
def test_a_full_disk_is_told_from_other_errors(error, full):
    from codesearch.errors import is_disk_full

    assert is_disk_full(error) is full
    try:  # also when it is the cause of what was raised
        try:
            raise error
        except BaseException as e:
            raise RuntimeError("the job failed") from e
    except RuntimeError as wrapped:
        assert is_disk_full(wrapped) is full
