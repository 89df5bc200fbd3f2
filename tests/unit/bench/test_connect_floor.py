"""The connect floor's servers answer the connect load as a broker would: a CONNACK to
the CONNECT, then its close after the DISCONNECT (or at once when both came together).
The lean ones also refuse a protocol they do not speak and close the earlier
connection of a client identifier that connects again; the one on a gateway's registry
leaves no session behind."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from bench.client import mqtt_connect
from bench.connect_lean import OnRegistry
from bench.connects import run_connects
from bench.frames import encode_connect, encode_disconnect
from bench.servers import serving
from broker_core.listeners.settings import ListenerSettings
from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.components.support import wait_for

# (module, serve arguments) of each server.
SERVERS = [
    ("bench.connect_floor", ()),
    ("bench.connect_lean", ()),
    ("bench.connect_lean", ("registry",)),
]
LEAN = SERVERS[1:]


def _read_until_closed(sock: socket.socket) -> bytes:
    sock.settimeout(unit(10))
    received = b""
    while chunk := sock.recv(256):
        received += chunk
    return received


@pytest.mark.parametrize(("server", "args"), SERVERS)
def test_the_server_answers_connect_and_closes_after_disconnect(
    server: str, args: tuple[str, ...]
) -> None:
    with serving(server, args=args) as (port, _pids):
        with mqtt_connect(port, "floor-a", 4, timeout_s=unit(10)) as sock:  # got its CONNACK
            sock.sendall(encode_disconnect())
            assert _read_until_closed(sock) == b""
        with socket.create_connection(("127.0.0.1", port), timeout=unit(10)) as sock:
            sock.sendall(encode_connect("floor-b", 4) + encode_disconnect())
            assert _read_until_closed(sock) == b"\x20\x02\x00\x00"


@pytest.mark.parametrize(("server", "args"), LEAN)
def test_the_lean_server_refuses_mqtt_3_1_and_takes_over_a_client_id(
    server: str, args: tuple[str, ...]
) -> None:
    with serving(server, args=args) as (port, _pids):
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


@pytest.mark.parametrize(("server", "args"), SERVERS)
def test_the_connect_load_runs_against_the_server(server: str, args: tuple[str, ...]) -> None:
    with serving(server, args=args) as (port, pids):
        result = run_connects(port, pids[0], lambda: None, warmup_s=0.2, duration_s=0.5)
    assert result.connects > 0 and result.failures == 0
    assert 0 <= result.user_per_connect_ms <= result.cpu_per_connect_ms


def test_on_the_registry_a_connection_is_a_session_until_it_closes(tmp_path: Path) -> None:
    with running_gateway(tmp_path) as gw:
        OnRegistry.broker = gw.broker
        OnRegistry.listener = ListenerSettings(name="tcp")

        async def serve() -> int:
            server = await asyncio.get_running_loop().create_server(OnRegistry, "127.0.0.1", 0)
            return int(server.sockets[0].getsockname()[1])

        port = asyncio.run_coroutine_threadsafe(serve(), gw.loop).result(unit(10))
        sessions = gw.broker.sessions
        with mqtt_connect(port, "reg-a", 4, timeout_s=unit(10)) as first:
            assert gw.call(lambda: sessions.get("reg-a") is not None and sessions.online == 1)
            with mqtt_connect(port, "reg-a", 4, timeout_s=unit(10)) as second:
                assert _read_until_closed(first) == b""  # taken over
                second.sendall(encode_disconnect())
                assert _read_until_closed(second) == b""

        def left() -> tuple[int, int, int]:  # sessions, online, connections
            return gw.call(lambda: (len(sessions), sessions.online, len(gw.broker.connections)))

        wait_for(left, lambda still: still == (0, 0, 0))  # until the server saw the close
