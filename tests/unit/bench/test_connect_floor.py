"""The connect floor's server answers the connect load as a broker would: a CONNACK to
the CONNECT, then its close after the DISCONNECT (or at once when both came together)."""

from __future__ import annotations

import socket

from bench.client import mqtt_connect
from bench.connects import run_connects
from bench.frames import encode_connect, encode_disconnect
from bench.servers import serving
from tests.helpers.timeouts import unit


def _read_until_closed(sock: socket.socket) -> bytes:
    sock.settimeout(unit(10))
    received = b""
    while chunk := sock.recv(256):
        received += chunk
    return received


def test_the_floor_answers_connect_and_closes_after_disconnect() -> None:
    with serving("bench.connect_floor") as (port, _pids):
        with mqtt_connect(port, "floor-a", 4, timeout_s=unit(10)) as sock:  # got its CONNACK
            sock.sendall(encode_disconnect())
            assert _read_until_closed(sock) == b""
        with socket.create_connection(("127.0.0.1", port), timeout=unit(10)) as sock:
            sock.sendall(encode_connect("floor-b", 4) + encode_disconnect())
            assert _read_until_closed(sock) == b"\x20\x02\x00\x00"


def test_the_connect_load_runs_against_the_floor() -> None:
    with serving("bench.connect_floor") as (port, pids):
        result = run_connects(port, pids[0], lambda: None, warmup_s=0.2, duration_s=0.5)
    assert result.connects > 0 and result.failures == 0
