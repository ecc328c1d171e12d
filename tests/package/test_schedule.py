"""The order the suite's files are handed to pytest-xdist (`tests.schedule`): longest first, each
file's tests in their own order, a file the table does not know in the middle; and the table's
refresh from a JUnit report."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from tests import schedule


@dataclass
class Item:
    nodeid: str


@pytest.mark.parametrize("nodeids,seconds,expected", [
    (["a.py::x", "a.py::y", "b.py::z"], {"a.py": 1, "b.py": 9}, ["b.py::z", "a.py::x", "a.py::y"]),
    (["a.py::y", "a.py::x", "b.py::z"], {"a.py": 9, "b.py": 1}, ["a.py::y", "a.py::x", "b.py::z"]),
    (["a.py::x", "b.py::z", "c.py::w"], {"a.py": 1, "c.py": 99}, ["c.py::w", "b.py::z", "a.py::x"]),  # b: NEW_FILE_S
    (["a.py::x", "b.py::z"], {}, ["a.py::x", "b.py::z"]),  # no table: collection order
    (["a.py::C::x", "b.py::z", "a.py::C::y"], {"a.py": 5, "b.py": 5}, ["a.py::C::x", "a.py::C::y", "b.py::z"]),
])
def test_longest_file_first(nodeids, seconds, expected):
    assert [i.nodeid for i in schedule.longest_first([Item(n) for n in nodeids], seconds)] == expected


def test_the_table_comes_from_a_junit_report(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text("""<testsuites><testsuite>
<testcase classname="tests.web.test_a" name="t1" time="1.5"/>
<testcase classname="tests.web.test_a.TestGroup" name="t2" time="2.0"/>
<testcase classname="tests.test_b" name="t3" time="0.25"/>
</testsuite></testsuites>""")
    assert schedule.seconds_from_junit(str(report)) == {"tests/test_b.py": 0.2, "tests/web/test_a.py": 3.5}


def test_the_committed_table_names_test_files_that_exist():
    root = os.path.dirname(os.path.dirname(schedule.TABLE))
    table = schedule.module_seconds()
    assert len(table) > 100
    missing = [name for name in table if not os.path.exists(os.path.join(root, name))]
    assert not missing, f"renamed or removed (refresh with python -m tests.schedule): {missing}"
