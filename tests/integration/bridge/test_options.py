"""What the bridge says on the wire: CONNECT (MQTT 5 properties, 3.1.1 flags),
SUBSCRIBE options, the remote's Receive Maximum as the window; and the rate limit.

A recording remote (a socket of the test's own) answers CONNECT and SUBSCRIBE and keeps
every packet, read back with the independent parser of tests/helpers.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.bridge.support import (
    Collector,
    Remote,
    StreamPublisher,
    first_occurrences,
    wait_until,
)
from tests.integration.components.support import status_of


class RecordingRemote(threading.Thread):
    """Accepts one bridge; answers CONNECT (with ``connack_props``) and SUBSCRIBE; records."""

    def __init__(self, level: int, connack_props: dict[str, object] | None = None) -> None:
        super().__init__(daemon=True)
        self.level = level
        self.connack_props = connack_props or {}
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.packets: list[mb.Packet] = []

    def run(self) -> None:
        self.server.settimeout(unit(10))
        conn, _ = self.server.accept()
        conn.settimeout(unit(10))
        buffer = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buffer += data
                while (split := mb.split_packet(buffer)) is not None:
                    raw, buffer = split
                    packet = mb.parse_packet(raw, self.level)
                    self.packets.append(packet)
                    if packet.type == mb.PacketType.CONNECT:
                        props = self.connack_props if self.level == 5 else None
                        conn.sendall(
                            mb.gen_connack(False, 0, proto_ver=self.level, properties=props)
                        )
                    elif packet.type == mb.PacketType.SUBSCRIBE:
                        codes = [options & 3 for _, options in packet.subscriptions]
                        conn.sendall(
                            mb.gen_suback(packet.packet_id or 0, codes, proto_ver=self.level)
                        )

    def first(self, kind: int) -> mb.Packet:
        return wait_until(
            lambda: [p for p in self.packets if p.type == kind], lambda found: bool(found)
        )[0]


def test_mqtt5_connect_properties_subscription_options_and_receive_maximum(
    tmp_path: Path,
) -> None:
    remote = RecordingRemote(5, {"receive_maximum": 3})
    remote.start()
    config = f"""
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    client_id: gw-props
    username: gw
    password: s3cret
    keepalive: 30s
    clean_start: true
    max_inflight: 50
    connect_properties:
      session_expiry_interval: 1h
      receive_maximum: 20
      maximum_packet_size: 1MB
      topic_alias_maximum: 5
      request_problem_information: false
      user_properties: {{site: berlin}}
    forwards: [{{local: "up/#", qos: 1}}]
    subscriptions:
      - {{remote: "down/a/#", qos: 2, no_local: true, retain_as_published: true,
          retain_handling: 2}}
      - {{remote: "down/b/#", qos: 0, no_local: false}}
"""
    with running_gateway(tmp_path, config) as gw:
        connect = remote.first(mb.PacketType.CONNECT)
        subscribe = remote.first(mb.PacketType.SUBSCRIBE)
        wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running")
        window = gw.call(lambda: gw.gateway.components.instance("bridge", "cloud").describe())
    assert (connect.protocol_level, connect.client_id, connect.keepalive) == (5, "gw-props", 30)
    assert connect.clean_session
    assert (connect.username, connect.password) == ("gw", b"s3cret")
    props = connect.properties
    assert props["session_expiry_interval"] == 3600
    assert props["receive_maximum"] == 20
    assert props["maximum_packet_size"] == 1_000_000
    assert props["topic_alias_maximum"] == 5
    assert props["request_problem_information"] == 0
    assert connect.user_properties == [("site", "berlin")]
    # options byte: QoS | no local 0x04 | retain as published 0x08 | retain handling << 4
    assert subscribe.subscriptions == [("down/a/#", 2 | 0x04 | 0x08 | 0x20), ("down/b/#", 0)]
    assert window["window"] == 3  # the remote's Receive Maximum, below max_inflight


def test_mqtt311_connect(tmp_path: Path) -> None:
    remote = RecordingRemote(4)
    remote.start()
    config = f"""
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    protocol_version: "3.1.1"
    keepalive: 45s
    forwards: [{{local: "up/#"}}]
"""
    with running_gateway(tmp_path, config) as gw:
        connect = remote.first(mb.PacketType.CONNECT)
        wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running")
    assert (connect.protocol_level, connect.keepalive, connect.clean_session) == (4, 45, False)
    assert connect.client_id == "edgebus@127.0.0.1-cloud"  # <node_name>-<name>


def test_the_rate_limit_spreads_a_backlog_over_time(tmp_path: Path) -> None:
    rate, count = 200, 600
    remote = Remote(tmp_path / "remote")
    with remote:  # the subscriber's session waits at the remote, which is down meanwhile
        Collector(remote.port, "r/#", "cloud-sub").close()
    config = f"""
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    queue: {{rate_limit: {rate}}}
    forwards: [{{local: "r/#", qos: 1}}]
"""
    with running_gateway(tmp_path, config) as gw:
        assert StreamPublisher(gw.port, "r/x", count).done_after_start() == list(
            range(1, count + 1)
        )
        with remote:
            started = time.monotonic()
            cloud = Collector(remote.port, "r/#", "cloud-sub")
            wait_until(cloud.count, lambda n: n >= count, seconds=30)
            elapsed = time.monotonic() - started
            cloud.close()
            stats = status_of(gw, "bridge", "cloud")["component_stats"]
    assert first_occurrences([int(p) for p in cloud.payloads()]) == list(range(1, count + 1))
    # A token bucket of one second: the first `rate` at once, then `rate` per second. A
    # lower bound only (a loaded machine is slower, never faster).
    assert elapsed >= (count - rate) / rate * 0.9
    assert stats["sent"] == count
