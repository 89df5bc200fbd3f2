"""TLS listener: the TCP listener's ``MqttConnection`` behind an ``ssl.SSLContext``.

The context is built from the ``tls:`` section of a listener (``listeners.tls_context``:
``server_ssl_context``), and built again from its files when the CRL file changes or the
gateway reloads (``ServerTls``): each handshake uses the context in use at its accept;
connections already up keep theirs. ``certificate_identity``
(``listeners.certificates``) reads the subject CN of a verified client certificate;
``MqttConnection`` stores it for the authenticator (``use_identity_as_username``).

``TlsListener`` accepts its sockets itself rather than through ``loop.create_server``,
whose connections the broker sees only once their handshake is done: a socket is pending
(``Connections.handshake_started``) from its accept, so sockets that open a handshake and
stall count against ``max_pending_connections`` like sockets that never send CONNECT,
and the oldest of them is closed to make room (its handshake task is cancelled, which
closes the socket, in asyncio's loop and in uvloop's). The handshake itself is the
loop's (``loop.connect_accepted_socket`` with the context), limited to
``HANDSHAKE_TIMEOUT_S``. Its connections are ``MqttConnection``s; a ``wss`` listener
serves its ``WebSocketConnection``s the same way (``protocol_factory``): any
``TlsProtocol`` whose ``connection_made`` calls ``handshake_done``.

A failed handshake ends with the TLS alert OpenSSL chose (RFC 8446 6.2, RFC 5246 7.2:
``protocol_version``, ``certificate_expired``, ``certificate_revoked``, ``unknown_ca``,
``certificate_required``...), as mosquitto sends it: the loop's SSL protocol (asyncio's,
uvloop's) closes the socket without writing what OpenSSL left in its outgoing BIO, so
the context's ``SSLObject`` (``_AlertingSSLObject``) writes it to the socket itself when
``do_handshake`` fails. The failure is logged at INFO (rate-limited) with the peer and
the reason, and counted by listener and reason (``Counters.tls_handshake_failures``,
``edgebus_tls_handshake_failures_total``). Nothing of this runs once a handshake is done.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

from broker_core.listeners.binding import listening_sockets
from broker_core.listeners.certificates import certificate_identity
from broker_core.listeners.connection import MqttConnection, Server
from broker_core.listeners.connections import Connections
from broker_core.listeners.settings import ListenerSettings
from broker_core.listeners.tls_context import (
    ServerTls,
    accepted_socket,
    load_crl,
    server_ssl_context,
    tls_problems,
)
from broker_core.lograte import RateLimitedLog

__all__ = [
    "HANDSHAKE_TIMEOUT_S",
    "ServerTls",
    "TlsListener",
    "TlsProtocol",
    "certificate_identity",
    "handshake_done",
    "handshake_failure_reason",
    "load_crl",
    "server_ssl_context",
    "start_tls",
    "tls_problems",
]

log = logging.getLogger(__name__)

#: Seconds a client has to complete the TLS handshake.
HANDSHAKE_TIMEOUT_S = 10.0

#: Sockets accepted at most per readiness of a listening socket, so one listener under a
#: flood does not hold the loop.
ACCEPT_BATCH = 64
#: Seconds accepting pauses when the process is out of file descriptors or memory.
ACCEPT_PAUSE_S = 1.0
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)

#: Verification errors (``X509_V_ERR_*``) by the ``reason`` label they are counted under.
_VERIFY_REASONS = {
    2: "unknown_ca",  # unable to get issuer certificate
    3: "crl_unavailable",  # unable to get certificate CRL
    9: "certificate_not_yet_valid",
    10: "certificate_expired",
    11: "crl_not_yet_valid",
    12: "crl_expired",
    18: "unknown_ca",  # self-signed certificate
    19: "unknown_ca",  # self-signed certificate in chain
    20: "unknown_ca",  # unable to get local issuer certificate
    21: "unknown_ca",  # unable to verify the first certificate
    23: "certificate_revoked",
}


def handshake_failure_reason(exc: BaseException) -> tuple[str, str]:
    """``(label, text)`` of a failed handshake: a short bounded label for the metric
    (``certificate_expired``, ``unsupported_protocol``...) and the words for the log
    (OpenSSL's, e.g. ``certificate has expired``)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        code = exc.verify_code
        label = _VERIFY_REASONS.get(code, "certificate_invalid")
        return label, str(exc.verify_message or exc.reason or label)
    if isinstance(exc, ssl.SSLError):
        reason = str(exc.reason or type(exc).__name__)
        return reason.lower(), reason.lower().replace("_", " ")
    if isinstance(exc, (TimeoutError, ConnectionAbortedError)):  # the loop's timeout
        return "timeout", f"no handshake within {HANDSHAKE_TIMEOUT_S:.0f} s"
    return "connection_lost", str(exc) or type(exc).__name__


class _Handshake:
    """One accepted socket in its TLS handshake, pending (``Connections.handshake_started``)."""

    __slots__ = ("task",)

    def __init__(self, task: asyncio.Task[object]) -> None:
        self.task = task

    def has_unread_input(self) -> bool:
        return False  # a handshake under way is as silent as a socket that says nothing

    def evict(self) -> None:
        self.task.cancel()  # closes the socket


class TlsProtocol(asyncio.Protocol):
    """A connection of a ``TlsListener``: pending as its handshake (``handshake``, set by
    the listener) until its ``connection_made`` calls ``handshake_done``. A subclass
    names ``handshake`` in its ``__slots__``."""

    __slots__ = ()  # no room here: MqttConnection has slots of its own
    handshake: _Handshake | None  # under way: pending as this, until connection_made


def handshake_done(
    connection: TlsProtocol, connections: Connections, listener: ListenerSettings
) -> None:
    """``connection``'s handshake is done: it stops being pending as the handshake (the
    connection takes its place, from its ``connection_made``)."""
    handshake = connection.handshake
    if handshake is not None:
        connection.handshake = None  # type: ignore[misc]  # a subclass's slot
        connections.handshake_ended(listener, handshake)


class _TlsConnection(MqttConnection, TlsProtocol):
    """The MQTT connection of a TLS listener."""

    __slots__ = ("handshake",)

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        handshake_done(self, self.broker.connections, self.listener)
        super().connection_made(base)


class TlsListener:
    """A TLS listener's sockets and its accept loop; offers what the gateway uses of an
    ``asyncio.Server`` (``sockets``, ``close``, ``wait_closed``)."""

    def __init__(
        self,
        broker: Server,
        settings: ListenerSettings,
        context: ssl.SSLContext | ServerTls,
        sockets: list[socket.socket],
        loop: asyncio.AbstractEventLoop,
        protocol_factory: Callable[[], TlsProtocol] | None = None,
    ) -> None:
        """``context``: the ``ServerTls`` the gateway reloads, or a context (a
        ``ServerTls`` of its own, rebuilt when its CRL file changes);
        ``protocol_factory``: each accepted socket's connection (default: an
        ``MqttConnection``)."""
        self.broker = broker
        self._protocol_factory = protocol_factory or (
            lambda: _TlsConnection(broker, settings, loop)
        )
        self.settings = settings
        self.tls = context if isinstance(context, ServerTls) else ServerTls(context, settings.name)
        self.sockets = sockets
        self._loop = loop
        self._handshakes: set[asyncio.Task[object]] = set()
        self._closed = False
        self._failure_log = RateLimitedLog(log)
        for sock in sockets:
            self._serve(sock)

    def _serve(self, sock: socket.socket) -> None:
        if not self._closed:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _accept(self, listening: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                sock, peer = listening.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    raise
                log.error(
                    "listener %s: cannot accept (%s), pausing %.0f s",
                    self.settings.name,
                    exc.strerror,
                    ACCEPT_PAUSE_S,
                )
                self._loop.remove_reader(listening.fileno())
                self._loop.call_later(ACCEPT_PAUSE_S, self._serve, listening)
                return
            sock.setblocking(False)
            self._handshake(sock, peer)

    def _handshake(self, sock: socket.socket, peer: Any) -> None:
        ssl_context = self.tls.for_handshake()
        connection = self._protocol_factory()
        # The task's context names the socket to the SSLObject (_AlertingSSLObject).
        context = contextvars.copy_context()
        context.run(accepted_socket.set, sock)
        task: asyncio.Task[object] = self._loop.create_task(
            self._loop.connect_accepted_socket(
                lambda: connection,
                sock,
                ssl=ssl_context,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S,
            ),
            context=context,
        )
        handshake = connection.handshake = _Handshake(task)  # type: ignore[misc]
        self._handshakes.add(task)
        task.add_done_callback(lambda done: self._handshake_done(done, connection, peer))
        self.broker.connections.handshake_started(self.settings, handshake)

    def _handshake_done(
        self, task: asyncio.Task[object], connection: TlsProtocol, peer: Any
    ) -> None:
        self._handshakes.discard(task)
        # Still pending as the handshake when it failed, timed out or was evicted.
        handshake_done(connection, self.broker.connections, self.settings)
        if task.cancelled():
            return  # evicted (counted as the limit hit) or closing
        exc = task.exception()
        if exc is not None:
            self._failed(exc, peer)

    def _failed(self, exc: BaseException, peer: Any) -> None:
        """Counts a failed handshake by listener and reason, and logs it: at INFO
        (rate-limited) when TLS refused the client, at DEBUG when the socket went away
        or timed out (a port scan, a client that gave up)."""
        label, text = handshake_failure_reason(exc)
        failures = self.broker.counters.tls_handshake_failures
        key = (self.settings.name, label)
        failures[key] = failures.get(key, 0) + 1
        address = _show_peer(peer)
        if isinstance(exc, ssl.SSLError):
            self._failure_log.info(
                self._loop.time(),
                "listener %s: TLS handshake from %s failed: %s",
                self.settings.name,
                address,
                text,
            )
        else:
            log.debug(
                "listener %s: TLS handshake from %s failed: %s", self.settings.name, address, text
            )

    def close(self) -> None:
        """Stops accepting and ends the handshakes under way; connections stay."""
        self._closed = True
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())
            sock.close()
        for task in self._handshakes:
            task.cancel()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self._handshakes, return_exceptions=True)


def _show_peer(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = peer[0], peer[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peer)


async def start_tls(
    broker: Server,
    host: str,
    port: int,
    settings: ListenerSettings,
    context: ssl.SSLContext | ServerTls,
    backlog: int = 1024,
) -> TlsListener:
    """Binds a TLS listener whose connections are ``MqttConnection``s, like tcp;
    ``context`` as ``TlsListener`` takes it."""
    sockets = await listening_sockets(host, port, backlog)
    listener = TlsListener(broker, settings, context, sockets, asyncio.get_running_loop())
    for sock in sockets:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted ones inherit it
        log.info("listener %s (TLS) bound to %s", settings.name, sock.getsockname()[:2])
    return listener
