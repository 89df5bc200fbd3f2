"""Overload protection: connection limits and rates, publish rate, slow consumers."""

from __future__ import annotations

import select
import socket
import threading
import time
from pathlib import Path

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit


def connack_code(port: int, client_id: str, level: int = 5) -> int:
    client = RawClient("127.0.0.1", port, protocol_level=level)
    client.send(mb.gen_connect(client_id, proto_ver=level))
    code = client.recv_packet().reason_code
    client.close()
    return code


def test_max_connections_per_listener(tmp_path: Path) -> None:
    config = "listeners:\n  - type: tcp\n    bind: 127.0.0.1:0\n    max_connections: 2\n"
    with running_gateway(tmp_path, config) as gw:
        held = [RawClient("127.0.0.1", gw.port, protocol_level=5) for _ in range(2)]
        for i, client in enumerate(held):
            client.send(mb.gen_connect(f"held{i}", proto_ver=5))
            assert client.recv_packet().reason_code == 0
        assert connack_code(gw.port, "third") == 0x97  # Quota exceeded
        assert connack_code(gw.port, "third-v3", 4) == 3  # 3.1.1: server unavailable
        held[0].close()
        deadline = time.monotonic() + unit(5)
        while gw.call(lambda: len(gw.broker.connections)) > 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert connack_code(gw.port, "room-again") == 0


def test_connection_rate_per_listener(tmp_path: Path) -> None:
    config = "listeners:\n  - type: tcp\n    bind: 127.0.0.1:0\n    connection_rate: 2\n"
    with running_gateway(tmp_path, config) as gw:
        codes = [connack_code(gw.port, f"burst{i}") for i in range(5)]
        assert codes[:2] == [0, 0]
        assert 0x9F in codes[2:]  # Connection rate exceeded


def test_publish_rate_slows_a_publisher_without_losing_messages(tmp_path: Path) -> None:
    # 60 QoS 1 PUBLISH unacknowledged at once: within Receive Maximum (MQTT 5.0 3.3.4).
    config = "mqtt:\n  publish_rate: 50\n  publish_burst: 10\n  receive_maximum: 100\n"
    with running_gateway(tmp_path, config) as gw:
        sub = RawClient("127.0.0.1", gw.port, protocol_level=5)
        sub.send(mb.gen_connect("rate-sub", proto_ver=5))
        sub.recv_packet()
        sub.send(mb.gen_subscribe(1, "rate/#", 1, proto_ver=5))
        sub.recv_packet()
        pub = RawClient("127.0.0.1", gw.port, protocol_level=5)
        pub.send(mb.gen_connect("rate-pub", proto_ver=5))
        pub.recv_packet()
        started = time.monotonic()
        pub.send(
            b"".join(
                mb.gen_publish("rate/t", str(i), qos=1, mid=i + 1, proto_ver=5) for i in range(60)
            )
        )
        got = []
        while len(got) < 60:
            packet = sub.recv_packet(unit(10))
            got.append(int(packet.payload))
            sub.send(mb.gen_puback(packet.packet_id, proto_ver=5))
        assert got == list(range(60))
        # 60 messages at 50/s with a burst of 10 cannot all pass in under ~1 s.
        assert time.monotonic() - started >= 0.8


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


class _AckCounter(threading.Thread):
    """Reads a publisher's socket on its own thread, counting PUBACK bytes (4 each).

    It polls with ``select`` and never changes the socket's timeout, which the thread
    flooding the same socket relies on."""

    def __init__(self, sock: socket.socket, expected_bytes: int) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.expected_bytes = expected_bytes
        self.received = 0
        self.done = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and self.received < self.expected_bytes:
            readable, _, _ = select.select([self.sock], [], [], 0.1)
            if not readable:
                continue
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            self.received += len(chunk)
        self.done.set()


def test_a_subscriber_that_stops_reading_does_not_grow_memory(tmp_path: Path) -> None:
    """A QoS 0/1 flood to a subscriber that never reads: the broker pauses writing at
    its high-water mark, queues up to max_queued_messages and drops the rest by policy."""
    config = "mqtt:\n  max_queued_messages: 100\n  write_high_water: 256KB\n"
    with running_gateway(tmp_path, config) as gw:
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.settimeout(unit(5))
        slow.connect(("127.0.0.1", gw.port))
        slow.sendall(mb.gen_connect("slow", proto_ver=4) + mb.gen_subscribe(1, "flood/#", 1))
        assert _recv_exactly(slow, 9) == bytes.fromhex("20020000" "9003000101")  # CONNACK, SUBACK
        pub = RawClient("127.0.0.1", gw.port)
        pub.send(mb.gen_connect("flooder"))
        pub.recv_packet()
        payload = b"x" * 1024
        chunk = b"".join(
            mb.gen_publish("flood/t", payload, qos=1, mid=(i % 60000) + 1) for i in range(1000)
        )
        chunks = 100  # 100 000 messages, 100 MiB of payload
        before = _rss_kib()
        acks = _AckCounter(pub.sock, 4 * 1000 * chunks)
        acks.start()
        pub.sock.settimeout(unit(60))  # the broker may pause reading under load
        try:
            for _ in range(chunks):
                pub.sock.sendall(chunk)
            assert acks.done.wait(unit(60))  # every PUBLISH handled: all acknowledged
        finally:
            acks.stop.set()
            acks.join(unit(5))
        assert acks.received == 4 * 1000 * chunks
        grown_mib = (_rss_kib() - before) / 1024

        def backlog() -> tuple[int, int]:
            state = gw.broker.sessions.get("slow")
            assert state is not None and state.connection is not None
            return len(state.queue or ()), gw.broker.counters.dropped_queue_full

        queued, dropped = gw.call(backlog)
        assert queued <= 100
        assert dropped > 0
        assert grown_mib < 40
        slow.close()
        pub.close()
