"""A lean MQTT accept path in plain Python: what a connect costs when the Python on it
is as little as MQTT allows.

``bench.connect_floor`` runs it beside edgebus, mosquitto and the bare event loop. One
``asyncio.Protocol`` on uvloop does all of a connect itself: it reads the fixed header,
checks an MQTT 3.1.1 CONNECT's protocol name and level, takes the client identifier,
keeps one table of connected clients (a second connection with the same identifier
closes the first), answers CONNACK and closes after the DISCONNECT. No sessions,
subscriptions, wills, authentication, limits, events or statistics: not a broker, a
measure of the budget a broker's own Python has on this machine.

``python -m bench.connect_lean --serve PORT`` serves it on ``PORT``.
"""

from __future__ import annotations

import asyncio

from bench.servers import main, serve_protocol

__all__ = ["Lean"]

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
        client_id = data[start + 12 : start + 12 + length].decode()
        earlier = _connected.get(client_id)
        if earlier is not None:
            earlier.transport.close()
        _connected[client_id] = self
        self.client_id = client_id
        self.transport.write(_CONNACK_ACCEPTED)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.client_id is not None and _connected.get(self.client_id) is self:
            del _connected[self.client_id]


async def _serve(port: int) -> None:
    await serve_protocol(Lean, port)


if __name__ == "__main__":
    main(__doc__ or "", None, _serve)
