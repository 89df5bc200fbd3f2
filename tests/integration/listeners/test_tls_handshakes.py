"""Sockets in their TLS handshake or WebSocket upgrade count against
``max_pending_connections``.

A TLS listener accepts its sockets itself (``listeners.tls.TlsListener``), a ``wss``
listener too, and a WebSocket connection is pending until its upgrade is done
(``WebSocketConnection``): a flood of sockets that open a TLS connection or an HTTP
upgrade and stall is bounded like a flood of sockets that never send CONNECT, and a real
client still gets in.
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

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.listeners.pki import Pki
from tests.integration.listeners.support import RawWebSocket, tls_probe
from tests.integration.operations.test_pending_sockets import closed_by_server

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
BOUND = 20


def listener_config(kind: str, pki: Pki | None = None) -> str:
    """One listener of ``kind`` (named so) on 127.0.0.1:0 with the test's bound; TLS with
    ``pki``'s server certificate."""
    listener: dict[str, object] = {
        "type": kind,
        "name": kind,
        "bind": "127.0.0.1:0",
        "max_pending_connections": BOUND,
    }
    if pki is not None:
        listener["tls"] = {"certfile": str(pki.server.cert), "keyfile": str(pki.server.key)}
    return json.dumps({"listeners": [listener], "api": {"enabled": False}})


def config(pki: Pki) -> str:
    return listener_config("tls", pki)


def ws_config() -> str:
    return listener_config("ws")


def wss_config(pki: Pki) -> str:
    return listener_config("wss", pki)


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def pending(gw: RunningGateway) -> int:
    return gw.call(lambda: len(gw.broker.connections.pending))


def assert_flood_bounded(gw: RunningGateway, sockets: list[socket.socket]) -> None:
    def hits() -> int:
        return gw.call(lambda: gw.broker.counters.limit_hits["pending_connections"])

    assert wait_for(lambda: hits() >= len(sockets) - BOUND, unit(20)), hits()
    assert pending(gw) <= BOUND
    assert closed_by_server(sockets[0])  # the oldest went first


@pytest.mark.parametrize("loop", list(LOOPS))
def test_stalled_handshakes_are_bounded_and_a_client_still_gets_in(
    tmp_path: Path, pki: Pki, loop: str
) -> None:
    stalled = 5 * BOUND
    with running_gateway(tmp_path, config(pki), LOOPS[loop]) as gw:
        address = gw.address("tls")
        sockets = [socket.create_connection(address, timeout=unit(5)) for _ in range(stalled)]
        try:
            # Half a ClientHello, or nothing: the handshake stalls either way.
            for sock in sockets[::2]:
                sock.sendall(b"\x16\x03\x01\x02\x00")
            assert_flood_bounded(gw, sockets)
            connack = tls_probe(address, pki.client_context(None), mb.gen_connect("real"))
            assert not isinstance(connack, str), connack
            assert connack.reason_code == 0
        finally:
            for sock in sockets:
                sock.close()
        # Handshakes that end (here: their sockets closed) stop being pending.
        assert wait_for(lambda: pending(gw) == 0, unit(20)), pending(gw)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_connection_is_pending_once_not_twice_after_its_handshake(
    tmp_path: Path, pki: Pki, loop: str
) -> None:
    """A handshake done hands its place in the pending table to its connection, which
    leaves it with its CONNECT."""
    with running_gateway(tmp_path, config(pki), LOOPS[loop]) as gw:
        address = gw.address("tls")
        with socket.create_connection(address, timeout=unit(5)) as raw:
            tls = pki.client_context(None).wrap_socket(raw, server_hostname="127.0.0.1")
            # The connection, not its handshake, is the one pending now.
            assert wait_for(lambda: gw.call(lambda: len(gw.broker.connections)) == 1, unit(10))
            assert pending(gw) == 1
            tls.sendall(mb.gen_connect("once"))
            assert tls.recv(4)[:1] == b"\x20"  # CONNACK
            assert wait_for(lambda: pending(gw) == 0, unit(10))
            tls.close()


@pytest.mark.parametrize("loop", list(LOOPS))
def test_stalled_websocket_upgrades_are_bounded_and_a_client_still_gets_in(
    tmp_path: Path, loop: str
) -> None:
    stalled = 5 * BOUND
    with running_gateway(tmp_path, ws_config(), LOOPS[loop]) as gw:
        host, port = gw.address("ws")
        sockets = [socket.create_connection((host, port), timeout=unit(5)) for _ in range(stalled)]
        try:
            # Half an upgrade request, or nothing: the upgrade stalls either way.
            for sock in sockets[::2]:
                sock.sendall(b"GET /mqtt HTTP/1.1\r\nHost: x\r\n")
            assert_flood_bounded(gw, sockets)
            with RawWebSocket(f"ws://{host}:{port}/mqtt") as client:
                client.do_connect("real")
        finally:
            for sock in sockets:
                sock.close()
        assert wait_for(lambda: pending(gw) == 0, unit(20)), pending(gw)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_stalled_wss_handshakes_and_upgrades_are_bounded_and_a_client_still_gets_in(
    tmp_path: Path, pki: Pki, loop: str
) -> None:
    """On wss the TLS handshake is pending from the accept, then the upgrade in its
    place: stalled in either, the flood is bounded."""
    stalled = 5 * BOUND
    with running_gateway(tmp_path, wss_config(pki), LOOPS[loop]) as gw:
        host, port = gw.address("wss")
        sockets = [socket.create_connection((host, port), timeout=unit(5)) for _ in range(stalled)]
        upgrading = []
        try:
            # Half a ClientHello, or nothing: the handshake stalls either way.
            for sock in sockets[::2]:
                sock.sendall(b"\x16\x03\x01\x02\x00")
            # And some that finish their TLS handshake and stall in the upgrade.
            for _ in range(BOUND // 2):
                raw = socket.create_connection((host, port), timeout=unit(5))
                upgrading.append(
                    pki.client_context(None).wrap_socket(raw, server_hostname="127.0.0.1")
                )
            assert_flood_bounded(gw, sockets)
            with RawWebSocket(
                f"wss://{host}:{port}/mqtt", ssl_context=pki.client_context(None)
            ) as client:
                client.do_connect("real")
        finally:
            for sock in sockets + upgrading:
                sock.close()
        assert wait_for(lambda: pending(gw) == 0, unit(20)), pending(gw)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_wss_connection_is_pending_once_through_its_handshake_and_upgrade(
    tmp_path: Path, pki: Pki, loop: str
) -> None:
    with running_gateway(tmp_path, wss_config(pki), LOOPS[loop]) as gw:
        host, port = gw.address("wss")
        with socket.create_connection((host, port), timeout=unit(5)) as raw:
            assert wait_for(lambda: pending(gw) == 1, unit(10))  # its TLS handshake
            tls = pki.client_context(None).wrap_socket(raw, server_hostname="127.0.0.1")
            assert wait_for(lambda: pending(gw) == 1, unit(10))  # its upgrade, in its place
            tls.close()
        assert wait_for(lambda: pending(gw) == 0, unit(10))
        with RawWebSocket(
            f"wss://{host}:{port}/mqtt", ssl_context=pki.client_context(None)
        ) as client:
            assert wait_for(lambda: pending(gw) == 1, unit(10))  # the MQTT connection
            client.do_connect("once")
            assert wait_for(lambda: pending(gw) == 0, unit(10))
