"""Names in a rule statement keep their case, as in EMQX: ``payload.deviceId`` reads the
JSON key ``deviceId``, ``AS deviceId`` names the result's field ``deviceId`` (which an
action's template then names), a user property key and a SQLite column keep theirs.
Keywords and function names are in any case."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.helpers.check_command import QUIET, check
from tests.integration.broker.support import publish_props, wait_until
from tests.integration.rules.support import gateway_with_clients

RULES = """\
rules:
  - name: camel
    sql: >-
      Select payload.deviceId AS deviceId, payload.tempC, properties.user_properties.traceId
      as traceId, UPPER(payload.deviceId) AS Upper FROM "sensors/#" WHERE payload.tempC > 20
    actions:
      - {type: republish, topic: "alerts/{deviceId}", payload: "{deviceId} {traceId} {Upper}"}
      - {type: republish, topic: "json/{deviceId}"}
      - {type: sqlite, table: camel}
"""


def _columns(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[1] for row in db.execute("PRAGMA table_info(camel)")]


def test_camel_case_keys_aliases_and_columns(tmp_path: Path) -> None:
    with gateway_with_clients(tmp_path, RULES) as (_gw, clients):
        watcher = clients.subscriber(5, ["alerts/#", "json/#"], qos=1)
        device = clients.connect(5, "dev-1")
        props = publish_props(UserProperty=[("traceId", "t-9")])
        device.publish("sensors/a", json.dumps({"deviceId": "D1", "tempC": 25}), 1, False, props)
        device.publish("sensors/a", json.dumps({"deviceId": "D2", "tempC": 5}), 1, False, props)
        got = {m.topic: m.payload for m in watcher.expect_messages(2)}
        assert got["alerts/D1"] == b"D1 t-9 D1"
        assert json.loads(got["json/D1"]) == {
            "deviceId": "D1",
            "payload": {"tempC": 25},
            "traceId": "t-9",
            "Upper": "D1",
        }
        watcher.expect_no_message()  # D2 is not > 20
        database = tmp_path / "data" / "rules.db"
        wait_until(lambda: "deviceId" in _columns(database), what="the table")
        assert _columns(database) == ["_rowid", "_at", "deviceId", "payload", "traceId", "Upper"]


def test_check_accepts_a_template_naming_a_camel_case_alias(tmp_path: Path) -> None:
    rules = """\
rules:
  - name: camel
    sql: 'SELECT payload.deviceId AS deviceId FROM "s/#"'
    actions:
      - {type: republish, topic: "d/{deviceId}", payload: "{deviceId}"}
"""
    assert check(tmp_path, QUIET + rules) == (0, ["edgebus.yaml: OK"])


def test_check_refuses_a_template_naming_the_alias_in_another_case(tmp_path: Path) -> None:
    rules = """\
rules:
  - name: camel
    sql: 'SELECT payload.deviceId AS deviceId FROM "s/#"'
    actions:
      - {type: republish, topic: "d/{deviceid}"}
"""
    code, lines = check(tmp_path, QUIET + rules)
    assert code == 2
    assert "names 'deviceid', which the SELECT of rule 'camel' does not give" in lines[0]
