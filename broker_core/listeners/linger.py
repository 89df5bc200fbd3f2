"""Closing a connection whose peer may still be sending: a FIN, then its input dropped.

Closing a socket with unread input, or input that arrives after the close, makes the
kernel answer with a reset, and a reset can discard at the peer what was written last,
before the peer read it: the DISCONNECT with its reason code, or a refusing CONNACK.
Whether more input is on its way cannot be known when closing, so the connection
lingers whenever the broker closes it after writing. ``linger`` takes such a transport
over: it ends the writing side once the write buffer is out (``write_eof``: a FIN after
the data), reads and drops whatever still arrives, and closes on the peer's EOF or
after ``LINGER_S``, whichever comes first (nginx's "lingering close" does the same).

Only transports that can half-close linger (plain TCP); TLS and WebSocket transports
close as before. At most ``LINGER_MAX`` sockets linger at once (``Lingering``, one per
broker): beyond that a connection closes at once, as if it could not half-close, and
the limit hit ``lingering`` is counted (``edgebus_limit_hits_total``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["LINGER_MAX", "LINGER_S", "Lingering"]

#: Seconds a closed connection's socket keeps dropping the peer's input at most.
LINGER_S = 2.0
#: Sockets lingering at once, at most (per broker); past it a connection closes at once.
LINGER_MAX = 1024


class Lingering:
    """The broker's lingering sockets: how many, and the bound."""

    def __init__(self, hit: Callable[[str], None], limit: int = LINGER_MAX) -> None:
        self.count = 0
        self.limit = limit
        self._hit = hit

    def linger(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> bool:
        """Takes ``transport`` over (its protocol is replaced) and closes it gracefully;
        False, and the transport untouched, when ``limit`` sockets linger already."""
        if self.count >= self.limit:
            self._hit("lingering")
            return False
        self.count += 1
        timer = loop.call_later(LINGER_S, transport.abort)
        transport.set_protocol(_Dropping(timer, self._ended))
        transport.write_eof()
        if not transport.is_reading():
            transport.resume_reading()
        return True

    def _ended(self) -> None:
        self.count -= 1


class _Dropping(asyncio.Protocol):
    __slots__ = ("_ended", "_timer")

    def __init__(self, timer: asyncio.TimerHandle, ended: Callable[[], None]) -> None:
        self._timer = timer
        self._ended = ended

    def data_received(self, data: bytes) -> None:
        pass  # the connection is over: what the peer still sends goes nowhere

    def eof_received(self) -> bool:
        return False  # the peer is done too: close

    def connection_lost(self, exc: Exception | None) -> None:
        self._timer.cancel()
        self._ended()
