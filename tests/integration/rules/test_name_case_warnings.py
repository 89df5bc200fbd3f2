"""A rule's name that is not a column but differs only by case from one (``Topic``,
``ClientId``: unquoted names were lower-cased before this release, now they keep their
case and such a name is NULL on every row) is a warning, not an error: ``edgebus check``
prints it naming the rule and the name, and the gateway logs it when it installs the
rule (start, and a rule created through the API). Before, such a rule was taken without
a word."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.helpers.check_command import QUIET, check
from tests.helpers.gateway import running_gateway
from tests.integration.api.conftest import API_CONFIG, http_of

RULES = """\
rules:
  - name: old
    sql: SELECT Topic, payload.x AS x FROM "t/#" WHERE ClientId = 'dev'
    actions:
      - {type: republish, topic: "copy/{x}", payload: "{Topic}"}
  - name: star
    sql: SELECT * FROM "s/#"
    actions:
      - {type: republish, topic: "copy/{Topic}"}
  - name: fine
    sql: SELECT upper(topic) AS Topic FROM "f/#" WHERE topic = 'f/1'
    actions:
      - {type: republish, topic: "copy/f", payload: "{Topic}"}
"""

OLD_TOPIC = "rule 'old': 'Topic' is not a column, NULL on every row (names keep their case); did you mean 'topic'?"  # noqa: E501
OLD_CLIENTID = "rule 'old': 'ClientId' is not a column, NULL on every row (names keep their case); did you mean 'clientid'?"  # noqa: E501
STAR = "rule 'star': topic template 'copy/{Topic}' names 'Topic', which is no field of the result (names keep their case); did you mean 'topic'?"  # noqa: E501


def test_check_warns_naming_the_rule_and_the_name(tmp_path: Path) -> None:
    code, lines = check(tmp_path, QUIET + RULES)
    assert code == 0, lines
    assert lines == [
        f"edgebus.yaml:5 rules[0].sql: warning: {OLD_TOPIC}",
        f"edgebus.yaml:5 rules[0].sql: warning: {OLD_CLIENTID}",
        f"edgebus.yaml:11 rules[1].actions[0].topic: warning: {STAR}",
        "edgebus.yaml: OK (3 warning(s))",
    ]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "gateway.rules.engine" and record.levelno == logging.WARNING
    ]


def test_the_gateway_logs_them_at_load_and_through_the_api(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "gateway.rules.engine")
    with running_gateway(tmp_path, API_CONFIG + RULES) as gw:
        assert _warnings(caplog) == [OLD_TOPIC, OLD_CLIENTID, STAR]
        assert {s["name"] for s in gw.call(gw.gateway.rules.statuses)} == {"old", "star", "fine"}
        caplog.clear()
        rule = {
            "name": "api",
            "sql": 'SELECT Topic FROM "a/#"',
            "actions": [{"type": "log"}],
        }
        reply = http_of(gw).post("/api/v1/rules", rule)
        assert reply.status == 201, reply.text
        assert _warnings(caplog) == [
            "rule 'api': 'Topic' is not a column, NULL on every row (names keep their case);"
            " did you mean 'topic'?"
        ]
