"""When the MQTT side closes a WebSocket connection (a refusing CONNACK, a DISCONNECT for
a malformed packet), the server's FIN follows its close frame at once on ``ws``, as the
tcp listener's follows its last packet (``listeners.linger``): a client that does not
answer the close frame is not kept waiting for ``CLOSE_TIMEOUT_S``. RFC 6455 7.1.1: the
server closes the TCP connection first; the client's close frame, if it answers, is
still read (and dropped) on the half-closed connection.

The client here is a raw socket that never answers the close frame; the close timeout is
raised far above the test's read timeout, so a server that waited for the answer fails
the test.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
from pathlib import Path

import pytest

from broker_core.listeners import websocket
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import wait_until

CONFIG = json.dumps(
    {
        "listeners": [{"type": "ws", "name": "ws", "bind": "127.0.0.1:0"}],
        "api": {"enabled": False},
    }
)


def _open(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=unit(10))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            "GET /mqtt HTTP/1.1\r\n"
            f"Host: {address[0]}:{address[1]}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Protocol: mqtt\r\n\r\n"
        ).encode()
    )
    response = b""
    while b"\r\n\r\n" not in response:
        chunk = sock.recv(4096)
        assert chunk, "closed during the upgrade"
        response += chunk
    assert response.startswith(b"HTTP/1.1 101")
    assert response.endswith(b"\r\n\r\n")  # nothing sent behind the response yet
    return sock


def _binary(payload: bytes) -> bytes:
    """One masked binary frame (payload under 126 bytes)."""
    assert len(payload) < 126
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes((0x82, 0x80 | len(payload))) + mask + masked


def _frames_until_eof(sock: socket.socket) -> list[tuple[int, bytes]]:
    """(opcode, payload) of each frame the server sends before its FIN; a read timeout
    (the server waiting for the client's close frame) fails the test."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise AssertionError(f"no FIN after {data.hex()}") from None
        if not chunk:
            break
        data += chunk
    frames = []
    while data:
        opcode, length = data[0] & 0x0F, data[1] & 0x7F
        assert length < 126
        frames.append((opcode, data[2 : 2 + length]))
        data = data[2 + length :]
    return frames


@pytest.mark.parametrize(
    ("sent", "last"),
    [
        (mb.gen_connect("c1", proto_ver=5, reserved_flag=True), (0x20, 0x81)),  # CONNACK
        # Accepted (CONNACK 0x00), then the second CONNECT's DISCONNECT 0x82 (4.13.1).
        (mb.gen_connect("c2", proto_ver=5) * 2, (0xE0, 0x82)),
        (mb.gen_connect("c3", proto_ver=5) + b"\x36\x02\x00\x00", (0xE0, 0x81)),  # DISCONNECT
    ],
    ids=["malformed-connect", "second-connect", "malformed-publish"],
)
def test_the_fin_follows_the_close_frame_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sent: bytes, last: tuple[int, int]
) -> None:
    monkeypatch.setattr(websocket, "CLOSE_TIMEOUT_S", unit(60))
    with running_gateway(tmp_path, CONFIG) as gw:
        for _ in range(3):
            with _open(gw.address("ws")) as sock:
                sock.sendall(_binary(sent))
                frames = _frames_until_eof(sock)
            assert [opcode for opcode, _ in frames][-1] == 0x8  # the close frame, then the FIN
            assert struct.unpack("!H", frames[-1][1][:2])[0] == 1000
            mqtt = b"".join(payload for opcode, payload in frames if opcode == 0x2)
            packets = []
            while mqtt:
                split = mb.split_packet(mqtt)
                assert split is not None
                packet, mqtt = split
                packets.append(packet)
            # The last MQTT packet is the one that tells why (v5 reason code in byte 2,
            # after the one-byte remaining length of these short packets).
            assert (packets[-1][0] & 0xF0, packets[-1][2 if last[0] == 0xE0 else 3]) == last
        wait_until(lambda: gw.call(lambda: len(gw.broker.connections)) == 0, what="all ended")


def test_a_client_answering_the_close_frame_is_closed_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its close frame, sent after the server's FIN, is still read: the server then closes
    its side and the connection ends."""
    monkeypatch.setattr(websocket, "CLOSE_TIMEOUT_S", unit(60))
    with running_gateway(tmp_path, CONFIG) as gw:
        with _open(gw.address("ws")) as sock:
            sock.sendall(_binary(mb.gen_connect("c1", proto_ver=5, reserved_flag=True)))
            frames = _frames_until_eof(sock)
            assert frames[-1][0] == 0x8
            mask = os.urandom(4)
            code = b"\x03\xe8"
            sock.sendall(
                bytes((0x88, 0x82)) + mask + bytes(b ^ mask[i] for i, b in enumerate(code))
            )
        wait_until(lambda: gw.call(lambda: len(gw.broker.connections)) == 0, what="all ended")
