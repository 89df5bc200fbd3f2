"""The one place where socket bytes meet a ``Session``: an ``asyncio.Protocol``.

Feed bytes, dispatch the session's events to the broker, write ``data_to_send()``. The
connection knows the broker only as a ``Server`` (the protocol below, which ``Broker``
satisfies): it imports no broker module. It registers itself with the server's
``Connections`` (``listeners.connections``: the listeners' bounds, timeouts), which
decides on its CONNECT's quota before the server's CONNECT policy runs.
Writes are batched: a session with new output schedules one flush per event-loop
turn, so a subscriber receiving many messages in a turn gets one ``write``. The
transport's high-water mark pauses delivery (the session queues instead, bounded) and
reading; a client that then reads nothing for ``mqtt.write_timeout`` is aborted
(``Connections``, the write timeout, which also reads the kernel's send queue).

A connection the broker closes with a DISCONNECT or a refusing CONNACK ends with a FIN
rather than a reset, whatever the client still sends (``listeners.linger``), so the
client reads what was written last. After a client's DISCONNECT, or a protocol error of a
connected client, the close (and the DISCONNECT) waits for the acknowledgements of what it
sent before (``Session.acks_due``: a SUBACK, a PUBACK held for the store's commit).

Exceptions raised while handling a client's packets map to DISCONNECT reason codes
through one table (mosquitto's handle__packet); unknown ones are logged with
``exc_info`` and the client only sees UNSPECIFIED_ERROR.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import math
import socket
import sys
import termios
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from broker_core.clock import BASE as _CLOCK_BASE
from broker_core.clock import monotonic as _monotonic
from broker_core.clock import now as _clock_now
from broker_core.errors import MalformedPacket, ProtocolError, ProtocolViolation
from broker_core.listeners.certificates import certificate_identity
from broker_core.listeners.settings import ListenerSettings
from broker_core.mqtt.events import (
    AuthReceived,
    ConnectionClosing,
    ConnectRequested,
    DisconnectReceived,
    Event,
    PublishReceived,
    SubscribeRequested,
    UnsubscribeRequested,
)
from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.observer import MessageObserver
from broker_core.mqtt.packets import Auth, Connect, Subscribe, Unsubscribe
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.session import Session
from broker_core.mqtt.session_state import Counters
from broker_core.ratelimit import TokenBucket

if TYPE_CHECKING:
    from broker_core.listeners.connections import Connections

__all__ = ["MqttConnection", "Server", "WriteStore", "reason_for_exception"]

log = logging.getLogger(__name__)

_RATE = 1  # reading paused: over the publish rate
_STORE = 2  # reading paused: the store's writer is behind
_BUDGET = 4  # reading paused: more than the read budget arrived in one turn
_WRITE = 8  # reading paused: the write buffer is over its high-water mark

# Linux's: send a pending TCP ACK now (``MqttConnection._ack_at_once``).
_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)

_EOF = 1  # the peer's EOF arrived while its input still waited: close after that input
_LOST = 2  # ... and the transport is already gone (TLS): the end comes after that input

# Exception class -> DISCONNECT reason code; the first matching row wins.
_EXCEPTION_REASONS: tuple[tuple[type[BaseException], int], ...] = (
    (MalformedPacket, ReasonCode.MALFORMED_PACKET),
    (ProtocolViolation, ReasonCode.PROTOCOL_ERROR),
    (ProtocolError, ReasonCode.PROTOCOL_ERROR),
    (MemoryError, ReasonCode.SERVER_BUSY),
    (Exception, ReasonCode.UNSPECIFIED_ERROR),
)


class WriteStore(Protocol):
    """What a connection asks of the broker's store: is its writer behind?"""

    @property
    def pending(self) -> int: ...

    def backlogged(self) -> bool: ...

    def on_drained(self, callback: Callable[[], None]) -> None: ...


class Server(Protocol):
    """What a connection needs of the broker (``Broker`` is one)."""

    limits: ServerLimits
    counters: Counters
    write_high_water: int
    connections: Connections

    @property
    def observers(self) -> MessageObserver: ...

    @property
    def store(self) -> WriteStore: ...

    def connect(
        self,
        session: Session,
        connect: Connect,
        now: float,
        listener: ListenerSettings | None = None,
        certificate_identity: str | None = None,
        refusal: int | None = None,
    ) -> Coroutine[Any, Any, None] | None: ...

    def on_publish(self, session: Session, event: PublishReceived, now: float) -> None: ...

    def on_subscribe(self, session: Session, packet: Subscribe, now: float) -> None: ...

    def on_unsubscribe(self, session: Session, packet: Unsubscribe, now: float) -> None: ...

    def on_auth(
        self,
        session: Session,
        auth: Auth,
        listener: ListenerSettings | None = None,
        certificate_identity: str | None = None,
    ) -> None: ...

    def connection_closed(self, session: Session, now: float) -> None: ...


def reason_for_exception(exc: BaseException) -> int:
    if isinstance(exc, ProtocolError):
        return exc.reason_code
    for cls, code in _EXCEPTION_REASONS:
        if isinstance(exc, cls):
            return code
    return ReasonCode.UNSPECIFIED_ERROR


class MqttConnection(asyncio.Protocol):
    __slots__ = (
        "_backlog",
        "_connect_task",
        "_ending",
        "_flush_pending",
        "_held",
        "_loop",
        "_paused",
        "_publish_bucket",
        "broker",
        "certificate_identity",
        "counted",
        "listener",
        "session",
        "transport",
    )

    def __init__(
        self,
        broker: Server,
        listener: ListenerSettings,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """``loop``: the running loop, passed by a listener that knows it (looking it up
        costs a ``getpid`` system call per connection)."""
        self.broker = broker
        self.listener = listener
        self.certificate_identity: str | None = None  # a verified client certificate's CN
        self.transport: asyncio.Transport | None = None
        self._flush_pending = False
        self._connect_task: asyncio.Task[None] | None = None
        self._loop = loop or asyncio.get_running_loop()
        self.counted = False  # it sent CONNECT: counts against max_connections
        self._publish_bucket: TokenBucket | None = None
        self._paused = 0  # reasons reading is paused: _RATE | _STORE | _BUDGET | _WRITE
        self._held: deque[Event] | None = None  # events waiting for the publish rate
        self._backlog: deque[bytes] | None = None  # reads waiting, over the read budget
        self._ending = 0  # _EOF or _LOST: the peer is done, input still waits

    # -- transport callbacks -------------------------------------------------------------

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # A stream transport: asyncio's, uvloop's or the WebSocket one. uvloop's are not
        # subclasses of asyncio.Transport, so no isinstance check: they have its methods.
        transport: asyncio.Transport = base  # type: ignore[assignment]
        self.transport = transport
        peer = transport.get_extra_info("peername")
        peer_text = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else None
        broker = self.broker
        now = _CLOCK_BASE + _monotonic()
        session = Session(broker.limits, now, peer_text, broker.counters, broker.observers)
        session.waker = self
        self.session = session
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:  # tls, wss: the CN of a verified client certificate
            self.certificate_identity = certificate_identity(ssl_object)
        transport.set_write_buffer_limits(high=broker.write_high_water)
        broker.connections.opened(self)

    def data_received(self, data: bytes) -> None:
        broker = self.broker
        broker.counters.bytes_received += len(data)
        if self._backlog is not None:
            # Over the read budget: this connection waits for its next turn. (An event
            # loop may hand over several reads at once, uvloop up to 32, before the
            # pause takes effect.)
            self._backlog.append(data)
            return
        now = _CLOCK_BASE + _monotonic()  # the broker's clock (broker_core.clock), inline
        session = self.session
        # What the session answers (CONNACK, acknowledgements) leaves in one write at
        # the end of this input: no flush scheduled for later in the turn (``wakeup``).
        self._flush_pending = True
        try:
            session.receive_data(data, now)
            self._process(now)
        finally:
            if session.closed and self._held is not None:
                # Closed by a DISCONNECT behind events held by the publish rate: the
                # end waits for them (``_release_held`` flushes, then closes).
                self._flush_pending = False
            elif session.has_output or session.closed:
                self._flush()
            else:
                self._flush_pending = False  # nothing to answer (a QoS 0 publisher)
                if session.acks_received:
                    self._ack_at_once()
            session.acks_received = False
        if session.input_pending:
            self._defer_input()
        if broker.store.pending and broker.store.backlogged():
            # The store's writer is behind: stop reading until it catches up.
            self._pause(_STORE)
            broker.store.on_drained(lambda: self._resume(_STORE))

    def _ack_at_once(self) -> None:
        """The client's acknowledgements got no answer: TCP's ACK of them goes now.

        The kernel would delay it (up to 40 ms) for data to carry it. A client that
        leaves Nagle's algorithm on (paho does) holds its next packet until that ACK:
        one subscribed to what it publishes acknowledges the copy it gets back, then
        waits about 40 ms to send its next QoS 1 PUBLISH. (mosquitto escapes this by
        chance: Nagle's algorithm, on by default on its sockets, holds back the PUBACK
        it writes after the copy until the client's acknowledgement arrives, and the
        PUBACK then carries the ACK.) A client's acknowledgements are small and
        answered by nothing, so this costs one system call when a read was only
        acknowledgements, never on the path of a publisher."""
        transport = self.transport
        sock = None if transport is None else transport.get_extra_info("socket")
        if sock is None or _TCP_QUICKACK is None:
            return
        with contextlib.suppress(OSError, ValueError):  # not TCP, or closed meanwhile
            sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)

    def has_unread_input(self) -> bool:
        """True when bytes from the peer wait in the socket's receive buffer."""
        transport = self.transport
        sock = None if transport is None else transport.get_extra_info("socket")
        if sock is None:
            return False
        try:
            waiting = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
        except (OSError, ValueError):
            return False
        return int.from_bytes(waiting, sys.byteorder) > 0

    def input_held_back(self) -> bool:
        """Input from the client waits on the broker, unread: a read budget's backlog, or
        bytes in the socket while reading is paused (a full write buffer, the publish
        rate, a busy store). Such a client is not silent, whatever its keep alive says
        (``Connections.sweep``)."""
        return bool(self._backlog) or (bool(self._paused) and self.has_unread_input())

    def evict(self) -> None:
        """Closes a socket that never sent CONNECT, to make room (listeners.pending)."""
        self.session.connection_lost()
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.abort()

    def eof_received(self) -> bool:
        """The peer sent all it will. Input that arrived before its EOF is still handled:
        while some waits (the read budget, the publish rate), a TCP transport stays open
        and closes once that input is through (``_input_done``). A TLS transport closes
        now whatever this returns; ``connection_lost`` then defers the end instead."""
        if not self._input_waits():
            return False  # close the transport
        self._ending = _EOF
        transport = self.transport
        return transport is not None and transport.get_extra_info("ssl_object") is None

    def _input_waits(self) -> bool:
        return self._backlog is not None or self._held is not None or self.session.input_pending

    def _input_done(self) -> None:
        """Everything received is handled; after the peer's EOF, that is the end."""
        if self._ending == _LOST:
            self._ending = 0
            self._end()
            return
        transport = self.transport
        if self._ending == _EOF and transport is not None and not transport.is_closing():
            self._flush()
            if self.transport is transport:  # not handed over to linger by the flush
                transport.close()

    def pause_writing(self) -> None:
        """The write buffer is over ``write_high_water``: deliveries wait in the session's
        queue, and the client's input waits until it reads what it was sent, so a client
        that sends without reading (PINGREQ, QoS 1 PUBLISH) cannot make the broker
        buffer its answers without bound: TCP holds it back."""
        broker = self.broker
        broker.counters.hit("write_high_water")
        now = _clock_now()
        self.session.set_writable(False, now)
        self._pause(_WRITE)
        broker.connections.write_paused(self, now)  # the write timeout runs

    def resume_writing(self) -> None:
        self.broker.connections.write_resumed(self)
        self.session.set_writable(True, _clock_now())
        self._resume(_WRITE)

    def abort(self) -> None:
        """The write timeout (``Connections``): the client has read nothing for too long,
        so nothing written (no DISCONNECT) would reach it. The transport is dropped and
        the connection ends now, its will handled as after any lost connection."""
        transport = self.transport
        if transport is not None:
            transport.abort()
            self._end()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._ending == _EOF and exc is None and self._input_waits():
            self._ending = _LOST  # handled turn by turn as before; then _input_done ends
            return
        self._end()

    def shut_down(self, reason_code: int) -> None:
        """The server stops: an MQTT 5 client gets DISCONNECT ``reason_code``, and the
        connection ends now, every protocol version alike: the broker publishes the
        client's will (or keeps it pending, its delay running) before it returns, not
        when the transport reports the close on a later loop turn, after the store may
        have closed (MQTT 3.1.1 [MQTT-3.1.2-8])."""
        self.session.disconnect(reason_code)
        self.after_session_update(_clock_now())  # a DISCONNECT written, then the close
        transport = self.transport
        if transport is not None:  # closing, not ended yet (nothing written, or TLS)
            if not transport.is_closing():
                transport.close()
            self._end()

    def _end(self) -> None:
        """The connection is over: the session, the listener's count, the broker."""
        if self.transport is None:
            return  # ended already (``shut_down``): the transport's close came after
        self.session.connection_lost()
        task = self._connect_task
        if task is not None and not task.done():
            task.cancel()
        self.broker.connections.closed(self)
        self.broker.connection_closed(self.session, _clock_now())
        self.transport = None  # it refers to us: no cycle left (freed without the GC)

    # -- session driving ---------------------------------------------------------------------

    def after_session_update(self, now: float) -> None:
        """Something outside data_received changed the session (timer, takeover)."""
        self._process(now)
        self._flush()

    def _process(self, now: float) -> None:
        """Hands the session's events to the broker; the caller flushes (and so closes
        a session that closed)."""
        session = self.session
        events = session.events()
        while events:
            broker = self.broker
            for i, event in enumerate(events):
                if self._held is not None:
                    self._held.extend(events[i:])  # over the publish rate: wait, in order
                    break
                try:
                    if type(event) is PublishReceived and self._publish_bucket is None:
                        broker.on_publish(session, event, now)  # the hot path, no detour
                    else:
                        self._dispatch(event, now)
                except Exception as exc:
                    self._fail(exc)
                    return
            events = session.events()

    def _defer_input(self) -> None:
        """Over the read budget: the rest of what arrived waits for the next loop turn,
        after every other connection's turn, and reading pauses meanwhile."""
        self.broker.counters.hit("read_budget")
        if self._backlog is None:
            self._backlog = deque()
            self._pause(_BUDGET)
        self._loop.call_soon(self._read_more)

    def _read_more(self) -> None:
        """One more read budget's worth of what arrived; reading resumes once it is all
        handled."""
        session = self.session
        backlog = self._backlog
        if backlog is None:
            return
        if not session.closed:  # after a DISCONNECT, the rest is not read
            now = _clock_now()
            session.receive_data(
                b"" if session.input_pending or not backlog else backlog.popleft(), now
            )
            self._process(now)
            if session.closed and self._held is None:
                self._flush()  # closes the transport; held events first (_release_held)
            if session.input_pending or backlog:
                self._defer_input()
                return
        self._backlog = None
        self._resume(_BUDGET)
        if self._held is None:
            self._input_done()

    def _release_held(self) -> None:
        """The publish-rate bucket refilled: handle what waited, then read again."""
        held = self._held
        self._held = None
        transport = self.transport
        if held is None or transport is None:
            return
        if transport.is_closing() and self._ending != _LOST:
            return  # closed by us or reset by the peer: what waited goes with it
        now = _clock_now()
        while held and self._held is None:
            try:
                self._dispatch(held.popleft(), now)
            except Exception as exc:
                self._fail(exc)
                return
        if self._held is not None:  # over the rate again: the rest keeps its place
            held.extend(self._held)
            self._held = held
            return
        self._resume(_RATE)
        self._process(now)
        if self.session.closed:
            self._flush()  # what arrived before the DISCONNECT is through: close
        if not self._input_waits():
            self._input_done()

    def _dispatch(self, event: Event, now: float) -> None:
        session = self.session
        if type(event) is PublishReceived:
            self.broker.on_publish(session, event, now)
            bucket = self._publish_bucket
            if bucket is not None:
                wait_s = bucket.take(now)
                if wait_s > 0 and self._held is None:
                    # Over the publish rate: hold what follows and stop reading until
                    # the bucket refills. Nothing is dropped; the publisher slows down.
                    self._held = deque()
                    self._pause(_RATE)
                    self._loop.call_later(wait_s, self._release_held)
        elif type(event) is SubscribeRequested:
            self.broker.on_subscribe(session, event.subscribe, now)
        elif type(event) is UnsubscribeRequested:
            self.broker.on_unsubscribe(session, event.unsubscribe, now)
        elif type(event) is ConnectRequested:
            self._connect(event, now)
        elif type(event) is DisconnectReceived or type(event) is ConnectionClosing:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("connection %s closing: %s", session.peer, event)
        elif type(event) is AuthReceived:
            self.broker.on_auth(session, event.auth, self.listener, self.certificate_identity)

    def _connect(self, event: ConnectRequested, now: float) -> None:
        """The broker decides on the CONNECT, here and now unless authentication has
        to wait: then a task awaits the rest. (The CONNACK goes out with the flush the
        session's output scheduled.)"""
        broker = self.broker
        refusal = broker.connections.connect_received(self, now)
        limits = broker.limits
        if refusal is None and limits.publish_rate is not None:
            burst = limits.publish_burst or max(1, math.ceil(limits.publish_rate))
            self._publish_bucket = TokenBucket(limits.publish_rate, burst, now)
        rest = broker.connect(
            self.session, event.connect, now, self.listener, self.certificate_identity, refusal
        )
        if rest is not None:
            task = self._connect_task = self._loop.create_task(self._connect_later(rest))
            # A task cancelled before it first ran (the connection closed in this turn,
            # ``_end``) never awaits ``rest``: closed once the task is done, it goes
            # without "coroutine was never awaited" (a no-op once it ran).
            task.add_done_callback(lambda _: rest.close())

    async def _connect_later(self, rest: Coroutine[Any, Any, None]) -> None:
        try:
            await rest
        except Exception as exc:
            self._fail(exc)
            return
        finally:
            self._connect_task = None  # a done task and its frame: ~600 bytes a client
        self.after_session_update(_clock_now())

    def _fail(self, exc: BaseException) -> None:
        code = reason_for_exception(exc)
        session = self.session
        if not isinstance(exc, ProtocolError):
            known = session.state
            log.error(
                "error handling client %s",
                session.peer,
                exc_info=exc,
                extra=None if known is None else {"client_id": known.client_id},
            )
        if session.state is None and not session.closed:
            session.reject(code)
        else:
            session.disconnect(code)
        self._flush()

    def _pause(self, reason: int) -> None:
        transport = self.transport
        if not self._paused and transport is not None:
            transport.pause_reading()
        self._paused |= reason

    def _resume(self, reason: int) -> None:
        if not self._paused & reason:
            return
        self._paused &= ~reason
        transport = self.transport
        if not self._paused and transport is not None and not transport.is_closing():
            transport.resume_reading()

    def wakeup(self) -> None:
        """The session has output: one flush this loop turn (``Waker``)."""
        if not self._flush_pending:
            self._flush_pending = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        transport = self.transport
        if transport is None:
            return
        if transport.is_closing():
            self.session.data_to_send()  # nowhere to go any more
            return
        session = self.session
        if session.closed and session.acks_due:
            # After the client's DISCONNECT or a protocol error, acknowledgements of what
            # it sent before wait for the store: what goes before them is written, the
            # rest (the DISCONNECT) and the close wait for them (each wakes this up; a
            # failed commit too).
            data = session.data_before_acks()
            if data:
                self.broker.counters.bytes_sent += len(data)
                transport.write(data)
            return
        data = session.data_to_send()
        if data:
            self.broker.counters.bytes_sent += len(data)
            transport.write(data)
        if session.closed:
            # The broker ends the connection with something written (a DISCONNECT, a
            # refusing CONNACK): the client may still be sending, and input arriving
            # at a closed socket is answered with a reset that can discard what was
            # just written before the client reads it. Lingering sends a FIN instead.
            # (Whether input waits cannot be known: more may be on its way.) When it
            # wrote nothing, as after a client's own DISCONNECT, a plain close.
            if (
                data
                and transport.can_write_eof()
                and self.broker.connections.lingering.linger(transport, self._loop)
            ):
                self._end()
            else:
                transport.close()
