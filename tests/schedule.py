"""The order the test files are handed to pytest-xdist's workers: the longest first.

`make test` runs the files on two workers, a whole file at a time (``--dist loadfile``: module
fixtures such as a `codesearch serve` process or a web world are built once per file). Left to
itself, pytest-xdist hands out the files with the most tests first, which put the files of one
long test (each starts its own `codesearch serve`: 40-70 s) at the end of the run, where one of
them could keep a worker busy while the other had nothing left. Longest first (the classic LPT
rule), the short files fill in the end.

The cost of each file is its seconds in a full run (`MODULE_SECONDS`, ``module_seconds.json``
beside this file), refreshed from a JUnit report of one (``make test`` with
``PYTEST_ADDOPTS=--junitxml=FILE``) by ``python -m tests.schedule FILE``. A file missing from the
table (a new one) counts as `NEW_FILE_S`. The order only changes how long the run takes, never
what runs.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import xml.etree.ElementTree as ET

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "module_seconds.json")
#: The cost of a file the table does not know: about a web or service file's.
NEW_FILE_S = 20.0


def module_seconds(path: str = TABLE) -> dict[str, float]:
    """The table: test file path (``tests/web/test_web_search.py``) -> seconds."""
    try:
        with open(path, encoding="utf-8") as f:
            return {str(k): float(v) for k, v in json.load(f).items()}
    except FileNotFoundError:
        return {}


def longest_first(items: list, seconds: dict[str, float]) -> list:
    """`items` (pytest's) with the files in decreasing cost, each file's tests in their own order."""
    first_seen = {}
    for item in items:
        first_seen.setdefault(_file_of(item), len(first_seen))
    return sorted(items, key=lambda item: (-seconds.get(_file_of(item), NEW_FILE_S), first_seen[_file_of(item)]))


def _file_of(item) -> str:
    return item.nodeid.split("::", 1)[0]


def seconds_from_junit(path: str) -> dict[str, float]:
    """Each test file's total seconds in a JUnit report (classnames ``tests.web.test_x[.TestY]``)."""
    totals: dict[str, float] = collections.Counter()
    for case in ET.parse(path).iter("testcase"):
        parts = [p for p in case.get("classname", "").split(".") if p and not p[:1].isupper()]
        if parts:
            totals["/".join(parts) + ".py"] += float(case.get("time") or 0)
    return {name: round(s, 1) for name, s in sorted(totals.items())}


if __name__ == "__main__":  # pragma: no cover - a maintainer's command
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.schedule JUNIT.xml   (rewrites tests/module_seconds.json)")
    table = seconds_from_junit(sys.argv[1])
    with open(TABLE, "w", encoding="utf-8") as out:
        json.dump(table, out, indent=0, sort_keys=True)
        out.write("\n")
    print(f"{TABLE}: {len(table)} files, {sum(table.values()) / 60:.1f} min")
