"""What a listener decides for its own connections (the ``listeners:`` entries)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ListenerSettings", "Listening"]


class Listening(Protocol):
    """A bound listener as the gateway runs it: an ``asyncio.Server`` (tcp), websockets'
    ``Server`` (ws, wss) or ``listeners.tls.TlsListener``."""

    @property
    def sockets(self) -> Sequence[Any]: ...

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    name: str = "tcp"
    allow_anonymous: bool = True
    max_connections: int = 10_000
    max_pending_connections: int = 256  # sockets that have not sent CONNECT (listeners.pending)
    connection_rate: float | None = None
    use_identity_as_username: bool = False
