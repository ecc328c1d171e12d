"""The error hierarchy: every error survives a trip between processes (Ray) unchanged."""

from __future__ import annotations

import pickle

import pytest

from codesearch.errors import (ConfigError, GitError, HostAuthError, HostError, HostNotFound, IndexBuildError,
                               IndexFormatError, QueryParseError, SearchContextNotFound)


@pytest.mark.parametrize("error", [
    QueryParseError("unexpected )", "a )", 2), SearchContextNotFound("web"), SearchContextNotFound("webb", ("web",)),
    IndexFormatError("/ix/a.shard", "truncated"),
    IndexBuildError("/src: not a directory"), ConfigError("config.json", ["settings.maxFileSize: must be at least 1"]),
    HostError("x answered 500", "https://h/api", 500), HostAuthError("refused", "https://h", 401),
    HostNotFound("not found", "https://h/orgs/x", 404), GitError("clone failed"),
])
def test_errors_pickle_round_trip(error):
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert (again.error_code, again.status_code) == (error.error_code, error.status_code)
