"""A duplicate name is reported once (``edgebus check``, and a reload, which checks the
same way): when it was the section's only problem, the field validator's report and the
names-as-written check (for sections with other problems) both gave it, so each line
came twice. With another problem in the section, the names are still checked as written."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check

BRIDGES = """\
bridges:
  - {name: up, server: "127.0.0.1:1", forwards: [{local: a/x, remote: b/x}]}
  - {name: up, server: "127.0.0.1:2", forwards: [{local: a/y, remote: b/y%s}]}
rules:
  - {name: r, sql: 'SELECT 1 AS x FROM "a/#"', actions: [{type: republish, topic: q}]}
  - {name: r, sql: 'SELECT 1 AS x FROM "a/#"', actions: [{type: republish, topic: q}]}
"""


def test_a_duplicate_name_is_reported_once(tmp_path: Path) -> None:
    code, lines = check(tmp_path, QUIET + BRIDGES % "")
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:5 bridges[1].name: 'up' is already the name of bridges[0]",
            "edgebus.yaml:8 rules[1].name: 'r' is already the name of rules[0]",
        ],
    )


def test_a_duplicate_name_in_a_section_with_another_problem_is_reported_once(
    tmp_path: Path,
) -> None:
    code, lines = check(tmp_path, QUIET + BRIDGES % ", qos: 3")
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:5 bridges[1].forwards[0].qos: expected 0, 1 or 2, got 3",
            "edgebus.yaml:5 bridges[1].name: 'up' is already the name of bridges[0]",
            "edgebus.yaml:8 rules[1].name: 'r' is already the name of rules[0]",
        ],
    )
