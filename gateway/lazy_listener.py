"""Listening sockets bound at start-up whose server library is loaded with the first
connection (docs/performance.md, "Start-up memory").

``FirstConnection`` waits, without accepting it, until a connection is waiting on a
listening socket: the HTTP API (``gateway.api.server``) and the WebSocket listeners use
it, so a device nobody connects to over HTTP or WebSocket does not pay for FastAPI and
uvicorn (~13 MB) or websockets (~1.5 MB). The socket is bound at start-up as before: a
busy port still stops the start, and the first connection waits in the socket's backlog
while the library loads (in a worker thread: the event loop keeps serving MQTT).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from broker_core.listeners.binding import addresses, bind_listening

__all__ = ["FirstConnection", "LazyServer", "listening_socket"]

log = logging.getLogger(__name__)


async def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A listening, non-blocking TCP socket on the first address of ``host:port`` (port
    0: any free one); ``OSError`` when it cannot be bound."""
    infos = await addresses(host, port)
    if not infos:  # pragma: no cover - getaddrinfo raises instead
        raise OSError(errno.EADDRNOTAVAIL, f"no address for {host}")
    return bind_listening(infos[0], backlog)


class FirstConnection:
    """``wait(sock)`` returns when a connection waits to be accepted on ``sock``, or
    when ``release()`` was called (the gateway stops)."""

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None
        self._watched: tuple[asyncio.AbstractEventLoop, int] | None = None
        self.released = False

    async def wait(self, sock: socket.socket) -> None:
        if self.released:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()

        def readable() -> None:
            if not waiter.done():
                waiter.set_result(None)

        fd = sock.fileno()
        loop.add_reader(fd, readable)
        self._watched = (loop, fd)
        try:
            await waiter
        finally:
            self._unwatch()
            self._waiter = None

    def release(self) -> None:
        """Ends ``wait``; the socket is no longer watched when this returns, so the
        caller may close it at once (a closed socket's reader cannot be removed)."""
        self.released = True
        self._unwatch()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _unwatch(self) -> None:
        watched, self._watched = self._watched, None
        if watched is not None:
            loop, fd = watched
            loop.remove_reader(fd)


class LazyServer:
    """A listener whose server is started on its bound socket by ``start(sock)`` once a
    first connection waits; until then it offers what the gateway uses of an
    ``asyncio.Server`` (``sockets``, ``close()``, ``wait_closed()``). ``serve()`` is
    the task that waits (one of the gateway's TaskGroup)."""

    def __init__(self, sock: socket.socket, start: Callable[[socket.socket], Awaitable[Any]]):
        self._socket = sock
        self._start = start
        self._server: Any = None
        self._starting = False
        self._first = FirstConnection()

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return (self._socket,) if self._server is None else tuple(self._server.sockets)

    async def serve(self) -> None:
        await self._first.wait(self._socket)
        if self._first.released:
            return
        self._starting = True
        try:
            server = await self._start(self._socket)
        finally:
            self._starting = False
        self._server = server
        if self._first.released:  # close() came while it started
            server.close()

    def close(self) -> None:
        self._first.release()
        if self._server is not None:
            self._server.close()
        elif not self._starting:  # else serve() closes the server it gets
            self._socket.close()

    async def wait_closed(self) -> None:
        if self._server is not None:
            await self._server.wait_closed()
