"""Rules in a running gateway: MQTT clients publish, rules republish, write SQLite rows,
post to a real local HTTP server, and count what they did."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from prometheus_client import generate_latest

from gateway.api.metrics import new_registry, snapshot
from tests.helpers.gateway import running_gateway
from tests.helpers.http_sink import HttpSink
from tests.integration.broker.support import wait_until
from tests.integration.rules.support import gateway_with_clients


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


def _rows(path: Path, columns: str, table: str) -> list[tuple[object, ...]]:
    """The rows the gateway has written so far (none before the table exists)."""
    with sqlite3.connect(path) as db:
        try:
            return db.execute(f"SELECT {columns} FROM {table} ORDER BY _rowid").fetchall()
        except sqlite3.OperationalError:  # not created yet
            return []


def test_republish_sqlite_and_webhook_actions(tmp_path: Path) -> None:
    with (
        HttpSink() as sink,
        gateway_with_clients(tmp_path, _config(sink.url("/rules"))) as (gw, clients),
    ):
        alerts = clients.subscriber(5, ["alerts/#", "copy/#"], qos=1)
        device = clients.connect(5, "dev-1")
        device.publish("sensors/kitchen/temp", json.dumps({"temp": 35}), qos=1)
        device.publish("sensors/hall/temp", json.dumps({"temp": 20}), qos=1)
        device.publish("sensors/attic/temp", b"not json", qos=1)
        got = {m.topic: m.payload for m in alerts.expect_messages(4)}
        assert json.loads(got["alerts/kitchen"]) == {
            "temp": 35,
            "clientid": "dev-1",
            "room": "kitchen",
        }
        assert got["copy/sensors/kitchen/temp"] == b'{"t": 35} at sensors/kitchen/temp'
        assert got["copy/sensors/hall/temp"] == b'{"t": 20} at sensors/hall/temp'
        assert got["copy/sensors/attic/temp"] == b'{"t": } at sensors/attic/temp'
        posted = sink.wait_for(1, "/rules")
        assert posted[0].json() == {"temp": 35, "clientid": "dev-1", "room": "kitchen"}
        database = tmp_path / "data" / "rules.db"
        wait_until(
            lambda: (
                _rows(database, "temp, clientid, room", "readings") == [(35, "dev-1", "kitchen")]
            ),
            what="a row",
        )

        def counts() -> dict[str, object]:
            return {s["name"]: s for s in gw.gateway.rules.statuses()}

        hot = wait_until(
            lambda: (s := gw.call(counts)["hot"])["actions"][2]["succeeded"] == 1 and s,
            what="the webhook action counted",
        )
        assert (hot["matched"], hot["passed"], hot["failed"]) == (3, 1, 0)
        assert [(a["type"], a["succeeded"], a["failed"]) for a in hot["actions"]] == [
            ("republish", 1, 0),
            ("sqlite", 1, 0),
            ("webhook", 1, 0),
            ("log", 1, 0),
        ]
        metrics = gw.call(lambda: snapshot(gw.gateway))
        assert metrics.rule_engine["dropped"] == 0
        assert [h["sent"] for h in metrics.webhooks] == [1]
        scraped = gw.call(lambda: generate_latest(new_registry(gw.gateway)).decode())
        assert 'edgebus_rule_passed_total{rule="hot"} 1.0' in scraped
        assert (
            'edgebus_rule_actions_total{action="1",outcome="succeeded",rule="hot",'
            'type="sqlite"} 1.0' in scraped
        )


def test_a_rule_does_not_see_what_it_republishes(tmp_path: Path) -> None:
    config = """
rules:
  - name: echo
    sql: 'SELECT payload FROM "loop/#"'
    actions: [{type: republish, topic: "loop/again"}]
"""
    with gateway_with_clients(tmp_path, config) as (gw, clients):
        watcher = clients.subscriber(4, "loop/#")
        clients.connect(4).publish("loop/start", b"x", qos=0)
        assert [m.topic for m in watcher.expect_messages(2)] == ["loop/start", "loop/again"]
        watcher.expect_no_message()
        status = gw.call(lambda: gw.gateway.rules.statuses()[0])
        assert status["matched"] == 1


def test_event_sources(tmp_path: Path) -> None:
    config = """
rules:
  - name: presence
    sql: >-
      SELECT event, clientid FROM "$events/client_connected", "$events/client_disconnected"
      WHERE clientid LIKE 'car-%'
    actions: [{type: sqlite, table: presence}]
  - name: subscriptions
    sql: >-
      SELECT clientid, topic, qos FROM "$events/session_subscribed" WHERE clientid <> 'auditor'
    actions: [{type: republish, topic: "audit/subscribed/{clientid}"}]
  - name: deliveries
    sql: >-
      SELECT from_clientid, clientid, topic FROM "$events/message_delivered"
      WHERE topic = 'orders/1'
    actions: [{type: republish, topic: "audit/delivered"}]
  - name: drops
    sql: 'SELECT reason, topic FROM "$events/message_dropped" WHERE reason = ''no_subscribers'''
    actions: [{type: log}]
"""
    with gateway_with_clients(tmp_path, config) as (gw, clients):
        audit = clients.subscriber(5, "audit/#", client_id="auditor")
        car = clients.connect(5, "car-7")
        car.subscribe("orders/#", 0)
        assert json.loads(audit.expect_message().payload) == {
            "clientid": "car-7",
            "topic": "orders/#",
            "qos": 0,
        }
        clients.connect(4, "shop").publish("orders/1", b"{}", qos=0)
        car.expect_message()
        delivered = audit.expect_message()
        assert json.loads(delivered.payload) == {
            "from_clientid": "shop",
            "clientid": "car-7",
            "topic": "orders/1",
        }
        clients.connect(4, "shop2").publish("nobody/listens", b"x", qos=0)
        car.disconnect()
        database = tmp_path / "data" / "rules.db"

        def presence() -> list[tuple[object, ...]]:
            return _rows(database, "event, clientid", "presence")

        wait_until(
            lambda: presence() == [("client.connected", "car-7"), ("client.disconnected", "car-7")],
            what="both presence rows",
        )
        drops = wait_until(
            lambda: (
                (s := {r["name"]: r for r in gw.call(gw.gateway.rules.statuses)})["drops"]["passed"]
                and s["drops"]
            ),
            what="the no_subscribers drop seen",
        )
        assert drops["failed"] == 0


def test_a_rule_the_acl_denies_is_reported_and_the_others_run(tmp_path: Path) -> None:
    config = """
acl:
  default: deny
  rules:
    - {permission: allow, clientid: "rule:allowed", topics: ["open/#", "copied/#"]}
rules:
  - name: denied
    sql: 'SELECT * FROM "secret/#"'
    actions: [{type: log}]
  - name: allowed
    sql: 'SELECT payload FROM "open/#"'
    actions: [{type: republish, topic: "copied/x"}]
"""
    with running_gateway(tmp_path, config) as gw:
        states = {s["name"]: s for s in gw.call(gw.gateway.rules.statuses)}
        assert states["denied"]["state"] == "error"
        assert "the ACL denies subscribing to 'secret/#'" in states["denied"]["error"]
        assert states["allowed"]["state"] == "running"


def test_a_full_action_queue_drops_the_oldest_results_and_counts(tmp_path: Path) -> None:
    """100 messages routed in one loop turn, before the engine's worker runs, with an
    action queue of 10: all 100 are evaluated during routing (matched, passed); the 90
    oldest results are dropped and counted, the 10 newest run their action; the broker
    delivers all 100."""
    config = """
rules:
  - name: busy
    sql: 'SELECT payload FROM "burst/#"'
    actions: [{type: log, level: debug}]
"""
    with gateway_with_clients(tmp_path, config) as (gw, clients):
        watcher = clients.subscriber(4, "burst/#")
        engine = gw.gateway.rules

        def burst() -> dict[str, object]:
            engine.queue_size = 10
            client = gw.gateway.hub.client("api", "burst")
            for i in range(100):
                client.publish(client.context("burst/x", str(i).encode()))
            return engine.statuses()[0]

        evaluated = gw.call(burst)  # in the same loop turn: the worker has not run
        assert (evaluated["matched"], evaluated["passed"], evaluated["dropped"]) == (100, 100, 90)
        assert len(watcher.expect_messages(100)) == 100
        status = wait_until(
            lambda: (s := gw.call(engine.statuses)[0])["actions"][0]["succeeded"] == 10 and s,
            what="the 10 newest results acted on",
        )
        assert (status["matched"], status["passed"], status["failed"]) == (100, 100, 0)
        assert (status["dropped"], gw.call(engine.stats)["dropped"]) == (90, 90)
        scraped = gw.call(lambda: generate_latest(new_registry(gw.gateway)).decode())
        assert "edgebus_rule_queue_dropped_total 90.0" in scraped
