"""Helpers of the listener tests: paho-mqtt over tls / ws / wss, a raw WebSocket MQTT
client, and a raw TLS probe that tells a refused handshake from an MQTT answer.

Every wait is bounded and written in timeout units (``tests.helpers.timeouts.unit``).
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import ssl
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import PahoClient

__all__ = [
    "ListenerClient",
    "RawWebSocket",
    "client_usernames",
    "listener_client",
    "tls_probe",
]

_ids = itertools.count(1)

Transport = Literal["tcp", "websockets"]


class ListenerClient(PahoClient):
    """The broker tests' ``PahoClient`` over any transport: TLS and/or WebSocket."""

    def __init__(
        self,
        host: str,
        port: int,
        proto: int,
        client_id: str,
        *,
        transport: Transport = "tcp",
        path: str = "/mqtt",
        tls: ssl.SSLContext | None = None,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        super().__init__(host, port, proto, client_id)
        self.client.transport = transport
        if transport == "websockets":
            self.client.ws_set_options(path=path)
        if tls is not None:
            self.client.tls_set_context(tls)
        if username is not None:
            self.client.username_pw_set(username, password)


@contextlib.contextmanager
def listener_client(
    gw: RunningGateway,
    listener: str,
    proto: int = 4,
    *,
    client_id: str | None = None,
    connect: bool = True,
    transport: Transport = "tcp",
    path: str = "/mqtt",
    tls: ssl.SSLContext | None = None,
    username: str | None = None,
    password: str | None = None,
) -> Iterator[ListenerClient]:
    """A paho client of ``gw``'s listener ``listener``, connected unless told otherwise;
    closed on exit."""
    host, port = gw.address(listener)
    cid = f"lc{next(_ids)}" if client_id is None else client_id
    client = ListenerClient(
        host,
        port,
        proto,
        cid,
        transport=transport,
        path=path,
        tls=tls,
        username=username,
        password=password,
    )
    try:
        if connect:
            client.connect()
        yield client
    finally:
        client.close()


def client_usernames(gw: RunningGateway) -> dict[str, str | None]:
    """Client id -> the username the broker settled on, for every connected client."""

    def read() -> dict[str, str | None]:
        return {
            conn.session.origin.name: conn.session.origin.username
            for conn in gw.broker.connections
            if conn.session.origin.name
        }

    return gw.call(read)


def tls_probe(
    address: tuple[str, int],
    context: ssl.SSLContext,
    connect_packet: bytes,
    protocol_level: int = 4,
) -> mb.Packet | str:
    """Opens TLS with ``context``, sends ``connect_packet``; returns the server's first
    packet (the CONNACK), or a text naming why TLS refused the client.

    With TLS 1.3 a client learns that its certificate was refused only on its first read,
    after the handshake: both cases count as refused. A timeout is not caught.
    """
    with socket.create_connection(address, timeout=unit(3)) as raw:
        try:
            with context.wrap_socket(raw, server_hostname=address[0]) as tls:
                tls.sendall(connect_packet)
                data = b""
                while True:
                    chunk = tls.recv(65536)
                    if not chunk:
                        return f"closed after {len(data)} bytes"
                    data += chunk
                    split = mb.split_packet(data)
                    if split is not None:
                        return mb.parse_packet(split[0], protocol_level)
        except ssl.SSLError as exc:
            return f"TLS refused: {exc.reason or exc}"
        except (ConnectionResetError, BrokenPipeError) as exc:
            return f"connection reset: {exc}"


class RawWebSocket:
    """A raw MQTT client over a WebSocket (websockets' sync client): the test decides
    every byte and every frame; received binary messages are split into packets."""

    def __init__(
        self,
        uri: str,
        *,
        subprotocols: Iterable[str] | None = ("mqtt",),
        ssl_context: ssl.SSLContext | None = None,
        protocol_level: int = 4,
    ) -> None:
        self.protocol_level = protocol_level
        self.ws: ClientConnection = connect(
            uri,
            subprotocols=None if subprotocols is None else [Subprotocol(p) for p in subprotocols],
            ssl=ssl_context,
            compression=None,
            max_size=None,
            open_timeout=unit(10),
            close_timeout=unit(2),
            legacy=True,  # a connection object, closed by close() / __exit__
        )
        self.buffer = b""

    @property
    def subprotocol(self) -> str | None:
        return self.ws.subprotocol

    def send(self, data: bytes | Iterable[bytes]) -> None:
        """One binary message; an iterable of chunks is one message in several frames."""
        self.ws.send(data)

    def send_text(self, text: str) -> None:
        self.ws.send(text)

    def recv_packet(self, timeout: float | None = None) -> mb.Packet:
        while True:
            split = mb.split_packet(self.buffer)
            if split is not None:
                packet, self.buffer = split
                return mb.parse_packet(packet, self.protocol_level)
            message = self.ws.recv(timeout=unit(10) if timeout is None else timeout)
            assert isinstance(message, bytes), f"text message from the broker: {message!r}"
            self.buffer += message

    def do_connect(self, client_id: str, proto_ver: int = 4, **kwargs: Any) -> mb.Packet:
        self.protocol_level = proto_ver
        self.send(mb.gen_connect(client_id, proto_ver=proto_ver, **kwargs))
        connack = self.recv_packet()
        assert connack.name == "CONNACK"
        assert connack.reason_code == 0
        return connack

    def subscribe(self, topic: str, qos: int = 0, mid: int = 1) -> mb.Packet:
        self.send(mb.gen_subscribe(mid, topic, qos, proto_ver=self.protocol_level))
        suback = self.recv_packet()
        assert suback.name == "SUBACK"
        return suback

    def expect_closed(self, timeout: float | None = None) -> ConnectionClosed:
        """Waits until the server closes the WebSocket; returns how it closed."""
        try:
            while True:
                self.ws.recv(timeout=unit(10) if timeout is None else timeout)
        except ConnectionClosed as exc:
            return exc

    def close(self) -> None:
        self.ws.close()

    def __enter__(self) -> RawWebSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
