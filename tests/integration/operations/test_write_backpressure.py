"""A client that sends without reading the broker's answers cannot make the broker buffer
them without bound: over ``mqtt.write_high_water`` the broker stops reading from it (TCP
then holds the client back, limit ``write_high_water``), and once the client reads,
everything it sent is answered. Meanwhile its keep alive does not expire: what it sent
waits on the broker (``Connections.sweep``); a client that sent nothing still times out.

Without the pause, asyncio's transport buffers every PINGRESP (mosquitto does the same:
a 20 s PINGREQ flood grows either by tens of MB).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import uvloop

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
HIGH_WATER = 64 * 1024
CONFIG = f"mqtt:\n  write_high_water: {HIGH_WATER}\n  read_budget: 16KiB\napi:\n  enabled: false\n"
PINGREQ, PINGRESP = b"\xc0\x00", b"\xd0\x00"
KEEP_ALIVE_S = 5
CHUNK = PINGREQ * 8192  # 16 KiB of PINGREQ: 16 KiB of PINGRESP to send back
# What the broker may hold for one client: its high-water mark, plus the answers to one
# read budget it handles after crossing it, plus what one more read hands over at once.
BUFFER_BOUND = HIGH_WATER + 16 * 1024 + 256 * 1024


def largest_write_buffer(gw: RunningGateway) -> int:
    def sizes() -> int:
        return max(
            (
                conn.transport.get_write_buffer_size()
                for conn in gw.broker.connections
                if conn.transport is not None
            ),
            default=0,
        )

    return gw.call(sizes)


def flood_until_held_back(sock: socket.socket, gw: RunningGateway) -> int:
    """Sends PINGREQs without reading until a send stays blocked; returns the bytes sent
    (a PINGREQ may be cut in two by a partial send)."""
    sock.settimeout(unit(1))
    sent = 0
    deadline = time.monotonic() + unit(60)
    while True:
        assert time.monotonic() < deadline, "the broker never stopped reading"
        offset = sent % len(CHUNK)
        try:
            sent += sock.send(CHUNK[offset:])
        except TimeoutError:
            return sent
        assert largest_write_buffer(gw) <= BUFFER_BOUND


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(1 << 16, size - len(data)))
        assert chunk, "the broker closed the connection"
        data += chunk
    return bytes(data)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_client_that_does_not_read_is_held_back_and_loses_nothing(
    tmp_path: Path, loop: str
) -> None:
    with running_gateway(tmp_path, CONFIG, LOOPS[loop]) as gw:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        sock.connect(("127.0.0.1", gw.port))
        with sock:
            sock.settimeout(unit(10))
            sock.sendall(mb.gen_connect("flooder", keepalive=KEEP_ALIVE_S))
            assert read_exactly(sock, 4)[:1] == b"\x20"  # CONNACK
            sent = flood_until_held_back(sock, gw)
            assert gw.call(lambda: gw.broker.counters.limit_hits["write_high_water"]) >= 1
            # Long past its keep alive: still connected, its PINGREQs wait on the broker.
            gw.call(lambda: gw.broker.connections.sweep(time.time() + 10 * KEEP_ALIVE_S))
            assert gw.call(lambda: len(gw.broker.connections)) == 1
            # Reading now: every PINGREQ sent is answered, the held-back ones too.
            sock.settimeout(unit(30))
            pings = sent // len(PINGREQ)
            assert read_exactly(sock, pings * len(PINGRESP)) == PINGRESP * pings
            if sent % len(PINGREQ):  # the last one was cut in two: finish it
                sock.sendall(PINGREQ[sent % len(PINGREQ) :])
                assert read_exactly(sock, len(PINGRESP)) == PINGRESP


def test_a_silent_client_still_times_out(tmp_path: Path) -> None:
    with running_gateway(tmp_path, CONFIG) as gw:
        sock = socket.create_connection(("127.0.0.1", gw.port), timeout=unit(10))
        with sock:
            sock.sendall(mb.gen_connect("silent", keepalive=KEEP_ALIVE_S))
            assert read_exactly(sock, 4)[:1] == b"\x20"  # CONNACK
            gw.call(lambda: gw.broker.connections.sweep(time.time() + 10 * KEEP_ALIVE_S))
            assert sock.recv(16) == b""  # closed for its keep alive (3.1.1: no DISCONNECT)
