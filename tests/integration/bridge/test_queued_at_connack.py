"""Messages the remote queued for the bridge's persistent session arrive right after the
CONNACK, often in the same TCP segment, before the bridge has set up its side of the
connection: each is brought in once and acknowledged, and the first connection stays up.

The remote is a real mosquitto (logging every packet, so its log shows the bridge's
PUBACKs); the bridge's gateway runs twice: the first run makes the remote session and its
subscription, the messages are published while it is stopped, the second run receives
them as it connects. A local subscriber with a persistent session (``persistence:
sqlite``) sees what the bridge brought in.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import paho.mqtt.client as paho
import pytest
import uvloop

from tests.helpers.brokers import BrokerHandle, start_mosquitto
from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.bridge.support import paho_client, wait_until
from tests.integration.components.support import status_of

CLIENT_ID = "gw-queued"


def _gateway(remote: BrokerHandle, version: str) -> str:
    expiry = "connect_properties: {session_expiry_interval: 1h}" if version == "5" else ""
    return f"""
persistence: sqlite
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    protocol_version: "{version}"
    client_id: {CLIENT_ID}
    clean_start: false
    {expiry}
    keepalive: 5s
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    subscriptions:
      - {{remote: "cmd/{{rest#}}", local: "in/{{rest}}", qos: 1}}
"""


class _LocalSubscriber:
    """A paho client at the gateway with a persistent session on ``in/#`` (QoS 1)."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.client: paho.Client | None = None

    def connect(self, port: int) -> None:
        subscribed = threading.Event()
        client = paho_client("local-sub", clean_session=False)
        client.on_connect = lambda c, u, f, rc, p: c.subscribe("in/#", 1)
        client.on_subscribe = lambda *a: subscribed.set()
        client.on_message = self._message
        client.connect("127.0.0.1", port, keepalive=30)
        client.loop_start()
        assert subscribed.wait(unit(10)), "the local subscriber could not subscribe"
        self.client = client

    def _message(self, client: paho.Client, userdata: object, message: paho.MQTTMessage) -> None:
        with self.lock:
            self.messages.append((message.topic, bytes(message.payload)))

    def received(self) -> list[tuple[str, bytes]]:
        with self.lock:
            return list(self.messages)

    def disconnect(self) -> None:
        assert self.client is not None
        self.client.disconnect()
        self.client.loop_stop()
        self.client = None


def _pubacks_from_bridge(remote: BrokerHandle) -> Callable[[], int]:
    return lambda: remote.stderr_path.read_text(errors="replace").count(
        f"Received PUBACK from {CLIENT_ID} "
    )


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_messages_queued_at_the_remote_arrive_with_the_connack(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, version: str, loop: str
) -> None:
    loop_factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    config = None
    local = _LocalSubscriber()
    with start_mosquitto(tmp_path / "remote") as remote:
        config = _gateway(remote, version)
        pubacks = _pubacks_from_bridge(remote)
        publisher = paho_client("remote-pub")
        publisher.connect("127.0.0.1", remote.port)
        publisher.loop_start()

        # First run: the bridge's persistent session and subscription at the remote.
        with running_gateway(tmp_path / "gw", config, loop_factory) as gw:
            local.connect(gw.port)
            wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running")
            # Subscribed at the remote once a message published there comes in.
            publisher.publish("cmd/warm-up", b"w", qos=1).wait_for_publish(unit(5))
            wait_until(local.received, lambda got: ("in/warm-up", b"w") in got)
            wait_until(pubacks, lambda n: n >= 1)
            local.disconnect()

        # Queued at the remote for the bridge's session while the gateway is stopped.
        for payload in (b"q1", b"q2"):
            publisher.publish("cmd/x", payload, qos=1).wait_for_publish(unit(5))

        caplog.clear()
        caplog.set_level(logging.INFO)
        with running_gateway(tmp_path / "gw", config, loop_factory) as gw:
            local.connect(gw.port)
            wait_until(local.received, lambda got: len(got) >= 3)
            # Each acknowledged to the remote (which then forgets it).
            wait_until(pubacks, lambda n: n >= 3)
            stats = status_of(gw, "bridge", "cloud")["component_stats"]
            local.disconnect()
        publisher.disconnect()
        publisher.loop_stop()

    assert local.received() == [("in/warm-up", b"w"), ("in/x", b"q1"), ("in/x", b"q2")]
    # The first connection of the second run took them: it never failed.
    assert (stats["connects"], stats["connect_failures"]) == (1, 0)
    assert stats["received"] == 2
    problems = [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.ERROR or "connection lost" in record.getMessage()
    ]
    assert problems == []
