"""A lean MQTT accept path in plain Python: what a connect costs when the Python on it
is as little as MQTT allows.

``bench.connect_floor`` runs it beside edgebus, mosquitto and the bare event loop. One
``asyncio.Protocol`` on uvloop does all of a connect itself: it reads the fixed header,
checks an MQTT 3.1.1 CONNECT's protocol name and level, takes the client identifier,
keeps one table of connected clients (a second connection with the same identifier
closes the first), answers CONNACK and closes after the DISCONNECT. No sessions,
subscriptions, wills, authentication, limits, events or statistics: not a broker, a
measure of the budget a broker's own Python has on this machine.

``OnRegistry`` is the same protocol inside a running gateway (the bench profile), on
the broker's own structures instead of its table: the listener's bound on sockets
that have not sent CONNECT and its connection quota (``Connections``), the login
throttle and the authenticator's decision, the session registry (a takeover, the
client's will cancelled, a new session state, online, then discarded with the
connection). No ``Session``, codec, events, flow or client events: what the registry a
connect must touch costs, with nothing else of edgebus on the path (the lower bound of
a connection front end rebuilt on today's registry; docs/performance.md, "Connects:
the floor", seventh pass).

``python -m bench.connect_lean --serve PORT [registry]`` serves one of them on ``PORT``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

from bench.servers import main, serve_protocol
from broker_core.auth import new_auth_request

__all__ = ["Lean", "OnRegistry"]

_CONNACK_ACCEPTED = b"\x20\x02\x00\x00"
_CONNACK_REFUSED = b"\x20\x02\x00\x01"  # unacceptable protocol version
_MQTT_311 = b"\x00\x04MQTT\x04"
_CONNECT, _DISCONNECT = 1, 14

_connected: dict[str, Lean] = {}


class Lean(asyncio.Protocol):
    __slots__ = ("client_id", "pending", "transport")

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.client_id: str | None = None
        self.pending = b""

    def data_received(self, data: bytes) -> None:
        if self.pending:
            data = self.pending + data
        pos, size = 0, len(data)
        while size - pos >= 2:
            length = data[pos + 1]
            if length & 0x80:  # no packet of this exchange needs more than a byte
                self.transport.close()
                return
            start, end = pos + 2, pos + 2 + length
            if end > size:
                break
            kind = data[pos] >> 4
            if kind == _CONNECT and self.client_id is None:
                self._connect(data, start, end)
            elif kind == _DISCONNECT:
                self.transport.close()
                return
            pos = end
        self.pending = data[pos:]

    def _connect(self, data: bytes, start: int, end: int) -> None:
        if data[start : start + 7] != _MQTT_311 or end - start < 12:
            self.transport.write(_CONNACK_REFUSED)
            self.transport.close()
            return
        length = (data[start + 10] << 8) | data[start + 11]
        client_id = self.client_id = data[start + 12 : start + 12 + length].decode()
        self._register(client_id)

    def _register(self, client_id: str) -> None:
        """The client is connected: the earlier connection of ``client_id`` closed."""
        earlier = _connected.get(client_id)
        if earlier is not None:
            earlier.transport.close()
        _connected[client_id] = self
        self.transport.write(_CONNACK_ACCEPTED)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.client_id is not None and _connected.get(self.client_id) is self:
            del _connected[self.client_id]


class OnRegistry(Lean):
    """``Lean`` on a running gateway's broker (``broker``, set before serving): what a
    connect does there, in as few steps as it allows."""

    __slots__ = ("counted", "peer", "state")

    broker: ClassVar[Any]
    listener: ClassVar[Any]  # the ListenerSettings it counts against

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.state: Any = None
        self.counted = False  # read and set by Connections
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}"
        self.broker.connections.opened(self)  # pending until its CONNECT

    # What Connections asks of a pending socket.
    def has_unread_input(self) -> bool:
        return False

    def evict(self) -> None:
        self.transport.abort()

    def _register(self, client_id: str) -> None:
        broker = self.broker
        if broker.connections.connect_received(self, time.time()) is not None:
            self.transport.close()  # over the listener's bounds
            return
        request = new_auth_request(
            client_id, None, None, self.peer, self.listener, 4, None, None, None, None, False
        )
        throttle = broker.login_throttle
        result = None
        if throttle is None or throttle.passes(request):
            result = broker.authenticator.decide_now(request)
        if result is None or not result.allowed:
            self.transport.close()  # not decided at once, or refused: not this bench's case
            return
        sessions = broker.sessions
        existing = sessions.get(client_id)
        if existing is not None:
            earlier = existing.connection
            if earlier is None:
                sessions.discard(existing, "discarded")
            else:
                earlier.end()  # its session discarded with it
                earlier.transport.close()
        broker.wills.cancel(client_id)
        state = sessions.create(client_id)
        state.connection = self
        sessions.went_online(state)
        self.state = state
        self.transport.write(_CONNACK_ACCEPTED)

    def end(self) -> None:
        """The session ends with the connection (clean): out of the registry."""
        state = self.state
        self.state = None
        if state is not None and state.connection is self:
            state.connection = None
            sessions = self.broker.sessions
            sessions.online -= 1
            sessions.discard(state, "disconnected")

    def connection_lost(self, exc: Exception | None) -> None:
        self.broker.connections.closed(self)
        self.end()


async def _serve(port: int, kind: str = "lean") -> None:
    if kind != "registry":
        await serve_protocol(Lean, port)
        return
    from bench.connect_phases import bench_gateway
    from broker_core.listeners.settings import ListenerSettings

    async with bench_gateway() as gateway:
        OnRegistry.broker = gateway.broker
        OnRegistry.listener = ListenerSettings(name="tcp")
        await serve_protocol(OnRegistry, port)


if __name__ == "__main__":
    main(__doc__ or "", None, _serve)
