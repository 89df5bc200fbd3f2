"""A topic a rule or an adapter renders from a client's payload must be a valid topic name.

A rule's republish (`topic: "r/{t}"`) and the loopback adapter's target
(`l/{payload.t}`) make their topic from what an MQTT client sent. One over 65535 bytes of
UTF-8 [MQTT-1.5.4], or holding a surrogate code point (JSON's "\\ud800") that UTF-8 cannot
encode, is no topic name: the hub refuses it (0x90) before the retained store and
routing, the rule counts a failed action with a warning, the adapter's hub client counts
it as denied, and nobody else notices. A store that already holds such a message (written
before the hub refused them) drops it on load with a warning.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from broker_core.context import Context, Origin
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.broker.support import Clients, connect_props, wait_until

TOO_LONG = "a" * 65534  # "r/" + this: 65536 bytes
CONFIG = f"""
api:
  keys: ["{KEY}"]
rules:
  - name: rr
    sql: 'SELECT payload.t AS t FROM "in/#"'
    actions: [{{type: republish, topic: "r/{{t}}", qos: 1, retain: true}}]
adapters:
  - type: loopback
    name: lb
    mappings: [{{source: "lin/{{x}}", target: "l/{{payload.t}}", decode: json, qos: 1}}]
"""


def http_of(gw: RunningGateway) -> Http:
    address = gw.gateway.api_address
    assert address is not None
    return Http(f"http://{address[0]}:{address[1]}", bearer(KEY))


def test_rule_and_adapter_topics_that_are_no_topic_names_are_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    with running_gateway(tmp_path, CONFIG) as gw:
        clients = Clients(gw)
        try:
            http = http_of(gw)
            wait_until(lambda: http.get("/api/v1/adapters/lb").json()["state"] == "running")
            early = clients.subscriber(5, "#", 1)
            pub = clients.connect(5)
            bad = [json.dumps({"t": TOO_LONG}), '{"t": "\\ud800"}']
            for payload in bad:
                assert pub.publish("in/1", payload, 1) == 0
                assert pub.publish("lin/1", payload, 1) == 0
            # Then valid ones: both paths still work, and everything before was handled.
            assert pub.publish("in/2", json.dumps({"t": "fine"}), 1) == 0
            assert pub.publish("lin/2", json.dumps({"t": "fine"}), 1) == 0
            seen: set[str] = set()
            while not {"r/fine", "l/fine"} <= seen:
                seen.add(early.expect_message(unit(10)).topic)
            assert seen == {"in/1", "lin/1", "in/2", "lin/2", "r/fine", "l/fine"}
            assert early.is_connected

            actions = http.get("/api/v1/rules/rr").json()["details"]["actions"]
            assert [(a["succeeded"], a["failed"]) for a in actions] == [(1, 2)]
            adapter = http.get("/api/v1/adapters/lb").json()
            assert (adapter["state"], adapter["restarts"]) == ("running", 0)
            # Refused by the hub (its "denied") or found by the adapter's own mapping first
            # (its "failed"): counted either way, and never republished.
            details = adapter["details"]
            assert details["stats"]["denied"] + details["component_stats"]["failed"] == 2
            retained = http.get("/api/v1/retained", auth=True).json()
            assert [item["topic"] for item in retained["items"]] == ["r/fine"]

            # A later subscriber to # gets the one retained message and stays connected.
            late = clients.subscriber(5, "#", 1)
            assert late.expect_message(unit(10)).topic == "r/fine"
            late.expect_no_message()
            assert late.is_connected
        finally:
            clients.close_all()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    refusals = [r.getMessage() for r in caplog.records if "topic name invalid" in r.getMessage()]
    assert any("rule rr: action republish failed" in m for m in refusals)
    assert all(len(m) < 500 for m in refusals)  # the topic abbreviated, not 64 KiB


@pytest.mark.parametrize(
    "topic",
    ["", "t/" + TOO_LONG, "t/\ud800", "t/\0", "t/+", "t/#"],
    ids=["empty", "65536 bytes", "surrogate", "NUL", "plus", "hash"],
)
def test_the_hub_refuses_a_topic_that_is_no_topic_name(tmp_path: Path, topic: str) -> None:
    config = "api:\n  enabled: false\n"
    with running_gateway(tmp_path, config) as gw:
        clients = Clients(gw)
        try:
            watcher = clients.subscriber(5, "#", 1)
            client = gw.call(lambda: gw.gateway.hub.client("test", "template"))
            codes: list[int] = []
            for retain in (False, True):
                message = client.context(topic, b"x", 1, retain)

                def publish(m: Context = message) -> bool:
                    return client.publish(m, codes.append)

                assert gw.call(publish) is False
            assert codes == [0x90, 0x90]
            assert client.denied == 2
            assert client.refusal.startswith("topic name invalid: a topic name must")
            assert gw.call(lambda: gw.broker.counters.publish_denied) == 2
            assert gw.call(lambda: len(gw.broker.retained)) == 0
            # A valid one goes through; the watcher saw nothing before it.
            ok = client.context("t/ok", b"x", 1)
            assert gw.call(lambda: client.publish(ok)) is True
            assert watcher.expect_message(unit(10)).topic == "t/ok"
            assert watcher.is_connected
        finally:
            clients.close_all()


def test_a_stored_message_whose_topic_is_no_topic_name_is_dropped_on_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = "persistence: sqlite\napi:\n  enabled: false\n"
    poison = Context("r/" + TOO_LONG, b"poison", 1, True, origin=Origin("rule", "rr"))
    with running_gateway(tmp_path, config) as gw:
        clients = Clients(gw)
        away = clients.connect(
            5, "away", clean=False, properties=connect_props(SessionExpiryInterval=3600)
        )
        assert away.subscribe("r/#", 1) == [1]
        away.disconnect()
        wait_until(lambda: clients.offline("away"))
        # What the hub did before it refused such topics: retained, queued for "away",
        # both written to the store (Broker.publish is the policy-free in-process path).
        assert gw.call(lambda: gw.broker.publish(poison)) == 1
        pub = clients.connect(5)
        assert pub.publish("r/ok", b"ok", 1, retain=True) == 0  # its PUBACK: all is stored
        clients.close_all()

    caplog.set_level(logging.WARNING)
    with running_gateway(tmp_path, config) as gw:
        clients = Clients(gw)
        try:
            assert gw.call(lambda: [c.topic for c in gw.broker.retained]) == ["r/ok"]
            sub = clients.subscriber(5, "#", 1)
            assert sub.expect_message(unit(10)).topic == "r/ok"
            away = clients.connect(
                5, "away", clean=False, properties=connect_props(SessionExpiryInterval=3600)
            )
            assert away.connack is not None and away.connack.session_present
            assert away.expect_message(unit(10)).topic == "r/ok"
            away.expect_no_message()
            assert sub.is_connected and away.is_connected
        finally:
            clients.close_all()
    dropped = [r.getMessage() for r in caplog.records if "dropped: a topic name" in r.getMessage()]
    assert len(dropped) == 2  # the retained message and the queued one
    assert all("65536 characters" in m for m in dropped)

    caplog.clear()
    with running_gateway(tmp_path, config) as gw:  # the store forgot them
        assert gw.call(lambda: [c.topic for c in gw.broker.retained]) == ["r/ok"]
    assert [r for r in caplog.records if "dropped: a topic name" in r.getMessage()] == []
