"""WebSocket listener (``ws``, and ``wss`` with an ``SSLContext``): MQTT over WebSocket.

The ``websockets`` library's Sans-I/O protocol (``ServerProtocol``) does the HTTP
upgrade and the framing; the I/O is ours, and the MQTT session stays the same
``MqttConnection`` as on tcp:

- ``WebSocketConnection`` is the asyncio protocol of one TCP (or TLS) connection. It
  feeds what arrives to the ``ServerProtocol``, answers the upgrade and, once upgraded,
  hands the payload of each binary frame to its ``MqttConnection`` as it arrives: the
  session's decoder keeps partial packets, so a packet may span frames and messages and
  a message may hold several packets. Pings are answered, close frames echoed.
- ``WebSocketTransport`` is what the ``MqttConnection`` sees as its transport: a
  ``write(bytes)`` sends one binary message; flow control is the TCP (or TLS)
  transport's (its write buffer limits are the broker's ``write_high_water``; its
  ``pause_writing`` / ``resume_writing`` reach the ``MqttConnection``), and
  ``pause_reading`` pauses the TCP transport itself.
- ``close()`` sends a close frame (1000), on ``ws`` followed at once by the server's
  FIN (RFC 6455 7.1.1), and aborts the TCP connection if the client has not answered
  within ``CLOSE_TIMEOUT_S``.

Every socket is pending (``Connections.handshake_started``) from its accept until its
upgrade is done, like a socket that has not sent CONNECT: sockets that stall count
against ``max_pending_connections`` and the oldest is closed to make room. On ``wss``
the TLS handshake comes first, accepted by ``TlsListener`` as on a ``tls`` listener, so
stalled TLS handshakes are bounded the same way; the upgrade then takes its place.

Handshake rules (MQTT 5.0 section 6, MQTT 3.1.1 section 6):

- Only ``path`` (default ``/mqtt``; the query string is ignored) is served; any other
  path gets HTTP 404.
- A ``Sec-WebSocket-Version`` other than 13 (or none) gets the library's HTTP 400 with a
  ``Sec-WebSocket-Version: 13`` header added, the versions the server speaks
  (RFC 6455 4.2.2, 4.4), so a client can retry with one.
- Subprotocol: ``mqtt`` if offered, else ``mqttv3.1`` if offered. A client offering
  neither, or no subprotocol at all, is still accepted, without a
  ``Sec-WebSocket-Protocol`` response header (as NanoMQ and EMQX do): RFC 6455 lets the
  server select none and the client decide; such clients still speak MQTT.
- No compression (MQTT payloads are often already compressed and permessage-deflate
  costs memory per connection); the server sends no pings of its own (MQTT has keep
  alive) and answers the client's.
- The upgrade must be done within ``OPEN_TIMEOUT_S`` of the accept (of the TLS
  handshake's end on ``wss``), else the socket is closed.
- A text message is not MQTT [MQTT-6.0.0-1]: the connection is closed with 1003
  (unsupported data).
- ``max_size``, the largest message, is the broker's maximum packet size plus
  ``MESSAGE_SLACK`` bytes, so a message holding one largest packet and a few small
  ones passes and a packet slightly too large is refused by the MQTT decoder with
  its reason code (MQTT 5: 0x95); far larger messages close with 1009.
"""

from __future__ import annotations

import asyncio
import http
import logging
import socket
import ssl
from collections.abc import Sequence
from typing import Any

from websockets.exceptions import InvalidHeader
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol

from broker_core.listeners.connection import MqttConnection
from broker_core.listeners.connection import Server as MqttServer
from broker_core.listeners.settings import ListenerSettings
from broker_core.listeners.tls import ServerTls, TlsListener, TlsProtocol, handshake_done

__all__ = [
    "CLOSE_TIMEOUT_S",
    "MESSAGE_SLACK",
    "OPEN_TIMEOUT_S",
    "SUBPROTOCOLS",
    "WebSocketConnection",
    "WebSocketListener",
    "WebSocketTransport",
    "start_websocket",
]

log = logging.getLogger(__name__)


class _ProtocolLog(logging.LoggerAdapter):
    """The WebSocket protocol's own log lines, under this module's logger name: its
    ``connection open`` / ``connection closed`` at INFO for every connection go to DEBUG,
    as the broker logs a TCP connection's (an error stays an error)."""

    def log(self, level: int, msg: object, *args: object, **kwargs: object) -> None:
        super().log(logging.DEBUG if level == logging.INFO else level, msg, *args, **kwargs)  # type: ignore[arg-type]


#: Every connection's ``ServerProtocol`` logs through this one (websockets' own
#: ``websockets.server`` logger named neither the listener nor the peer).
_protocol_log = _ProtocolLog(log, {})

#: Subprotocols selected, in order of preference.
SUBPROTOCOLS: tuple[Subprotocol, ...] = (Subprotocol("mqtt"), Subprotocol("mqttv3.1"))
#: Bytes a WebSocket message may exceed the broker's maximum packet size by.
MESSAGE_SLACK = 64 * 1024
#: Seconds for the HTTP upgrade, and for the closing handshake.
OPEN_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 1.0


def _select_subprotocol(
    protocol: ServerProtocol, offered: Sequence[Subprotocol]
) -> Subprotocol | None:
    for subprotocol in SUBPROTOCOLS:
        if subprotocol in offered:
            return subprotocol
    return None  # accepted without a subprotocol; see the module docstring


class WebSocketListener:
    """The connections of one ``ws`` or ``wss`` listener and the server accepting them;
    offers what the gateway uses of an ``asyncio.Server`` (``sockets``, ``close()``,
    ``wait_closed()``)."""

    def __init__(self, broker: MqttServer, settings: ListenerSettings, path: str) -> None:
        self.broker = broker
        self.settings = settings
        self.path = path
        self.max_size = broker.limits.max_packet_size + MESSAGE_SLACK
        self.server: asyncio.Server | TlsListener | None = None
        self.open: set[WebSocketConnection] = set()  # accepted, not yet lost
        self._all_lost: asyncio.Event | None = None  # set when ``open`` empties after close

    def connection(self) -> WebSocketConnection:
        """The protocol of a newly accepted socket."""
        return WebSocketConnection(self)

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return () if self.server is None else tuple(self.server.sockets)

    def close(self) -> None:
        """Stops accepting; sockets still in their upgrade are closed. Upgraded ones end
        with their sessions (the gateway disconnects them)."""
        if self.server is not None:
            self.server.close()
        for connection in list(self.open):
            if connection.mqtt is None:
                connection.abort()

    async def wait_closed(self) -> None:
        """Returns once every connection is lost (after ``close()``)."""
        if self.server is not None:
            await self.server.wait_closed()
        if self.open:
            self._all_lost = asyncio.Event()
            await self._all_lost.wait()

    def lost(self, connection: WebSocketConnection) -> None:
        self.open.discard(connection)
        if not self.open and self._all_lost is not None:
            self._all_lost.set()


class WebSocketConnection(TlsProtocol):
    """One TCP (or TLS) connection of a WebSocket listener: its upgrade, its frames and,
    once upgraded, its ``MqttConnection``."""

    __slots__ = (
        "_closing_timer",
        "_eof_written",
        "_open_timer",
        "_text",
        "_write_paused",
        "handshake",
        "listener",
        "mqtt",
        "transport",
        "ws",
    )

    def __init__(self, listener: WebSocketListener) -> None:
        self.listener = listener
        self.handshake = None  # wss: the TLS handshake under way (TlsListener)
        self.transport: asyncio.Transport | None = None
        self.ws = ServerProtocol(
            subprotocols=list(SUBPROTOCOLS),
            select_subprotocol=_select_subprotocol,
            max_size=listener.max_size,
            logger=_protocol_log,
        )
        self.mqtt: MqttConnection | None = None  # once upgraded
        self._text = False  # the message being received is a text message
        self._write_paused = False
        self._open_timer: asyncio.TimerHandle | None = None
        self._closing_timer: asyncio.TimerHandle | None = None
        self._eof_written = False  # our FIN is out (``close``): nothing more is written

    # -- the TCP (or TLS) transport's callbacks ---------------------------------------------

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        listener = self.listener
        connections = listener.broker.connections
        handshake_done(self, connections, listener.settings)
        transport: asyncio.Transport = base  # type: ignore[assignment]
        self.transport = transport
        transport.set_write_buffer_limits(high=listener.broker.write_high_water)
        listener.open.add(self)
        # Pending until the upgrade is done, like a socket that has not sent CONNECT.
        connections.handshake_started(listener.settings, self)
        loop = asyncio.get_running_loop()
        self._open_timer = loop.call_later(OPEN_TIMEOUT_S, self._open_timed_out)

    def data_received(self, data: bytes) -> None:
        self.ws.receive_data(data)
        self._handle_events()

    def eof_received(self) -> bool:
        self.ws.receive_eof()
        self._handle_events()
        return False  # close the transport

    def pause_writing(self) -> None:
        self._write_paused = True
        if self.mqtt is not None:
            self.mqtt.pause_writing()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self.mqtt is not None:
            self.mqtt.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._upgrade_over()
        if self._closing_timer is not None:
            self._closing_timer.cancel()
            self._closing_timer = None
        self._end_session()
        self.transport = None
        self.listener.lost(self)

    # -- what the client sent --------------------------------------------------------------

    def _handle_events(self) -> None:
        for event in self.ws.events_received():
            if isinstance(event, Request):
                self._upgrade(event)
            elif isinstance(event, Frame):
                self._frame(event)
        self.send_pending()

    def _upgrade(self, request: Request) -> None:
        ws = self.ws
        if request.path.partition("?")[0] != self.listener.path:
            response = ws.reject(http.HTTPStatus.NOT_FOUND, "Not Found\n")
        else:
            response = ws.accept(request)
            exc = ws.handshake_exc
            if isinstance(exc, InvalidHeader) and exc.name == "Sec-WebSocket-Version":
                # The library answers 400 and no more; RFC 6455 4.2.2 (and 4.4) asks for
                # the versions the server speaks, so the client can retry with one.
                response.headers["Sec-WebSocket-Version"] = "13"
        ws.send_response(response)
        self._upgrade_over()
        if ws.state is not State.OPEN:
            return  # refused: the response goes out, then the close (send_pending)
        # The MQTT connection is pending in the upgrade's place, until its CONNECT.
        listener = self.listener
        mqtt = self.mqtt = MqttConnection(listener.broker, listener.settings)
        mqtt.connection_made(WebSocketTransport(self))
        if self._write_paused:  # the peer stopped reading during the upgrade
            mqtt.pause_writing()

    def _frame(self, frame: Frame) -> None:
        opcode = frame.opcode
        if opcode is Opcode.BINARY or (opcode is Opcode.CONT and not self._text):
            self._text = False
            if self.mqtt is not None:
                self.mqtt.data_received(frame.data)  # type: ignore[arg-type]
        elif opcode is Opcode.TEXT:
            self._text = True
            if self.ws.state is State.OPEN:
                log.info(
                    "listener %s: text frame from %s, closing [MQTT-6.0.0-1]",
                    self.listener.settings.name,
                    None if self.mqtt is None else self.mqtt.session.peer,
                )
                self.close(CloseCode.UNSUPPORTED_DATA, "MQTT needs binary frames")
                self._end_session()
        # Pings are answered and a close frame echoed by the ServerProtocol itself.

    def _end_session(self) -> None:
        """The MQTT connection is over (the TCP connection lost, or a text frame)."""
        mqtt = self.mqtt
        if mqtt is not None:
            self.mqtt = None
            mqtt.connection_lost(None)

    # -- what goes to the client -----------------------------------------------------------

    def send_pending(self) -> None:
        """Writes what the ServerProtocol has to send; closes the TCP connection when it
        says the WebSocket is done with it."""
        transport = self.transport
        chunks = self.ws.data_to_send()
        if transport is None or not chunks:
            return
        done = not chunks[-1]  # an empty chunk: end of the TCP connection
        data = b"".join(chunks)
        if data and not transport.is_closing() and not self._eof_written:
            transport.write(data)  # after our FIN: a pong to a ping, dropped
        if done:
            transport.close()

    def close(self, code: int = CloseCode.NORMAL_CLOSURE, reason: str = "") -> None:
        """Starts the closing handshake; the TCP connection is aborted if the client has
        not finished it within ``CLOSE_TIMEOUT_S``.

        On ``ws`` the server's FIN follows its close frame at once, as on a tcp listener
        it follows the last packet (``listeners.linger``): RFC 6455 7.1.1 has the server
        close the TCP connection first, so a client that does not answer the close frame
        sees the end without waiting; one that answers has its close frame read (and
        dropped) on the half-closed connection, which then closes. ``wss`` cannot
        half-close: it waits for the client's close frame, as before."""
        ws = self.ws
        if ws.state is State.OPEN:
            ws.send_close(code, reason)
            self.send_pending()
            transport = self.transport
            if (
                transport is not None
                and not transport.is_closing()
                and not self._eof_written
                and transport.can_write_eof()
            ):
                transport.write_eof()
                self._eof_written = True
        if self.transport is not None and self._closing_timer is None:
            loop = asyncio.get_running_loop()
            self._closing_timer = loop.call_later(CLOSE_TIMEOUT_S, self.abort)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    # -- the upgrade's time and place ------------------------------------------------------

    def _upgrade_over(self) -> None:
        """No longer pending as an upgrade (done, refused, timed out or lost)."""
        timer = self._open_timer
        if timer is not None:
            self._open_timer = None
            timer.cancel()
            self.listener.broker.connections.handshake_ended(self.listener.settings, self)

    def _open_timed_out(self) -> None:
        log.debug("listener %s: upgrade timed out", self.listener.settings.name)
        self._open_timer = None
        self.listener.broker.connections.handshake_ended(self.listener.settings, self)
        self.abort()

    # -- as a pending socket (``Connections``) ---------------------------------------------

    def has_unread_input(self) -> bool:
        return False  # an upgrade under way is as silent as a socket that says nothing

    def evict(self) -> None:
        self.abort()


class WebSocketTransport(asyncio.Transport):
    """One WebSocket connection, seen by its ``MqttConnection`` as its transport."""

    def __init__(self, connection: WebSocketConnection) -> None:
        super().__init__()
        self._connection = connection
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        connection = self._connection
        if self._closing or connection.ws.state is not State.OPEN:
            return  # the connection is going away; MqttConnection sees connection_lost
        connection.ws.send_binary(data)
        connection.send_pending()

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._connection.close()

    def abort(self) -> None:
        self._closing = True
        self._connection.abort()

    def is_closing(self) -> bool:
        connection = self._connection
        transport = connection.transport
        return (
            self._closing
            or connection.ws.state is not State.OPEN
            or transport is None
            or transport.is_closing()
        )

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "subprotocol":
            return self._connection.ws.subprotocol
        transport = self._connection.transport
        return default if transport is None else transport.get_extra_info(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        transport = self._connection.transport
        if transport is not None:
            transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        transport = self._connection.transport
        return 0 if transport is None else transport.get_write_buffer_size()

    def is_reading(self) -> bool:
        transport = self._connection.transport
        return transport is not None and transport.is_reading()

    def pause_reading(self) -> None:
        transport = self._connection.transport
        if transport is not None and not transport.is_closing():
            transport.pause_reading()

    def resume_reading(self) -> None:
        transport = self._connection.transport
        if transport is not None and not transport.is_closing():
            transport.resume_reading()

    def can_write_eof(self) -> bool:
        return False


async def start_websocket(
    broker: MqttServer,
    host: str,
    port: int,
    settings: ListenerSettings,
    path: str = "/mqtt",
    ssl_context: ssl.SSLContext | ServerTls | None = None,
    backlog: int = 1024,
    sock: socket.socket | None = None,
) -> WebSocketListener:
    """Binds a ``ws`` listener (``wss`` with ``ssl_context``) serving MQTT on ``path``;
    with ``sock``, serves on that listening socket instead (``host`` and ``port`` unused,
    the socket set up and logged by the caller)."""
    loop = asyncio.get_running_loop()
    listener = WebSocketListener(broker, settings, path)
    if ssl_context is not None:
        if sock is not None:
            sockets = [sock]
        else:
            from broker_core.listeners.binding import listening_sockets

            sockets = await listening_sockets(host, port, backlog)
        listener.server = TlsListener(
            broker, settings, ssl_context, sockets, loop, listener.connection
        )
    elif sock is not None:
        listener.server = await loop.create_server(listener.connection, sock=sock)
    else:
        listener.server = await loop.create_server(
            listener.connection, host, port, backlog=backlog, reuse_address=True
        )
    if sock is not None:
        return listener
    for bound in listener.sockets:
        bound.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        log.info(
            "listener %s (%s) bound to %s path %s",
            settings.name,
            "WebSocket over TLS" if ssl_context is not None else "WebSocket",
            bound.getsockname()[:2],
            path,
        )
    return listener
