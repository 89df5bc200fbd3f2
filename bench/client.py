"""Blocking MQTT handshakes on raw sockets: CONNECT/CONNACK and SUBSCRIBE/SUBACK.

Only the set-up of a load-generator connection goes through here; the measured traffic
is sent and counted by ``bench.loadgen`` and ``bench.latency`` on the same sockets.
Each read takes exactly one packet off the socket, so nothing that follows the
handshake is consumed by it.
"""

from __future__ import annotations

import socket

from bench.frames import (
    CONNACK,
    SUBACK,
    StreamError,
    encode_connect,
    encode_subscribe,
)

__all__ = ["HandshakeError", "mqtt_connect", "mqtt_subscribe", "read_packet"]


class HandshakeError(ConnectionError):
    """The broker refused or mangled a CONNECT or SUBSCRIBE."""


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("broker closed the connection during the handshake")
        out += chunk
    return bytes(out)


def read_packet(sock: socket.socket) -> tuple[int, bytes]:
    """One whole packet as (first byte, body); blocks up to the socket's timeout."""
    first = _recv_exactly(sock, 1)[0]
    length = 0
    for shift in (0, 7, 14, 21):
        byte = _recv_exactly(sock, 1)[0]
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
    else:
        raise StreamError("remaining length longer than 4 bytes")
    return first, _recv_exactly(sock, length)


def mqtt_connect(
    port: int,
    client_id: str,
    level: int = 4,
    keepalive_s: int = 60,
    timeout_s: float = 10.0,
    host: str = "127.0.0.1",
) -> socket.socket:
    """A TCP connection to the broker with an accepted MQTT session, TCP_NODELAY set."""
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(encode_connect(client_id, level, keepalive_s))
        first, body = read_packet(sock)
        if first >> 4 != CONNACK or len(body) < 2:
            raise HandshakeError(f"{client_id}: expected CONNACK, got first byte {first:#04x}")
        if body[1] != 0:
            raise HandshakeError(f"{client_id}: CONNACK refused with code {body[1]:#04x}")
    except BaseException:
        sock.close()
        raise
    return sock


def mqtt_subscribe(sock: socket.socket, topic_filter: str, qos: int, level: int = 4) -> None:
    """Subscribe and wait for a SUBACK granting the filter."""
    sock.sendall(encode_subscribe(topic_filter, qos, packet_id=1, level=level))
    first, body = read_packet(sock)
    if first >> 4 != SUBACK:
        raise HandshakeError(f"expected SUBACK for {topic_filter!r}, got {first:#04x}")
    codes = body[2:]
    if level == 5:
        prop_len = 0
        pos = 2
        for shift in (0, 7, 14, 21):
            byte = body[pos]
            pos += 1
            prop_len |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
        codes = body[pos + prop_len :]
    if not codes or codes[0] >= 0x80:
        raise HandshakeError(f"SUBSCRIBE {topic_filter!r} refused: {codes.hex()}")
