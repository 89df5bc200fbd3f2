"""SIGTERM publishes the wills of every connected client, all protocol versions.

MQTT 3.1.1 [MQTT-3.1.2-8] (and 5.0 3.1.2.5): the will is published when the network
connection is closed without DISCONNECT; a server that stops closes them. A gateway
process with six connected clients with wills (MQTT 3.1, 3.1.1 and 5.0) gets SIGTERM;
a persistent QoS 1 subscriber connected at the time gets every will after the restart,
from its stored session. (Before, the 3.1 and 3.1.1 connections ended on a loop turn
after the store had closed, and their wills were lost.)

The wills go through the components too, before they stop: the stream log records them.

An MQTT 5 client's will with a Will Delay Interval stays pending, stored with its
persistent session and its due time, and is published after the restart once due, as
for a connection lost before the stop (``test_will_restart.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, free_port, start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.components.support import wait_for

CONFIG = "persistence: sqlite\n"
VERSIONS = (4, 5, 3, 4, 5, 4)


def watcher(broker: BrokerHandle, clean: bool) -> RawClient:
    client = RawClient(broker.host, broker.port)
    connack = client.do_connect(
        "st-watcher",
        proto_ver=5,
        clean_session=clean,
        properties={"session_expiry_interval": 300},
    )
    if clean:
        client.subscribe("st/#", 1)
    else:
        assert connack.session_present is True
    return client


def wills_received(client: RawClient, expected: set[str]) -> set[str]:
    """The will topics received (acknowledged), until ``expected`` or the deadline."""
    seen: set[str] = set()
    while not expected <= seen:
        packet = client.recv_publish(unit(15))
        assert packet.topic is not None
        seen.add(packet.topic)
    return seen


def test_sigterm_publishes_every_connected_clients_will(tmp_path: Path) -> None:
    broker = start_edgebus(tmp_path, CONFIG)
    clients: list[RawClient] = []
    try:
        watching = watcher(broker, clean=True)
        clients.append(watching)
        expected = set()
        for index, version in enumerate(VERSIONS):
            topic = f"st/v{version}-{index}"
            expected.add(topic)
            client = RawClient(broker.host, broker.port)
            client.do_connect(
                f"st{index}",
                proto_ver=version,
                will_topic=topic,
                will_payload=b"gone",
                will_qos=1,
            )
            clients.append(client)
        # A delayed will of a persistent MQTT 5 session: pending across the stop.
        delayed = RawClient(broker.host, broker.port)
        delayed.do_connect(
            "st-delayed",
            proto_ver=5,
            clean_session=False,
            properties={"session_expiry_interval": 300},
            will_topic="st/delayed",
            will_payload=b"later",
            will_qos=1,
            will_properties={"will_delay_interval": 2},
        )
        clients.append(delayed)
        expected.add("st/delayed")
        watching.ping()  # every CONNECT before it was handled
        broker.stop(unit(10))
        assert broker.process.returncode == 0, broker.log_tail()
        for client in clients:
            client.close()
        clients.clear()
        broker = start_edgebus(tmp_path, CONFIG)
        watching = watcher(broker, clean=False)
        clients.append(watching)
        assert wills_received(watching, expected) == expected
    finally:
        for client in clients:
            client.close()
        broker.stop()


def test_sigterm_gives_mqtt5_clients_disconnect_0x8b(tmp_path: Path) -> None:
    broker = start_edgebus(tmp_path, CONFIG)
    try:
        with RawClient(broker.host, broker.port) as v5, RawClient(broker.host, broker.port) as v4:
            v5.do_connect("st-v5", proto_ver=5)
            v4.do_connect("st-v4", proto_ver=4)
            broker.process.terminate()
            v5.expect_closed(
                unit(10),
                reason_code=mb.ReasonCode.SERVER_SHUTTING_DOWN,
                require_reason=True,
            )
            v4.expect_closed(unit(10), packet_type=None)
            broker.process.wait(unit(10))
            assert broker.process.returncode == 0, broker.log_tail()
    finally:
        broker.stop()


def test_sigterm_wills_reach_the_stream_log(tmp_path: Path) -> None:
    api_port = free_port()
    config = (
        f"persistence: sqlite\napi:\n  bind: 127.0.0.1:{api_port}\n  keys: ['{KEY}']\n"
        "stream:\n  enabled: true\n  topics: ['sw/#']\n"
    )
    broker = start_edgebus(tmp_path, config)
    clients: list[RawClient] = []
    expected = {f"sw/v{version}" for version in (3, 4, 5)}
    try:
        for version in (3, 4, 5):
            client = RawClient(broker.host, broker.port)
            client.do_connect(
                f"sw{version}", proto_ver=version, will_topic=f"sw/v{version}", will_qos=1
            )
            clients.append(client)
        clients[-1].ping()  # every CONNECT before it was handled
        broker.stop(unit(10))
        assert broker.process.returncode == 0, broker.log_tail()
        broker = start_edgebus(tmp_path, config)
        http = Http(f"http://127.0.0.1:{api_port}", bearer(KEY))
        reply = wait_for(lambda: http.get("/api/v1/stream/records"), lambda r: r.status == 200)
        topics = {json.loads(line)["topic"] for line in reply.text.splitlines()}
        assert topics == expected
    finally:
        for client in clients:
            client.close()
        broker.stop()
