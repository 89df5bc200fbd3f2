"""Keep alive counts complete Control Packets, not bytes (MQTT 3.1.1 3.1.2.10
[MQTT-3.1.2-24], MQTT 5.0 3.1.2.10 [MQTT-3.1.2-22]).

A client that announces a large PUBLISH and sends it a byte at a time, each byte well
within its keep alive, never completes a packet: the broker disconnects it after 1.5
times its keep alive (MQTT 5: DISCONNECT 0x8D, then the close), over TCP and over a
WebSocket alike. A client that sends complete PINGREQs meanwhile stays connected.
"""

from __future__ import annotations

import json
import select
import time
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.broker.support import BOTH, Clients
from tests.integration.listeners.support import RawWebSocket

KEEP_ALIVE = 1  # seconds; protocol time, not scaled
DRIBBLE_S = 0.25  # a byte every quarter of the keep alive: far more often than needed


def _publish_head(size: int = 1000) -> bytes:
    """The fixed header and topic of a QoS 0 PUBLISH announcing ``size`` bytes: what
    follows is the start of a packet that never completes."""
    remaining = bytearray()
    value = size
    while True:
        byte = value % 128
        value //= 128
        remaining.append(byte | 0x80 if value else byte)
        if not value:
            break
    return b"\x30" + bytes(remaining) + b"\x00\x01t"


def _dribble_until_closed(client: RawClient, pinger: RawClient | None, bound: float) -> None:
    """One byte of the unfinished PUBLISH every DRIBBLE_S until the server sends or
    closes something; ``pinger`` sends complete PINGREQs meanwhile, each answered."""
    client.send(_publish_head())
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        readable, _, _ = select.select([client.sock], [], [], DRIBBLE_S)
        if readable:
            return
        client.send(b"z", allow_closed=True)
        if client.closed_by_peer:
            return
        if pinger is not None:
            pinger.ping()
    raise AssertionError(
        f"a client dribbling one byte every {DRIBBLE_S}s with keep alive {KEEP_ALIVE}s "
        f"was still connected after {bound:.1f}s"
    )


@BOTH
def test_a_packet_dribbled_a_byte_at_a_time_does_not_keep_a_client_alive(
    clients: Clients, proto: int
) -> None:
    pinger = clients.raw_connect(proto, keepalive=KEEP_ALIVE)
    dribbler = clients.raw_connect(proto, keepalive=KEEP_ALIVE)
    _dribble_until_closed(dribbler, pinger, unit(10))
    if proto == 5:
        dribbler.expect_closed(
            unit(5), reason_code=mb.ReasonCode.KEEP_ALIVE_TIMEOUT, require_reason=True
        )
    else:
        dribbler.expect_closed(unit(5), packet_type=None)
    # The client sending complete packets all along is still served.
    pinger.ping()
    pinger.ping()


def test_a_packet_dribbled_over_a_websocket_does_not_keep_a_client_alive(
    tmp_path: Path,
) -> None:
    config = json.dumps(
        {
            "api": {"enabled": False},
            "listeners": [
                {"type": "tcp", "name": "tcp", "bind": "127.0.0.1:0"},
                {"type": "ws", "name": "ws", "bind": "127.0.0.1:0"},
            ],
        }
    )
    with running_gateway(tmp_path / "gw", config) as gw:
        host, port = gw.address("ws")
        with RawWebSocket(f"ws://{host}:{port}/mqtt", protocol_level=5) as dribbler:
            dribbler.do_connect("ws-dribbler", proto_ver=5, keepalive=KEEP_ALIVE)
            dribbler.send(_publish_head())
            # Each byte is a WebSocket message of its own: complete frames, no packet.
            deadline = time.monotonic() + unit(10)
            received: list[bytes] = []
            closed = False
            while time.monotonic() < deadline and not (received or closed):
                try:
                    message = dribbler.ws.recv(timeout=DRIBBLE_S)
                except TimeoutError:
                    dribbler.send(b"z")
                    continue
                except ConnectionClosed:
                    closed = True
                    break
                assert isinstance(message, bytes)
                received.append(message)
            if not (received or closed):
                pytest.fail(
                    f"a WebSocket client dribbling one byte every {DRIBBLE_S}s with keep "
                    f"alive {KEEP_ALIVE}s was still connected after {unit(10):.1f}s"
                )
            assert received, "closed without a DISCONNECT"
            disconnect = mb.parse_packet(received[0], 5)
            assert disconnect.name == "DISCONNECT"
            assert disconnect.reason_code == mb.ReasonCode.KEEP_ALIVE_TIMEOUT
            dribbler.expect_closed(unit(5))
