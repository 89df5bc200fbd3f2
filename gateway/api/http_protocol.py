"""``protocol_class(connections)``: uvicorn's h11 protocol with the API's connection
bounds (``gateway.api.connections``).

Uvicorn bounds a request head's size (``h11_max_incomplete_event_size``) but not the
time it takes to arrive, nor a body's: its keep-alive timer runs only between requests
and restarts with every byte received, so a client trickling a head, or sending none,
holds its socket and what it sent for ever (uvicorn issue #157). Nor does it bound
connections: ``limit_concurrency`` answers 503 once a request's head has arrived, so
sockets that never finish one are not refused. ASGI middleware cannot help, it runs
once the head is complete. So the protocol does it:

- ``connection_made``: past ``max_connections`` open, a fixed ``503`` is written and the
  socket closed, before anything is read from it;
- a deadline follows each request: ``request_timeout_s`` for its head, counted from the
  connection or from the previous response, then ``request_timeout_s`` for its body,
  counted from the head; none while the application works on it. When it passes, the
  connection is closed, after a ``408`` when the client sent part of a head, or a head
  whose body is missing and not yet answered.

What the closed connection held (h11's buffer, the body read so far) goes with it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, ClassVar, Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from gateway.api.connections import ApiConnections

__all__ = ["ApiProtocol", "protocol_class"]

log = logging.getLogger(__name__)

Part = Literal["head", "body"]


def _answer(status: int, reason: str, detail: str) -> bytes:
    body = json.dumps({"detail": detail}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class ApiProtocol(H11Protocol):
    """``H11Protocol`` bounded by ``bounds`` (set by ``protocol_class``)."""

    bounds: ClassVar[ApiConnections]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused = False
        self._deadline: asyncio.TimerHandle | None = None
        # What the deadline waits for, and for which request (the previous one's cycle
        # while a head is awaited on a kept-alive connection).
        self._waiting: tuple[Part | None, RequestResponseCycle | None] = (None, None)
        self._head_bytes = False  # some of the awaited head has arrived

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        bounds = self.bounds
        if bounds.full():
            self._refused = True
            bounds.refused += 1
            if not bounds.refusing:
                bounds.refusing = True
                log.warning(
                    "HTTP API: %d connections open (api.max_connections), refusing more",
                    bounds.open,
                )
            transport.write(
                _answer(
                    503,
                    "Service Unavailable",
                    f"too many connections to the API (api.max_connections:"
                    f" {bounds.max_connections})",
                )
            )
            transport.close()
            return
        bounds.open += 1
        bounds.refusing = False
        super().connection_made(transport)
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return
        self._cancel()
        self.bounds.open -= 1
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._waiting[0] == "head" and data:
            self._head_bytes = True
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def _part(self) -> Part | None:
        """What the connection waits for from the client: a head, a body, or nothing
        (the application has the request)."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return "head"
        if cycle.more_body and not cycle.disconnected:
            return "body"
        return None

    def _follow(self) -> None:
        """Arms the deadline of what the connection now waits for, if that changed."""
        if self.transport.is_closing():
            self._cancel()
            return
        waiting = (self._part(), self.cycle)
        if waiting[0] == self._waiting[0] and waiting[1] is self._waiting[1]:
            return
        self._cancel()
        self._waiting = waiting
        self._head_bytes = False
        if waiting[0] is not None:
            self._deadline = self.loop.call_later(self.bounds.request_timeout_s, self._expired)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        part, cycle = self._waiting
        timeout = self.bounds.request_timeout_s
        answer = False
        if part == "head":
            # A kept-alive connection that sent nothing more is only idle: closed quietly.
            if self._head_bytes or cycle is None:
                self.bounds.head_timeouts += 1
            answer = self._head_bytes and self.conn.their_state is h11.IDLE
            detail = f"request head not received within {timeout:g} s (api.request_timeout)"
        else:
            self.bounds.body_timeouts += 1
            answer = cycle is not None and not cycle.response_started
            detail = f"request body not received within {timeout:g} s (api.request_timeout)"
        if log.isEnabledFor(logging.DEBUG):
            log.debug("HTTP API connection from %s closed: %s", self.client, detail)
        if answer:
            self.transport.write(_answer(408, "Request Timeout", detail))
        self.transport.close()


def protocol_class(connections: ApiConnections) -> type[ApiProtocol]:
    """An ``ApiProtocol`` class bounded by ``connections``, for ``uvicorn.Config(http=...)``."""
    return type("ApiProtocol", (ApiProtocol,), {"bounds": connections})
