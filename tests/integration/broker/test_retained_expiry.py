"""Expired retained messages are deleted (MQTT 5.0 3.3.2.3.3; mosquitto and EMQX too).

Once its Message Expiry Interval has passed, a retained message is gone: not sent to new
subscribers, not listed by the API, not counted, not holding a place under
``mqtt.max_retained_messages``, and not loaded back after a restart (the store keeps
when it was published, so the downtime counts). A live one shows the seconds it has left.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.broker.support import Clients, publish_props, wait_until

API = f'api:\n  keys: ["{KEY}"]\n'


def expiry_of(message: mqtt.MQTTMessage) -> int:
    """The Message Expiry Interval a subscriber received."""
    return int(getattr(message.properties, "MessageExpiryInterval"))  # noqa: B009


def test_expired_retained_messages_are_deleted(tmp_path: Path) -> None:
    config = API + "mqtt:\n  max_retained_messages: 3\n"
    with running_gateway(tmp_path, config) as gw:
        address = gw.gateway.api_address
        assert address is not None
        http = Http(f"http://{address[0]}:{address[1]}", bearer(KEY))
        clients = Clients(gw)
        try:
            pub = clients.connect(5)
            short = publish_props(MessageExpiryInterval=1)
            assert pub.publish("exp/1", b"short-lived", 1, True, short) == 0x10
            assert pub.publish("exp/2", b"short-lived", 1, True, short) == 0x10
            published = time.time()
            long = publish_props(MessageExpiryInterval=100)
            assert pub.publish("keep/1", b"kept", 1, True, long) == 0x10

            # The periodic sweep removes them, with nobody reading the store.
            wait_until(lambda: gw.call(lambda: len(gw.broker.retained)) == 1, unit(10))
            assert time.time() - published >= 1
            assert http.get("/api/v1/retained/exp/1").status == 404
            listed = http.get("/api/v1/retained").json()
            assert [item["topic"] for item in listed["items"]] == ["keep/1"]
            assert listed["total"] == 1
            left = listed["items"][0]["properties"]["message_expiry_interval"]
            assert 1 <= left <= 99  # the seconds left, not the 100 it was published with
            one = http.get("/api/v1/retained/keep/1").json()
            assert one["properties"]["message_expiry_interval"] <= 99
            assert http.get("/api/v1/metrics").json()["messages"]["retained"] == 1

            # Their places under max_retained_messages are free again.
            assert pub.publish("live/1", b"fresh", 1, True) == 0x10
            assert pub.publish("live/2", b"fresh", 1, True) == 0x10
            assert pub.publish("live/3", b"over", 1, True) == 0x97  # 3 held: the bound
            assert http.get("/api/v1/retained/live/1").status == 200

            sub = clients.connect(5)
            assert sub.subscribe("#", 1) == [1]
            got = {m.topic: m for m in sub.expect_messages(3, unit(10))}
            assert sorted(got) == ["keep/1", "live/1", "live/2"]
            sub.expect_no_message()
            assert expiry_of(got["keep/1"]) <= 99
        finally:
            clients.close_all()


def test_a_retained_message_that_expired_while_the_broker_was_down_is_not_loaded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = "persistence: sqlite\napi:\n  enabled: false\n"
    with running_gateway(tmp_path, config) as gw:
        clients = Clients(gw)
        pub = clients.connect(5)
        published = time.time()
        short = publish_props(MessageExpiryInterval=1)
        assert pub.publish("r/short", b"short-lived", 1, True, short) == 0x10
        long = publish_props(MessageExpiryInterval=3600)
        assert pub.publish("r/long", b"kept", 1, True, long) == 0x10  # PUBACK: stored
        clients.close_all()
    # Down while its second runs out; it was not expired when the gateway stopped.
    assert time.time() - published < 1
    wait_until(lambda: time.time() - published > 1.5, unit(10), "r/short's expiry")

    caplog.set_level(logging.INFO, logger="broker_core.broker")
    with running_gateway(tmp_path, config) as gw:
        assert gw.call(lambda: len(gw.broker.retained)) == 1
        loaded = [r.getMessage() for r in caplog.records if "expired while" in r.getMessage()]
        assert loaded == ["store: 1 retained messages expired while the broker was down"]
        clients = Clients(gw)
        try:
            sub = clients.connect(5)
            assert sub.subscribe("r/#", 1) == [1]
            message = sub.expect_message(unit(10))
            assert message.topic == "r/long"
            assert 3590 <= expiry_of(message) <= 3600
            sub.expect_no_message()
        finally:
            clients.close_all()

    caplog.clear()
    with running_gateway(tmp_path, config) as gw:  # deleted from the store, not just skipped
        assert gw.call(lambda: [c.topic for c in gw.broker.retained]) == ["r/long"]
    assert [r for r in caplog.records if "expired while" in r.getMessage()] == []
