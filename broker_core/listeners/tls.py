"""TLS listener: the TCP listener's ``MqttConnection`` behind an ``ssl.SSLContext``.

``server_ssl_context`` builds the context from plain arguments (the gateway passes the
``tls:`` section of a listener): TLS 1.2 or 1.3 at least, the server certificate and key,
and for mutual TLS the CA bundle client certificates are verified against:

    verify_peer  fail_if_no_peer_cert  verify_mode     a client without a certificate
    false        -                     CERT_NONE       is not asked for one
    true         false                 CERT_OPTIONAL   falls back to username/password
    true         true                  CERT_REQUIRED   fails the handshake

A certificate that does not chain to ``cafile`` fails the handshake in both verifying
modes, and so does one revoked by the CRL of ``crlfile`` (``VERIFY_CRL_CHECK_LEAF``: the
client certificate is checked, its issuer must have a CRL in the file). The CRL is read
again when the file changes (its modification time, looked at with each handshake): a
revocation takes effect for the next handshake, without a restart; connections up stay.
``certificate_identity`` (``listeners.certificates``) reads the subject CN of a
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
import contextlib
import contextvars
import errno
import logging
import os
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from broker_core.errors import ConfigError
from broker_core.listeners.binding import listening_sockets
from broker_core.listeners.certificates import certificate_identity
from broker_core.listeners.connection import MqttConnection, Server
from broker_core.listeners.connections import Connections
from broker_core.listeners.keys import load_key_pair
from broker_core.listeners.settings import ListenerSettings
from broker_core.lograte import RateLimitedLog

__all__ = [
    "HANDSHAKE_TIMEOUT_S",
    "CrlWatch",
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

_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}

#: The accepted socket a handshake task is for, in that task's context: where
#: ``_AlertingSSLObject`` writes the alert of a failed handshake.
_accepted: contextvars.ContextVar[socket.socket | None] = contextvars.ContextVar(
    "edgebus_tls_accepted", default=None
)

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


class _AlertingSSLObject(ssl.SSLObject):
    """The server side of one connection; after a failed ``do_handshake`` it writes the
    alert OpenSSL put in the outgoing BIO to the accepted socket (``_accepted``), which
    the loop's SSL protocol closes without writing it. Only ``do_handshake`` differs."""

    _edgebus_outgoing: ssl.MemoryBIO | None = None
    _edgebus_socket: socket.socket | None = None

    def do_handshake(self) -> None:
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError:
            self._send_alert()
            raise

    def _send_alert(self) -> None:
        outgoing, sock = self._edgebus_outgoing, self._edgebus_socket
        if outgoing is None or sock is None:
            return
        alert = outgoing.read()
        if not alert:
            return
        # A few bytes into the socket's buffer, before the loop closes it: its transport
        # wrote the earlier flights (what it still held, it drops with the close). The
        # socket object is the transport's own (asyncio closes it, uvloop detaches it),
        # so holding it never closes a descriptor twice.
        with contextlib.suppress(OSError):
            sock.send(alert)


class _ServerContext(ssl.SSLContext):
    """A server context whose ``SSLObject``s send the alert of a failed handshake."""

    sslobject_class = _AlertingSSLObject
    crlfile: Path | None = None  # the CRLs loaded (server_ssl_context), read again by CrlWatch

    def wrap_bio(
        self, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, *args: Any, **kwargs: Any
    ) -> ssl.SSLObject:
        sslobj = super().wrap_bio(incoming, outgoing, *args, **kwargs)
        if isinstance(sslobj, _AlertingSSLObject):
            sslobj._edgebus_outgoing = outgoing
            sslobj._edgebus_socket = _accepted.get()
        return sslobj


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
    crlfile: Path | None = None,
) -> tuple[_ServerContext, list[tuple[str, str]]]:
    """A server context loaded with the files, and every problem on the way as
    ``(option, message)``: an unreadable file, a file that is not PEM, a key that does not
    match the certificate, needs a ``keyfile_password`` or another one (never asked for
    on the terminal: ``listeners.keys``), unusable ``ciphers``, a ``crlfile`` holding no
    CRL."""
    problems: list[tuple[str, str]] = []
    files = {"certfile": certfile, "keyfile": keyfile, "cafile": cafile, "crlfile": crlfile}
    for option, path in files.items():
        reason = None if path is None else _unreadable(path)
        if reason is not None:
            problems.append((option, f"cannot read {str(path)!r}: {reason}"))
    context = _ServerContext(ssl.PROTOCOL_TLS_SERVER)
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
    if crlfile is not None and not any(option == "crlfile" for option, _ in problems):
        crl_problem = load_crl(context, crlfile)
        if crl_problem is not None:
            problems.append(("crlfile", crl_problem))
    return context, problems


def load_crl(context: ssl.SSLContext, crlfile: Path) -> str | None:
    """Adds the CRLs of the PEM file ``crlfile`` to ``context`` and checks client
    certificates against them (``VERIFY_CRL_CHECK_LEAF``); what is wrong with the file,
    or None. A CRL newer than one loaded before for the same CA replaces it (OpenSSL
    uses the latest ``lastUpdate``)."""
    try:
        with open(crlfile, "rb") as file:
            data = file.read()
    except OSError as exc:
        return f"cannot read {str(crlfile)!r}: {exc.strerror or type(exc).__name__}"
    if b"-----BEGIN X509 CRL-----" not in data:
        return f"{str(crlfile)!r} holds no PEM certificate revocation list (X509 CRL)"
    try:
        context.load_verify_locations(cafile=crlfile)
    except ssl.SSLError as exc:
        return f"{str(crlfile)!r} is not a PEM certificate revocation list: {exc}"
    context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    return None


def tls_problems(
    certfile: Path,
    keyfile: Path,
    *,
    cafile: Path | None = None,
    min_version: Literal["1.2", "1.3"] = "1.2",
    ciphers: str | None = None,
    keyfile_password: str | None = None,
    crlfile: Path | None = None,
) -> list[tuple[str, str]]:
    """Every reason ``server_ssl_context`` would refuse these settings, as ``(option,
    message)`` pairs (``option`` is ``certfile``, ``keyfile``, ``cafile``, ``crlfile`` or
    ``ciphers``); empty when it would build a context. Loads the files and keeps nothing."""
    return _load(certfile, keyfile, cafile, min_version, ciphers, keyfile_password, crlfile)[1]


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
    crlfile: Path | None = None,
    where: str = "tls",
) -> ssl.SSLContext:
    """A server-side ``SSLContext``; ``ConfigError`` names every file or option at fault.

    ``where`` prefixes the option names in error messages (e.g. ``listener 'tls:...' tls``).
    ``crlfile``: PEM CRLs client certificates are checked against (with ``verify_peer``);
    the listener reads it again when it changes (``CrlWatch``).
    """
    context, problems = _load(
        certfile, keyfile, cafile, min_version, ciphers, keyfile_password, crlfile
    )
    if verify_peer and cafile is None:
        problems.append(("verify_peer", "needs 'cafile' to verify client certificates"))
    if crlfile is not None and not verify_peer:
        problems.append(("crlfile", "only works with 'verify_peer: true'"))
    if problems:
        lines = [f"{where}.{option}: {message}" for option, message in problems]
        raise ConfigError("\n".join(lines), lines)
    if verify_peer:
        context.verify_mode = ssl.CERT_REQUIRED if fail_if_no_peer_cert else ssl.CERT_OPTIONAL
    else:
        context.verify_mode = ssl.CERT_NONE
    context.crlfile = crlfile
    return context


def _mtime(path: Path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


class CrlWatch:
    """Reads a listener's ``crlfile`` again when its modification time changes, looked
    at before each handshake (a ``stat``): a CRL replaced on disk revokes from the next
    handshake on. A file that cannot be loaded then is logged at ERROR and the CRLs
    loaded before stay."""

    __slots__ = ("_listener", "_mtime", "context", "path")

    def __init__(self, context: ssl.SSLContext, path: Path, listener: str) -> None:
        self.context = context
        self.path = path
        self._listener = listener
        self._mtime = _mtime(path)

    def check(self) -> None:
        mtime = _mtime(self.path)
        if mtime == self._mtime:
            return
        self._mtime = mtime
        problem = load_crl(self.context, self.path)
        if problem is None:
            log.info("listener %s: CRL %s read again", self._listener, self.path)
        else:
            log.error(
                "listener %s: crlfile: %s; the CRLs read before stay", self._listener, problem
            )


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
        crlfile = getattr(context, "crlfile", None)
        self._crl = None if crlfile is None else CrlWatch(context, crlfile, settings.name)
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
        if self._crl is not None:
            self._crl.check()
        connection = self._protocol_factory()
        # The task's context names the socket to the SSLObject (_AlertingSSLObject).
        context = contextvars.copy_context()
        context.run(_accepted.set, sock)
        task: asyncio.Task[object] = self._loop.create_task(
            self._loop.connect_accepted_socket(
                lambda: connection,
                sock,
                ssl=self.context,
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
