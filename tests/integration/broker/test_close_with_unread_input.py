"""A connection the broker closes with the client's input still unread gets its DISCONNECT.

Closing a socket with unread bytes in its receive buffer makes the kernel send a reset,
which can discard what the broker wrote last (the DISCONNECT and its reason code) before
the client reads it. The broker ends such a connection with a FIN after its DISCONNECT
and drops what the client still sends until it closes (``listeners.connection``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import uvloop

from broker_core.listeners import linger
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
CONFIG = json.dumps(
    {
        "listeners": [{"type": "tcp", "name": "tcp", "bind": "127.0.0.1:0"}],
        "api": {"enabled": False},
    }
)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the broker sent before its FIN; a reset fails the test."""
    received = b""
    sock.settimeout(unit(10))
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return received
        received += chunk


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_malformed_packet_amid_a_stream_gets_its_disconnect(tmp_path: Path, loop: str) -> None:
    with running_gateway(tmp_path, CONFIG, LOOPS[loop]) as gw:
        for attempt in range(5):
            with socket.create_connection(gw.address("tcp"), timeout=unit(10)) as sock:
                sock.sendall(mb.gen_connect(f"unread{attempt}", proto_ver=5))
                assert mb.parse_packet(sock.recv(64), 5).name == "CONNACK"
                malformed = b"\x36\x02\x00\x00"  # PUBLISH with QoS 3
                rest = mb.gen_publish("t", b"x" * 1000, proto_ver=5) * 500
                sock.sendall(malformed + rest)  # the broker reads on past its DISCONNECT
                received = read_until_closed(sock)
            packet = mb.parse_packet(received, 5)
            assert packet.name == "DISCONNECT"
            assert packet.reason_code == 0x81  # Malformed Packet


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + unit(10)
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within the deadline: {what}")
        time.sleep(0.01)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_lingering_sockets_are_bounded_and_counted(
    tmp_path: Path, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the bound, a connection the broker closes closes at once (limit ``lingering``);
    a lingering socket stops counting when its peer closes."""
    monkeypatch.setattr(linger, "LINGER_S", unit(60))  # the first lingers all along
    with running_gateway(tmp_path, CONFIG, LOOPS[loop]) as gw:
        lingering = gw.broker.connections.lingering
        gw.call(lambda: setattr(lingering, "limit", 1))
        socks = []
        for name in ("first", "second"):
            sock = socket.create_connection(gw.address("tcp"), timeout=unit(10))
            socks.append(sock)
            sock.sendall(mb.gen_connect(name, proto_ver=5))
            assert mb.parse_packet(sock.recv(64), 5).name == "CONNACK"
            sock.sendall(b"\x36\x02\x00\x00")  # malformed: the broker closes, having written
        first, second = socks
        packet = mb.parse_packet(read_until_closed(first), 5)  # FIN after the DISCONNECT
        assert (packet.name, packet.reason_code) == ("DISCONNECT", 0x81)
        hits = gw.broker.counters.limit_hits
        _until(lambda: gw.call(lambda: hits["lingering"]) == 1, "the second closed at once")
        assert gw.call(lambda: lingering.count) == 1  # the first still lingers
        first.close()  # its peer is done: it stops lingering
        _until(lambda: gw.call(lambda: lingering.count) == 0, "the first stopped lingering")
        second.close()
