"""The connect floor's servers answer the connect load as a broker would: a CONNACK to
the CONNECT, then its close after the DISCONNECT (or at once when both came together).
The lean one also refuses a protocol it does not speak and closes the earlier
connection of a client identifier that connects again."""

from __future__ import annotations

import socket

import pytest

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


@pytest.mark.parametrize("server", ["bench.connect_floor", "bench.connect_lean"])
def test_the_server_answers_connect_and_closes_after_disconnect(server: str) -> None:
    with serving(server) as (port, _pids):
        with mqtt_connect(port, "floor-a", 4, timeout_s=unit(10)) as sock:  # got its CONNACK
            sock.sendall(encode_disconnect())
            assert _read_until_closed(sock) == b""
        with socket.create_connection(("127.0.0.1", port), timeout=unit(10)) as sock:
            sock.sendall(encode_connect("floor-b", 4) + encode_disconnect())
            assert _read_until_closed(sock) == b"\x20\x02\x00\x00"


def test_the_lean_server_refuses_mqtt_3_1_and_takes_over_a_client_id() -> None:
    with serving("bench.connect_lean") as (port, _pids):
        with socket.create_connection(("127.0.0.1", port), timeout=unit(10)) as sock:
            sock.sendall(encode_connect("lean-a", 3))
            assert _read_until_closed(sock) == b"\x20\x02\x00\x01"
        with (
            mqtt_connect(port, "lean-b", 4, timeout_s=unit(10)) as first,
            mqtt_connect(port, "lean-b", 4, timeout_s=unit(10)) as second,
        ):
            assert _read_until_closed(first) == b""  # closed by the second
            second.sendall(encode_disconnect())
            assert _read_until_closed(second) == b""


@pytest.mark.parametrize("server", ["bench.connect_floor", "bench.connect_lean"])
def test_the_connect_load_runs_against_the_server(server: str) -> None:
    with serving(server) as (port, pids):
        result = run_connects(port, pids[0], lambda: None, warmup_s=0.2, duration_s=0.5)
    assert result.connects > 0 and result.failures == 0
