"""TLS listener: the TCP listener's ``MqttConnection`` behind an ``ssl.SSLContext``.

``server_ssl_context`` builds the context from plain arguments (the gateway passes the
``tls:`` section of a listener): TLS 1.2 or 1.3 at least, the server certificate and key,
and for mutual TLS the CA bundle client certificates are verified against:

    verify_peer  fail_if_no_peer_cert  verify_mode     a client without a certificate
    false        -                     CERT_NONE       is not asked for one
    true         false                 CERT_OPTIONAL   falls back to username/password
    true         true                  CERT_REQUIRED   fails the handshake

A certificate that does not chain to ``cafile`` fails the handshake in both verifying
modes. ``certificate_identity`` (``listeners.certificates``) reads the subject CN of a
verified client certificate; ``MqttConnection`` stores it for the authenticator
(``use_identity_as_username``).

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
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from broker_core.errors import ConfigError
from broker_core.listeners.binding import listening_sockets
from broker_core.listeners.certificates import certificate_identity
from broker_core.listeners.connection import MqttConnection, Server
from broker_core.listeners.connections import Connections
from broker_core.listeners.keys import load_key_pair
from broker_core.listeners.settings import ListenerSettings

__all__ = [
    "HANDSHAKE_TIMEOUT_S",
    "TlsListener",
    "TlsProtocol",
    "certificate_identity",
    "handshake_done",
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

_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read, or None."""
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def _load(
    certfile: Path,
    keyfile: Path,
    cafile: Path | None,
    min_version: Literal["1.2", "1.3"],
    ciphers: str | None,
    keyfile_password: str | None,
) -> tuple[ssl.SSLContext, list[tuple[str, str]]]:
    """A server context loaded with the files, and every problem on the way as
    ``(option, message)``: an unreadable file, a file that is not PEM, a key that does not
    match the certificate, needs a ``keyfile_password`` or another one (never asked for
    on the terminal: ``listeners.keys``), unusable ``ciphers``."""
    problems: list[tuple[str, str]] = []
    files = {"certfile": certfile, "keyfile": keyfile, "cafile": cafile}
    for option, path in files.items():
        reason = None if path is None else _unreadable(path)
        if reason is not None:
            problems.append((option, f"cannot read {str(path)!r}: {reason}"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _VERSIONS[min_version]
    context.options |= ssl.OP_NO_COMPRESSION
    if ciphers is not None:
        try:
            context.set_ciphers(ciphers)
        except ssl.SSLError:
            problems.append(("ciphers", f"no usable cipher in {ciphers!r}"))
    if not any(option in ("certfile", "keyfile") for option, _ in problems):
        problem = load_key_pair(context, certfile, keyfile, keyfile_password)
        if problem is not None:
            problems.append(problem)
    if cafile is not None and not any(option == "cafile" for option, _ in problems):
        try:
            context.load_verify_locations(cafile=cafile)
        except ssl.SSLError as exc:
            message = f"{str(cafile)!r} is not a PEM bundle of CA certificates: {exc}"
            problems.append(("cafile", message))
    return context, problems


def tls_problems(
    certfile: Path,
    keyfile: Path,
    *,
    cafile: Path | None = None,
    min_version: Literal["1.2", "1.3"] = "1.2",
    ciphers: str | None = None,
    keyfile_password: str | None = None,
) -> list[tuple[str, str]]:
    """Every reason ``server_ssl_context`` would refuse these settings, as ``(option,
    message)`` pairs (``option`` is ``certfile``, ``keyfile``, ``cafile`` or ``ciphers``);
    empty when it would build a context. Loads the files and keeps nothing."""
    return _load(certfile, keyfile, cafile, min_version, ciphers, keyfile_password)[1]


def server_ssl_context(
    certfile: Path,
    keyfile: Path,
    *,
    cafile: Path | None = None,
    verify_peer: bool = False,
    fail_if_no_peer_cert: bool = False,
    min_version: Literal["1.2", "1.3"] = "1.2",
    ciphers: str | None = None,
    keyfile_password: str | None = None,
    where: str = "tls",
) -> ssl.SSLContext:
    """A server-side ``SSLContext``; ``ConfigError`` names every file or option at fault.

    ``where`` prefixes the option names in error messages (e.g. ``listener 'tls:...' tls``).
    """
    context, problems = _load(certfile, keyfile, cafile, min_version, ciphers, keyfile_password)
    if verify_peer and cafile is None:
        problems.append(("verify_peer", "needs 'cafile' to verify client certificates"))
    if problems:
        lines = [f"{where}.{option}: {message}" for option, message in problems]
        raise ConfigError("\n".join(lines), lines)
    if verify_peer:
        context.verify_mode = ssl.CERT_REQUIRED if fail_if_no_peer_cert else ssl.CERT_OPTIONAL
    else:
        context.verify_mode = ssl.CERT_NONE
    return context


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
        context: ssl.SSLContext,
        sockets: list[socket.socket],
        loop: asyncio.AbstractEventLoop,
        protocol_factory: Callable[[], TlsProtocol] | None = None,
    ) -> None:
        """``protocol_factory``: each accepted socket's connection (default: an
        ``MqttConnection``)."""
        self.broker = broker
        self._protocol_factory = protocol_factory or (
            lambda: _TlsConnection(broker, settings, loop)
        )
        self.settings = settings
        self.context = context
        self.sockets = sockets
        self._loop = loop
        self._handshakes: set[asyncio.Task[object]] = set()
        self._closed = False
        for sock in sockets:
            self._serve(sock)

    def _serve(self, sock: socket.socket) -> None:
        if not self._closed:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _accept(self, listening: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                sock, _ = listening.accept()
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
            self._handshake(sock)

    def _handshake(self, sock: socket.socket) -> None:
        connection = self._protocol_factory()
        task: asyncio.Task[object] = self._loop.create_task(
            self._loop.connect_accepted_socket(
                lambda: connection,
                sock,
                ssl=self.context,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S,
            )
        )
        handshake = connection.handshake = _Handshake(task)  # type: ignore[misc]
        self._handshakes.add(task)
        task.add_done_callback(lambda done: self._handshake_done(done, connection))
        self.broker.connections.handshake_started(self.settings, handshake)

    def _handshake_done(self, task: asyncio.Task[object], connection: TlsProtocol) -> None:
        self._handshakes.discard(task)
        # Still pending as the handshake when it failed, timed out or was evicted.
        handshake_done(connection, self.broker.connections, self.settings)
        if not task.cancelled() and task.exception() is not None:
            log.debug("listener %s: TLS handshake failed: %s", self.settings.name, task.exception())

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


async def start_tls(
    broker: Server,
    host: str,
    port: int,
    settings: ListenerSettings,
    context: ssl.SSLContext,
    backlog: int = 1024,
) -> TlsListener:
    """Binds a TLS listener whose connections are ``MqttConnection``s, like tcp."""
    sockets = await listening_sockets(host, port, backlog)
    listener = TlsListener(broker, settings, context, sockets, asyncio.get_running_loop())
    for sock in sockets:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted ones inherit it
        log.info("listener %s (TLS) bound to %s", settings.name, sock.getsockname()[:2])
    return listener
