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
close as before.
"""

from __future__ import annotations

import asyncio

__all__ = ["LINGER_S", "linger"]

#: Seconds a closed connection's socket keeps dropping the peer's input at most.
LINGER_S = 2.0


class _Lingering(asyncio.Protocol):
    __slots__ = ("_timer",)

    def __init__(self, timer: asyncio.TimerHandle) -> None:
        self._timer = timer

    def data_received(self, data: bytes) -> None:
        pass  # the connection is over: what the peer still sends goes nowhere

    def eof_received(self) -> bool:
        return False  # the peer is done too: close

    def connection_lost(self, exc: Exception | None) -> None:
        self._timer.cancel()


def linger(transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
    """Takes ``transport`` over (its protocol is replaced) and closes it gracefully."""
    transport.set_protocol(_Lingering(loop.call_later(LINGER_S, transport.abort)))
    transport.write_eof()
    if not transport.is_reading():
        transport.resume_reading()
