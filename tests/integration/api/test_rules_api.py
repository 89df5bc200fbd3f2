"""``/rules``: rules created, replaced, disabled, enabled, deleted and tested at run
time, checked through MQTT traffic and the counters."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.gateway import RunningGateway
from tests.integration.api.conftest import config_file
from tests.integration.api.support import Http
from tests.integration.broker.support import Clients

RULE = {
    "name": "copy",
    "sql": 'SELECT payload.v AS v FROM "in/#" WHERE payload.v >= 10',
    "actions": [{"type": "republish", "topic": "out/{v}"}],
}


def test_create_disable_enable_replace_delete(http: Http, clients: Clients) -> None:
    watcher = clients.subscriber(5, "out/#")
    device = clients.connect(5)

    created = http.post("/api/v1/rules", RULE)
    assert created.status == 201
    assert (created.json()["name"], created.json()["state"]) == ("copy", "running")
    assert http.post("/api/v1/rules", RULE).status == 409
    device.publish("in/a", b'{"v": 12}', qos=1)
    device.publish("in/a", b'{"v": 3}', qos=1)
    assert watcher.expect_message().topic == "out/12"
    watcher.expect_no_message()
    listed = http.get("/api/v1/rules").json()
    assert [(r["name"], r["hits"]) for r in listed] == [("copy", 2)]
    one = http.get("/api/v1/rules/copy").json()
    assert (one["details"]["matched"], one["details"]["passed"]) == (2, 1)
    assert one["details"]["actions"] == [{"type": "republish", "succeeded": 1, "failed": 0}]

    assert http.post("/api/v1/rules/copy/disable").json()["state"] == "disabled"
    device.publish("in/a", b'{"v": 50}', qos=1)
    watcher.expect_no_message()
    assert http.post("/api/v1/rules/copy/enable").json()["state"] == "running"
    device.publish("in/a", b'{"v": 51}', qos=1)
    assert watcher.expect_message().topic == "out/51"

    replaced = http.request(
        "PUT", "/api/v1/rules/copy", {**RULE, "sql": 'SELECT payload.v AS v FROM "in/#"'}
    )
    assert replaced.status == 200
    device.publish("in/a", b'{"v": 1}', qos=1)
    assert watcher.expect_message().topic == "out/1"

    assert http.delete("/api/v1/rules/copy").status == 204
    assert http.get("/api/v1/rules/copy").status == 404
    assert http.delete("/api/v1/rules/copy").status == 404
    device.publish("in/a", b'{"v": 99}', qos=1)
    watcher.expect_no_message()


def test_bad_rules_are_refused_with_the_position(http: Http, gw: RunningGateway) -> None:
    bad = http.post("/api/v1/rules", {**RULE, "sql": 'SELECT v FROM "in/#" WHERE v >'})
    assert bad.status == 422
    assert "at position 30 (line 1, column 31)" in bad.text
    unknown_hook = http.post(
        "/api/v1/rules", {**RULE, "actions": [{"type": "webhook", "webhook": "nope"}]}
    )
    assert unknown_hook.status == 400
    assert "no webhook named 'nope'" in unknown_hook.text
    mismatch = http.request("PUT", "/api/v1/rules/copy", RULE)
    assert mismatch.status == 404
    assert gw.call(lambda: gw.gateway.rules.statuses()) == []


def test_testing_a_rule_has_no_side_effect(http: Http, clients: Clients) -> None:
    watcher = clients.subscriber(5, "#")
    sql = 'SELECT payload.t * 2 AS double, upper(clientid) AS who FROM "s/#" WHERE payload.t > 1'
    sample = {"topic": "s/1", "payload": {"t": 4}, "clientid": "dev"}
    result = http.post("/api/v1/rules/test", {"sql": sql, "sample": sample})
    assert result.status == 200
    assert result.json() == {
        "matched": True,
        "output": {"double": 8, "who": "DEV"},
        "reason": None,
        "error": None,
    }
    cold = http.post("/api/v1/rules/test", {"sql": sql, "sample": {**sample, "payload": {"t": 0}}})
    assert cold.json()["matched"] is False
    elsewhere = http.post("/api/v1/rules/test", {"sql": sql, "sample": {**sample, "topic": "x"}})
    assert elsewhere.json()["reason"] == "FROM does not match"
    event = http.post(
        "/api/v1/rules/test",
        {
            "sql": 'SELECT clientid, reason FROM "$events/client_disconnected"',
            "sample": {"event": "client.disconnected", "clientid": "c9", "reason": "normal"},
        },
    )
    assert event.json()["output"] == {"clientid": "c9", "reason": "normal"}
    broken = http.post("/api/v1/rules/test", {"sql": "SELECT x FROM 's/#' WHERE", "sample": {}})
    assert broken.status == 400
    assert broken.json()["detail"]["position"] == 25
    watcher.expect_no_message()
    assert http.get("/api/v1/rules").json() == []


def test_a_reload_applies_the_files_rules_and_keeps_the_apis(
    tmp_path: Path, gw: RunningGateway, http: Http
) -> None:
    assert http.post("/api/v1/rules", RULE).status == 201
    filed = [{"name": "filed", "sql": 'SELECT * FROM "f/#"', "actions": [{"type": "log"}]}]
    path = config_file(tmp_path, gw, rules=filed)
    gw.call(lambda: setattr(gw.gateway, "config_path", path))
    reply = http.post("/api/v1/reload")
    assert reply.status == 200
    assert "rule: added filed" in reply.json()["reloaded"]
    listed = {r["name"]: r["details"]["source"] for r in http.get("/api/v1/rules").json()}
    assert listed == {"copy": "api", "filed": "config"}
    config_file(tmp_path, gw, rules=[])
    assert "rule: removed filed" in http.post("/api/v1/reload").json()["reloaded"]
    assert [r["name"] for r in http.get("/api/v1/rules").json()] == ["copy"]


def test_a_gateway_started_without_rules_builds_its_engine_when_a_reload_adds_one(
    tmp_path: Path, gw: RunningGateway, clients: Clients
) -> None:
    # Nothing configured and the API not asked: no engine (gateway.app, Gateway.rules).
    assert gw.call(lambda: gw.gateway._rules) is None
    watcher = clients.subscriber(5, "out/#")
    device = clients.connect(5)
    path = config_file(tmp_path, gw, rules=[RULE])
    gw.call(lambda: setattr(gw.gateway, "config_path", path))
    assert "rule: added copy" in gw.call(gw.gateway.reload)
    device.publish("in/a", b'{"v": 12}', qos=1)
    assert watcher.expect_message().topic == "out/12"
    assert gw.call(lambda: gw.gateway.rules.statuses())[0]["hits"] == 1


def test_rules_sharing_a_filter_come_and_go_independently(http: Http, clients: Clients) -> None:
    watcher = clients.subscriber(5, "out/#")
    device = clients.connect(5)
    for name in ("a", "b"):
        rule = {
            "name": name,
            "sql": 'SELECT payload.v AS v FROM "in/#"',
            "actions": [{"type": "republish", "topic": f"out/{name}"}],
        }
        assert http.post("/api/v1/rules", rule).status == 201
    device.publish("in/x", b'{"v": 1}', qos=1)
    assert sorted(m.topic for m in watcher.expect_messages(2)) == ["out/a", "out/b"]
    assert http.delete("/api/v1/rules/a").status == 204
    device.publish("in/x", b'{"v": 2}', qos=1)
    assert watcher.expect_message().topic == "out/b"
    watcher.expect_no_message()
    assert http.post("/api/v1/rules/b/disable").status == 200
    device.publish("in/x", b'{"v": 3}', qos=1)
    watcher.expect_no_message()
    details = http.get("/api/v1/rules/b").json()["details"]
    assert (details["matched"], details["dropped"]) == (2, 0)
