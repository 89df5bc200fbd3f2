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


STAR_SQL = 'SELECT *, upper(topic) AS TOPIC FROM "t/star"'
STAR_PROBLEM = (
    "the SELECT of rule 'star' gives fields whose names differ only by case ('topic' and"
    " 'TOPIC'), which SQLite takes as one column: every row would fail; name them apart"
    " with AS"
)


def test_check_compares_the_aliases_with_the_columns_of_star(tmp_path: Path) -> None:
    """Before, a SELECT with ``*`` was not looked at: the rule was taken and every row
    failed 'duplicate column name: TOPIC'."""
    rules = f"""\
rules:
  - name: star
    sql: '{STAR_SQL}'
    actions:
      - {{type: sqlite, table: t}}
"""
    code, lines = check(tmp_path, QUIET + rules)
    assert code == 2
    assert lines == [f"edgebus.yaml:7 rules[0].actions[0].table: {STAR_PROBLEM}"]


def test_the_api_refuses_star_with_an_alias_differing_by_case(tmp_path: Path) -> None:
    rule = {"name": "star", "sql": STAR_SQL, "actions": [{"type": "sqlite", "table": "t"}]}
    with running_gateway(tmp_path, API_CONFIG) as gw:
        http = http_of(gw)
        refused = http.post("/api/v1/rules", rule)
        assert refused.status == 422, refused.text
        assert STAR_PROBLEM in refused.text
        apart = {**rule, "sql": 'SELECT *, upper(topic) AS topic_upper FROM "t/star"'}
        assert http.post("/api/v1/rules", apart).status == 201
