"""A ``sqlite`` action of a rule whose SELECT gives fields differing only by case
(``AS a``, ``AS `A```) is refused when the rule is created or loaded, naming the rule:
SQLite takes ``a`` and ``A`` as one column, so every row would fail."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check
from tests.helpers.gateway import running_gateway
from tests.integration.api.conftest import API_CONFIG, http_of

SQL = 'SELECT payload.x AS a, payload.y AS `A`, payload.z AS b FROM "s/#"'
PROBLEM = (
    "the SELECT of rule 'clash' gives fields whose names differ only by case ('a' and 'A'),"
    " which SQLite takes as one column: every row would fail; name them apart with AS"
)


def test_check_refuses_the_rule(tmp_path: Path) -> None:
    rules = f"""\
rules:
  - name: clash
    sql: '{SQL}'
    actions:
      - {{type: republish, topic: "copy"}}
      - {{type: sqlite, table: t}}
"""
    code, lines = check(tmp_path, QUIET + rules)
    assert code == 2
    assert lines == [f"edgebus.yaml:8 rules[0].actions[1].table: {PROBLEM}"]


def test_the_api_refuses_the_rule_and_takes_it_without_the_sqlite_action(
    tmp_path: Path,
) -> None:
    rule = {"name": "clash", "sql": SQL, "actions": [{"type": "sqlite", "table": "t"}]}
    with running_gateway(tmp_path, API_CONFIG) as gw:
        http = http_of(gw)
        refused = http.post("/api/v1/rules", rule)
        assert refused.status == 422, refused.text
        assert PROBLEM in refused.text
        assert gw.call(lambda: gw.gateway.rules.statuses()) == []
        republish = {**rule, "actions": [{"type": "republish", "topic": "copy"}]}
        assert http.post("/api/v1/rules", republish).status == 201
