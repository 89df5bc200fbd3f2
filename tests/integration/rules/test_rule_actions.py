"""Rules in a running gateway: MQTT clients publish, rules republish, write SQLite rows,
post to a real local HTTP server, and count what they did."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.helpers.gateway import running_gateway
from tests.helpers.http_sink import HttpSink
from tests.integration.broker.support import Clients, wait_until


def _config(url: str) -> str:
    return f"""
rules:
  - name: hot
    sql: >-
      SELECT payload.temp AS temp, clientid, topic_level(topic, 2) AS room
      FROM "sensors/#" WHERE payload.temp > 30
    actions:
      - {{type: republish, topic: "alerts/{{room}}", qos: 1}}
      - {{type: sqlite, table: readings}}
      - {{type: webhook, webhook: results}}
      - {{type: log}}
  - name: templated
    sql: 'SELECT payload.temp AS t, topic FROM "sensors/+/temp"'
    actions:
      - {{type: republish, topic: "copy/{{topic}}", payload: '{{"t": {{t}}}} at {{topic}}'}}
webhooks:
  - {{name: results, url: "{url}"}}
"""


def _rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        try:
            return db.execute("SELECT temp, clientid, room FROM readings ORDER BY _rowid").fetchall()
        except sqlite3.OperationalError:  # not created yet
            return []


def test_republish_sqlite_and_webhook_actions(tmp_path: Path) -> None:
    with HttpSink() as sink, running_gateway(tmp_path, _config(sink.url("/rules"))) as gw:
        clients = Clients(gw)
        try:
            alerts = clients.subscriber(5, ["alerts/#", "copy/#"], qos=1)
            device = clients.connect(5, "dev-1")
            device.publish("sensors/kitchen/temp", json.dumps({"temp": 35}), qos=1)
            device.publish("sensors/hall/temp", json.dumps({"temp": 20}), qos=1)
            device.publish("sensors/attic/temp", b"not json", qos=1)
            got = {m.topic: m.payload for m in alerts.expect_messages(4)}
            assert json.loads(got["alerts/kitchen"]) == {
                "temp": 35, "clientid": "dev-1", "room": "kitchen"
            }
            assert got["copy/sensors/kitchen/temp"] == b'{"t": 35} at sensors/kitchen/temp'
            assert got["copy/sensors/hall/temp"] == b'{"t": 20} at sensors/hall/temp'
            assert got["copy/sensors/attic/temp"] == b'{"t": } at sensors/attic/temp'
            posted = sink.wait_for(1, "/rules")
            assert posted[0].json() == {"temp": 35, "clientid": "dev-1", "room": "kitchen"}
            database = tmp_path / "data" / "rules.db"
            wait_until(lambda: _rows(database) == [(35, "dev-1", "kitchen")], what="a row")

            def counts() -> dict[str, object]:
                return {s["name"]: s for s in gw.gateway.rules.statuses()}

            hot = wait_until(
                lambda: (s := gw.call(counts)["hot"])["actions"][2]["succeeded"] == 1 and s,
                what="the webhook action counted",
            )
            assert (hot["matched"], hot["passed"], hot["failed"]) == (3, 1, 0)
            assert [(a["type"], a["succeeded"], a["failed"]) for a in hot["actions"]] == [
                ("republish", 1, 0), ("sqlite", 1, 0), ("webhook", 1, 0), ("log", 1, 0)
            ]
        finally:
            clients.close_all()


def test_a_rule_does_not_see_what_it_republishes(tmp_path: Path) -> None:
    config = """
rules:
  - name: echo
    sql: 'SELECT payload FROM "loop/#"'
    actions: [{type: republish, topic: "loop/again"}]
"""
    with running_gateway(tmp_path, config) as gw:
        clients = Clients(gw)
        try:
            watcher = clients.subscriber(4, "loop/#")
            clients.connect(4).publish("loop/start", b"x", qos=0)
            assert [m.topic for m in watcher.expect_messages(2)] == ["loop/start", "loop/again"]
            watcher.expect_no_message()
            status = gw.call(lambda: gw.gateway.rules.statuses()[0])
            assert status["matched"] == 1
        finally:
            clients.close_all()
