"""What a listener decides for its own connections (the ``listeners:`` entries)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ListenerSettings"]


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    name: str = "tcp"
    allow_anonymous: bool = True
    max_connections: int = 10_000
    max_pending_connections: int = 256  # sockets that have not sent CONNECT (listeners.pending)
    connection_rate: float | None = None
    use_identity_as_username: bool = False
