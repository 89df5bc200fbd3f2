"""WebSocket listener (``ws``, and ``wss`` with an ``SSLContext``): MQTT over WebSocket.

The ``websockets`` library (asyncio implementation) does the HTTP upgrade and the
framing; the MQTT session stays the same ``MqttConnection`` as on tcp. ``WebSocketTransport``
makes one WebSocket connection look like an asyncio transport to it:

- ``write(bytes)`` sends one binary message, synchronously, the way websockets'
  ``broadcast()`` does (``protocol.send_binary`` then ``send_data``): no task and no
  await per message.
- Flow control is the TCP (or TLS) transport's: its write buffer limits are the broker's
  ``write_high_water``, and ``MqttServerConnection`` (the websockets connection class,
  through ``serve(create_connection=...)``) forwards ``pause_writing`` /
  ``resume_writing`` to the ``MqttConnection``, which then queues instead of writing.
- Each binary message received is fed to ``MqttConnection.data_received``; the session's
  decoder keeps partial packets, so a packet may span messages and a message may hold
  several packets. A fragmented message arrives reassembled (up to ``max_size``).
  ``pause_reading`` (publish rate, a busy store) stops that receive loop until
  ``resume_reading``; websockets' receive queue then stops reading the socket.
- ``close()`` sends a close frame (1000) and aborts the TCP connection if the client has
  not answered within ``CLOSE_TIMEOUT_S``.

Handshake rules (MQTT 5.0 section 6, MQTT 3.1.1 section 6):

- Only ``path`` (default ``/mqtt``; the query string is ignored) is served; any other
  path gets HTTP 404.
- Subprotocol: ``mqtt`` if offered, else ``mqttv3.1`` if offered. A client offering
  neither, or no subprotocol at all, is still accepted, without a
  ``Sec-WebSocket-Protocol`` response header (as NanoMQ and EMQX do): RFC 6455 lets the
  server select none and the client decide; such clients still speak MQTT.
- No compression (MQTT payloads are often already compressed and permessage-deflate
  costs memory per connection); websockets' own pings are off (MQTT has keep alive;
  the server still answers the client's pings).
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

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.typing import Subprotocol

from broker_core.listeners.connection import MqttConnection
from broker_core.listeners.connection import Server as MqttServer
from broker_core.listeners.connections import Connections
from broker_core.listeners.settings import ListenerSettings

__all__ = [
    "CLOSE_TIMEOUT_S",
    "MESSAGE_SLACK",
    "SUBPROTOCOLS",
    "MqttServerConnection",
    "WebSocketTransport",
    "start_websocket",
]

log = logging.getLogger(__name__)

#: Subprotocols selected, in order of preference.
SUBPROTOCOLS: tuple[Subprotocol, ...] = (Subprotocol("mqtt"), Subprotocol("mqttv3.1"))
#: Bytes a WebSocket message may exceed the broker's maximum packet size by.
MESSAGE_SLACK = 64 * 1024
#: Seconds for the HTTP upgrade (and TLS handshake), and for the closing handshake.
OPEN_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 1.0


class MqttServerConnection(ServerConnection):
    """websockets' server connection, telling its ``WebSocketTransport`` about flow
    control and about the end of the TCP connection.

    Until its upgrade is done it is pending (``Connections.handshake_started``) like a
    socket that has not sent CONNECT: sockets that stall in the HTTP upgrade count
    against ``max_pending_connections``, and the oldest is closed to make room. Each
    listener serves a subclass that names its ``listener`` and ``connections``.
    """

    adapter: WebSocketTransport | None = None
    listener: ListenerSettings | None = None
    connections: Connections | None = None
    upgrading = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self.connections is not None and self.listener is not None:
            self.upgrading = True
            self.connections.handshake_started(self.listener, self)

    def upgraded(self) -> None:
        """The upgrade is done (or failed): no longer pending as an upgrade."""
        if self.upgrading and self.connections is not None and self.listener is not None:
            self.upgrading = False
            self.connections.handshake_ended(self.listener, self)

    def has_unread_input(self) -> bool:
        return False  # an upgrade under way is as silent as a socket that says nothing

    def evict(self) -> None:
        self.transport.abort()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.adapter is not None:
            self.adapter.protocol.pause_writing()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.adapter is not None:
            self.adapter.protocol.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.upgraded()
        if self.adapter is not None:
            self.adapter.connection_ended()


class WebSocketTransport(asyncio.Transport):
    """One WebSocket connection, seen by ``MqttConnection`` as its transport.

    ``pause_reading`` stops the handler's ``recv()`` loop rather than the socket: no
    message reaches the session until ``resume_reading``, and websockets' own receive
    queue (``max_queue`` frames) then pauses the socket, so its bookkeeping stays right.
    """

    def __init__(self, websocket: MqttServerConnection, protocol: MqttConnection) -> None:
        super().__init__()
        self._info: dict[str, Any] = {"websocket": websocket, "subprotocol": websocket.subprotocol}
        self._websocket = websocket
        self.protocol = protocol
        self._closing = False
        self._abort_handle: asyncio.TimerHandle | None = None
        self._readable = asyncio.Event()
        self._readable.set()

    # -- what MqttConnection uses -----------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        websocket = self._websocket
        if self._closing or websocket.protocol.state is not State.OPEN:
            return  # the connection is going away; MqttConnection sees connection_lost
        websocket.protocol.send_binary(data)
        websocket.send_data()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        websocket = self._websocket
        if websocket.protocol.state is State.OPEN:
            websocket.protocol.send_close(CloseCode.NORMAL_CLOSURE)
            websocket.send_data()
        if websocket.protocol.state is not State.CLOSED:
            self._abort_handle = asyncio.get_running_loop().call_later(
                CLOSE_TIMEOUT_S, websocket.transport.abort
            )

    def is_closing(self) -> bool:
        return (
            self._closing
            or self._websocket.protocol.state is not State.OPEN
            or self._websocket.transport.is_closing()
        )

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name in self._info:
            return self._info[name]
        return self._websocket.transport.get_extra_info(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._websocket.transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._websocket.transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._websocket.transport.get_write_buffer_limits()

    def is_reading(self) -> bool:
        return self._readable.is_set()

    def pause_reading(self) -> None:
        self._readable.clear()

    def resume_reading(self) -> None:
        self._readable.set()

    # -- the rest of asyncio.Transport ------------------------------------------------------

    def abort(self) -> None:
        self._closing = True
        self._websocket.transport.abort()

    def can_write_eof(self) -> bool:
        return False

    # -- the handler's side -----------------------------------------------------------------

    async def wait_readable(self) -> None:
        """Returns once reading is resumed, or the TCP connection is gone."""
        await self._readable.wait()

    def connection_ended(self) -> None:
        """The TCP connection is gone: wake a paused reader (its ``recv()`` now raises
        ``ConnectionClosed``); no abort is due any more."""
        self._readable.set()
        if self._abort_handle is not None:
            self._abort_handle.cancel()
            self._abort_handle = None


def _select_subprotocol(
    connection: ServerConnection, offered: Sequence[Subprotocol]
) -> Subprotocol | None:
    for subprotocol in SUBPROTOCOLS:
        if subprotocol in offered:
            return subprotocol
    return None  # accepted without a subprotocol; see the module docstring


async def start_websocket(
    broker: MqttServer,
    host: str,
    port: int,
    settings: ListenerSettings,
    path: str = "/mqtt",
    ssl_context: ssl.SSLContext | None = None,
    backlog: int = 1024,
    sock: socket.socket | None = None,
) -> Server:
    """Binds a ``ws`` listener (``wss`` with ``ssl_context``) serving MQTT on ``path``;
    with ``sock``, serves on that listening socket instead (``host`` and ``port`` unused).

    The returned websockets ``Server`` offers what the gateway uses of an
    ``asyncio.Server``: ``sockets``, ``close()`` and ``wait_closed()``.
    """

    def process_request(connection: ServerConnection, request: Request) -> Response | None:
        if request.path.partition("?")[0] != path:
            return connection.respond(http.HTTPStatus.NOT_FOUND, "Not Found\n")
        return None

    async def handler(websocket: ServerConnection) -> None:
        assert isinstance(websocket, MqttServerConnection)
        websocket.upgraded()  # pending from here as the MQTT connection, until CONNECT
        connection = MqttConnection(broker, settings)
        transport = WebSocketTransport(websocket, connection)
        connection.connection_made(transport)
        websocket.adapter = transport
        if websocket.paused:  # the peer stopped reading during the handshake
            connection.pause_writing()
        try:
            while True:
                if not transport.is_reading():  # the session paused reading (rate, store)
                    await transport.wait_readable()
                message = await websocket.recv()
                if isinstance(message, str):
                    log.info(
                        "listener %s: text frame from %s, closing [MQTT-6.0.0-1]",
                        settings.name,
                        connection.session.peer,
                    )
                    await websocket.close(CloseCode.UNSUPPORTED_DATA, "MQTT needs binary frames")
                    break
                connection.data_received(message)
        except ConnectionClosed:
            pass  # the end of the message stream, whoever closed
        finally:
            websocket.adapter = None
            transport.connection_ended()
            connection.connection_lost(None)

    class ListenerConnection(MqttServerConnection):
        listener = settings
        connections = broker.connections

    where: dict[str, Any] = (
        {"sock": sock}
        if sock is not None
        else {"host": host, "port": port, "backlog": backlog, "reuse_address": True}
    )
    server = await serve(
        handler,
        subprotocols=list(SUBPROTOCOLS),
        select_subprotocol=_select_subprotocol,
        compression=None,
        process_request=process_request,
        open_timeout=OPEN_TIMEOUT_S,
        ping_interval=None,
        ping_timeout=None,
        close_timeout=CLOSE_TIMEOUT_S,
        max_size=broker.limits.max_packet_size + MESSAGE_SLACK,
        write_limit=broker.write_high_water,
        create_connection=ListenerConnection,
        ssl=ssl_context,
        **where,
    )
    if sock is not None:  # bound, set up and logged by the caller
        return server
    for sock in server.sockets:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        log.info(
            "listener %s (%s) bound to %s path %s",
            settings.name,
            "WebSocket over TLS" if ssl_context is not None else "WebSocket",
            sock.getsockname()[:2],
            path,
        )
    return server
