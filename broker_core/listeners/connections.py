"""The connections of the listeners: every open socket, the listeners' bounds, timeouts.

``Connections`` owns, for every listener (by name):

- the open connections, from ``connection_made`` to ``connection_lost``
  (``MqttConnection`` reports both);
- the sockets that have not sent CONNECT yet, at most ``max_pending_connections``
  (``listeners.pending``: the oldest silent one is closed to make room, counted in
  limit ``pending_connections``); on a TLS listener a socket is pending from its accept,
  its TLS handshake included (``handshake_started``, ``listeners.tls``);
- when a CONNECT arrives: at most ``max_connections`` clients that sent CONNECT at once
  (refused with 0x97 Quota exceeded, limit ``max_connections``) and at most
  ``connection_rate`` CONNECTs a second (0x9F Connection rate exceeded, limit
  ``connection_rate``); the CONNECT policy (``broker_core.connect``) sends the refusal;
- the sweep: keep alive and connect timeouts of every connection, every
  ``sweep_interval_s`` (``run``), on the broker's clock (``broker_core.clock``: a
  wall-clock step moves no deadline); a deadline that falls before the next sweep gets
  a timer of its own, so a connection is closed on time, not up to a sweep late;
- the write timeout (``mqtt.write_timeout``): a connection whose write buffer went over
  the high-water mark (``write_paused``: the broker stops writing to it and reading from
  it) and whose client read nothing for ``write_timeout_s`` is aborted by the sweep
  (up to one sweep late), counted in limit ``write_timeout`` and logged at INFO. The
  client read some when, from one sweep to the next, the transport's buffer shrank or
  the kernel's bytes unacknowledged by the client on its socket fell (Linux
  ``SIOCOUTQ``, one ioctl per paused connection per sweep; elsewhere the transport's
  buffer alone). A client cut reads nothing: no DISCONNECT could reach it. Keep alive
  cannot close it: its own input waits unread in the paused socket, so it is not
  silent (``_expire``), and with keep alive 0 there is none. Its will goes out as
  after any lost connection. Only paused connections are looked at, one dict entry
  each while paused: the deliveries' path pays nothing;
- memory freed by closed connections given back to the system (``broker_core.memory``);
- the sockets lingering after the broker closed them, at most ``LINGER_MAX``
  (``listeners.linger``, limit ``lingering``).
"""

from __future__ import annotations

import array
import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from broker_core.clock import now as clock_now
from broker_core.listeners.linger import Lingering
from broker_core.listeners.pending import PendingSockets
from broker_core.lograte import RateLimitedLog
from broker_core.memory import TRIM_INTERVAL_S, release_free_memory
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.session_state import Counters
from broker_core.ratelimit import TokenBucket

if TYPE_CHECKING:
    from broker_core.listeners.connection import MqttConnection
    from broker_core.listeners.settings import ListenerSettings

__all__ = ["WRITE_TIMEOUT_S", "Connections", "Unconnected"]

log = logging.getLogger(__name__)

#: ``mqtt.write_timeout``'s default: seconds a paused connection's client may read nothing.
WRITE_TIMEOUT_S = 60.0

_EARLY_S = 0.001  # a deadline's timer (``Connections._check``) may run this much early

try:  # Linux: SIOCOUTQ (= TIOCOUTQ), a TCP socket's bytes not yet acknowledged by the peer
    from fcntl import ioctl as _ioctl
    from termios import TIOCOUTQ as _SIOCOUTQ
except ImportError:  # pragma: no cover - not on Windows
    _ioctl = None  # type: ignore[assignment]


def kernel_unacked(transport: Any) -> int | None:
    """The bytes in the kernel's send queue of ``transport``'s socket that its peer has
    not acknowledged (Linux ``SIOCOUTQ``), or None where that cannot be known (no
    socket: a closed transport; not Linux). Under TLS and WebSocket transports it is the
    TCP socket below (``get_extra_info("socket")`` passes through); uvloop's too.

    Acknowledged bytes are bytes the client's TCP stack took in: with its receive
    buffer full (a client that stopped reading) none are, so the number falls only
    when the client reads. ``SIOCOUTQNSD`` (bytes not yet sent) is not used: it falls
    when the kernel sends, before the client took anything in."""
    if _ioctl is None:
        return None
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    try:
        fd = sock.fileno()
        if fd < 0:
            return None
        buf = array.array("i", [0])
        _ioctl(fd, _SIOCOUTQ, buf, True)
    except (OSError, ValueError):
        return None
    return buf[0]


class Unconnected(Protocol):
    """A socket that has not sent CONNECT: a connection, or a TLS handshake under way."""

    def has_unread_input(self) -> bool: ...

    def evict(self) -> None: ...


def _has_unread_input(socket: Unconnected) -> bool:
    return socket.has_unread_input()


class Connections:
    def __init__(self, counters: Counters, write_timeout_s: float = WRITE_TIMEOUT_S) -> None:
        self.counters = counters
        self.write_timeout_s = write_timeout_s
        # Connections over their write high-water mark: (since when the client read
        # nothing, the bytes in the transport's buffer and those the kernel holds
        # unacknowledged (None: unknown) at the last sweep).
        self._write_paused: dict[MqttConnection, tuple[float, int, int | None]] = {}
        self._write_timeout_log = RateLimitedLog(log)
        self.pending: PendingSockets[Unconnected] = PendingSockets()
        #: Closed sockets dropping their peer's last input (``listeners.linger``).
        self.lingering = Lingering(counters.hit)
        self._open: set[MqttConnection] = set()
        self._counted: dict[str, int] = {}  # per listener: connections that sent CONNECT
        self._buckets: dict[str, TokenBucket] = {}  # per listener: connection_rate
        self._closed_since_trim = 0

    def __len__(self) -> int:
        return len(self._open)

    def __iter__(self) -> Iterator[MqttConnection]:
        return iter(self._open)

    def opened(self, conn: MqttConnection) -> None:
        """A new socket, pending until it sends CONNECT (listeners.pending)."""
        self._open.add(conn)
        self._pending(conn.listener, conn)

    def handshake_started(self, listener: ListenerSettings, handshake: Unconnected) -> None:
        """A socket accepted by a TLS listener, in its handshake: pending from now, so
        handshakes that stall count against ``max_pending_connections`` too."""
        self._pending(listener, handshake)

    def handshake_ended(self, listener: ListenerSettings, handshake: Unconnected) -> None:
        """The handshake is over: failed, evicted, or done (the connection is pending
        in its place from its ``connection_made``)."""
        self.pending.remove(listener.name, handshake)

    def _pending(self, listener: ListenerSettings, socket: Unconnected) -> None:
        oldest = self.pending.add(
            listener.name, socket, listener.max_pending_connections, _has_unread_input
        )
        if oldest is not None:
            self.counters.hit("pending_connections")
            oldest.evict()

    def connect_received(self, conn: MqttConnection, now: float) -> int | None:
        """A socket sent CONNECT; returns the reason to refuse it, if any."""
        listener = conn.listener
        if not self.pending.remove(listener.name, conn):
            return ReasonCode.UNSPECIFIED_ERROR  # evicted or closed meanwhile
        conn.counted = True
        count = self._counted.get(listener.name, 0) + 1
        self._counted[listener.name] = count
        if count > listener.max_connections:
            self.counters.hit("max_connections")
            return ReasonCode.QUOTA_EXCEEDED
        if listener.connection_rate is not None:
            bucket = self._buckets.get(listener.name)
            if bucket is None:
                burst = max(1.0, listener.connection_rate)
                bucket = self._buckets[listener.name] = TokenBucket(
                    listener.connection_rate, burst, now
                )
            if not bucket.try_take(now):
                self.counters.hit("connection_rate")
                return ReasonCode.CONNECTION_RATE_EXCEEDED
        return None

    def closed(self, conn: MqttConnection) -> None:
        self._open.discard(conn)
        self._write_paused.pop(conn, None)
        self._closed_since_trim += 1
        if conn.counted:
            self._counted[conn.listener.name] -= 1
        else:
            self.pending.remove(conn.listener.name, conn)

    def by_listener(self) -> tuple[Counter[tuple[str, int]], Counter[str]]:
        """(connected clients by listener and protocol level, connections not connected
        yet by listener): a connection counts as connected while its session is
        attached to a session state, as connecting before (no CONNECT yet, or being
        decided); a closing one counts as neither."""
        connected: Counter[tuple[str, int]] = Counter()
        connecting: Counter[str] = Counter()
        for conn in self._open:
            session = conn.session
            state = session.state
            if state is not None and state.connection is session:
                connected[(conn.listener.name, session.protocol_level)] += 1
            elif state is None and not session.closed:
                connecting[conn.listener.name] += 1
        return connected, connecting

    def write_paused(self, conn: MqttConnection, now: float) -> None:
        """``conn``'s write buffer is over its high-water mark: the write timeout runs."""
        transport = conn.transport
        if transport is not None:
            self._write_paused[conn] = (
                now,
                transport.get_write_buffer_size(),
                kernel_unacked(transport),
            )

    def write_resumed(self, conn: MqttConnection) -> None:
        """``conn``'s write buffer drained below its low-water mark."""
        self._write_paused.pop(conn, None)

    def sweep(self, now: float, interval_s: float | None = None) -> None:
        """Keep alive and connect timeouts of every connection, and the write timeout
        of the paused ones. With ``interval_s`` (the time to the next sweep), a keep
        alive or connect deadline due before then is checked at its time."""
        if self._write_paused:
            self._check_writes(now)
        soon = None if interval_s is None else now + interval_s
        for conn in list(self._open):
            deadline = conn.session.next_deadline()
            if deadline is None:
                continue
            if now >= deadline:
                self._expire(conn, now)
            elif soon is not None and deadline < soon:
                asyncio.get_running_loop().call_later(deadline - now, self._check, conn)

    def _check(self, conn: MqttConnection) -> None:
        """A timer at a connection's deadline (``sweep``): it may have moved meanwhile."""
        if conn not in self._open:
            return
        deadline = conn.session.next_deadline()
        if deadline is None:
            return
        # The loop's timers may run a hair early (its clock's resolution).
        now = clock_now()
        if now >= deadline - _EARLY_S:
            self._expire(conn, max(now, deadline))

    def _check_writes(self, now: float) -> None:
        """Aborts the paused connections whose client read nothing for
        ``write_timeout_s``. The client read some when, since the last sweep, the
        transport's buffer shrank or the kernel's unacknowledged bytes on its socket
        (``kernel_unacked``) fell: then its time starts again. The kernel's count is
        the one that moves with a slow reader: the send buffer autotunes to megabytes
        and takes the transport's bytes only once a large part of it is free, so the
        transport's buffer can stand still for minutes while the client reads."""
        limit = self.write_timeout_s
        paused = self._write_paused
        for conn, (since, waiting, unacked) in list(paused.items()):
            transport = conn.transport
            if transport is None:
                del paused[conn]
                continue
            left = transport.get_write_buffer_size()
            kernel = kernel_unacked(transport)
            if left < waiting or (kernel is not None and unacked is not None and kernel < unacked):
                since = now  # the client read some: it is slow, not gone
            elif now - since >= limit:
                del paused[conn]
                self.counters.hit("write_timeout")
                session = conn.session
                state = session.state
                self._write_timeout_log.info(
                    now,
                    "client %s (%s) closed: it read nothing of the %d bytes waiting for it"
                    " for %.0f s (mqtt.write_timeout)",
                    "-" if state is None else state.client_id,
                    session.peer,
                    left + (kernel or 0),
                    now - since,
                )
                conn.abort()
                continue
            paused[conn] = (since, left, kernel)

    @staticmethod
    def _expire(conn: MqttConnection, now: float) -> None:
        if conn.input_held_back():
            return  # it did send: its packets wait until the broker reads on
        conn.session.handle_timeout(now)
        conn.after_session_update(now)

    async def run(
        self, sweep_interval_s: float = 0.5, also: Callable[[float], None] | None = None
    ) -> None:
        """Housekeeping until cancelled: the sweep, then ``also(now)`` (the broker's own
        housekeeping), and memory freed by closed connections given back to the system
        (broker_core.memory)."""
        trimmed_at = time.monotonic()
        while True:
            await asyncio.sleep(sweep_interval_s)
            now = clock_now()
            self.sweep(now, sweep_interval_s)
            if also is not None:
                also(now)
            if self._closed_since_trim and time.monotonic() - trimmed_at >= TRIM_INTERVAL_S:
                self._closed_since_trim = 0
                # In a worker thread: walking a large heap takes a while.
                await asyncio.to_thread(release_free_memory)
                trimmed_at = time.monotonic()
