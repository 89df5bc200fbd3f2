"""Subscriptions with ``retain: true`` against a real mosquitto (MQTT 5): retained
messages published at the remote after the bridge subscribed, and their clears, reach the
local retained store (the bridge asks Retain As Published); and a remote message whose
local template cannot be filled is counted as a mapping drop."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho

from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.bridge.support import Collector, Remote, paho_client, wait_until
from tests.integration.components.support import status_of


def _retained_at(port: int, topic: str, client_id: str) -> list[bytes]:
    """What a new local subscriber of ``topic`` gets as retained: subscribes, then
    publishes a non-retained marker to ``topic`` itself; a retained message comes
    before the marker, which comes last."""
    got: list[tuple[bytes, bool]] = []
    subscribed = threading.Event()
    marker = threading.Event()

    def on_message(client: paho.Client, userdata: object, message: paho.MQTTMessage) -> None:
        if message.payload == b"marker" and not message.retain:
            marker.set()
        else:
            got.append((bytes(message.payload), message.retain))

    client = paho_client(client_id)
    client.on_message = on_message
    client.on_subscribe = lambda *a: subscribed.set()
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        client.subscribe(topic, 1)
        assert subscribed.wait(unit(10))
        client.publish(topic, b"marker", qos=1).wait_for_publish(unit(5))
        assert marker.wait(unit(10)), "the marker did not come back"
    finally:
        client.disconnect()
        client.loop_stop()
    assert all(retain for _, retain in got), got
    return [payload for payload, _ in got]


@contextmanager
def _bridged(
    tmp_path: Path, subscription: str, local_filter: str
) -> Iterator[tuple[Any, Collector, paho.Client]]:
    """A gateway whose MQTT 5 bridge ``cloud`` to a mosquitto remote has ``subscription``
    (YAML flow mapping), running; a local subscriber of ``local_filter``; a publisher on
    the remote."""
    with Remote(tmp_path / "remote") as remote:
        config = f"""
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    protocol_version: "5"
    subscriptions: [{subscription}]
"""
        with running_gateway(tmp_path, config) as gw:
            wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running")
            live = Collector(gw.port, local_filter, "local-live")
            remote_pub = paho_client("remote-pub")
            remote_pub.connect("127.0.0.1", remote.port)
            remote_pub.loop_start()
            try:
                yield gw, live, remote_pub
            finally:
                live.close()
                remote_pub.disconnect()
                remote_pub.loop_stop()


def test_live_remote_retained_messages_and_clears_reach_the_local_store(
    tmp_path: Path,
) -> None:
    with _bridged(tmp_path, "{remote: rt/#, qos: 1, retain: true}", "rt/#") as (
        gw,
        live,
        remote_pub,
    ):
        # Retained at the remote after the bridge subscribed: a live delivery.
        remote_pub.publish("rt/a", b"v1", qos=1, retain=True).wait_for_publish(unit(5))
        wait_until(live.payloads, lambda p: b"v1" in p)
        assert _retained_at(gw.port, "rt/a", "fresh-1") == [b"v1"]
        remote_pub.publish("rt/a", b"v2", qos=1, retain=True).wait_for_publish(unit(5))
        wait_until(live.payloads, lambda p: b"v2" in p)
        assert _retained_at(gw.port, "rt/a", "fresh-2") == [b"v2"]
        # The remote's clear (an empty retained message) clears the local one.
        remote_pub.publish("rt/a", b"", qos=1, retain=True).wait_for_publish(unit(5))
        wait_until(live.payloads, lambda p: b"" in p)
        assert _retained_at(gw.port, "rt/a", "fresh-3") == []


def test_an_inbound_template_that_cannot_be_filled_is_a_mapping_drop(tmp_path: Path) -> None:
    subscription = '{remote: "sm/{a}/{b#}", local: "lm/{b}/{a}", qos: 1}'
    with _bridged(tmp_path, subscription, "lm/#") as (gw, live, remote_pub):
        # sm/A: {b#} is empty, lm//A has an empty level; sm/A/x/y fills it.
        remote_pub.publish("sm/A", b"no", qos=1).wait_for_publish(unit(5))
        remote_pub.publish("sm/A/x/y", b"yes", qos=1).wait_for_publish(unit(5))
        wait_until(live.payloads, lambda p: b"yes" in p)
        stats = wait_until(
            lambda: status_of(gw, "bridge", "cloud")["component_stats"],
            lambda s: s["received"] >= 2,
        )
    assert live.messages == [("lm/x/y/A", b"yes")]
    assert stats["unmatched"] == 0
    assert stats["dropped_mapping_inbound"] == 1
    assert stats["dropped_mapping"] == 1
    assert stats["dropped"] == 1
