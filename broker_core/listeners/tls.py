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
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from pathlib import Path
from typing import Literal

from broker_core.errors import ConfigError
from broker_core.listeners.certificates import certificate_identity
from broker_core.listeners.connection import MqttConnection, Server
from broker_core.listeners.settings import ListenerSettings

__all__ = ["certificate_identity", "server_ssl_context", "start_tls"]

log = logging.getLogger(__name__)

#: Seconds a client has to complete the TLS handshake.
HANDSHAKE_TIMEOUT_S = 10.0

_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def _readable(path: Path, what: str) -> None:
    """Fails with a ``ConfigError`` naming ``what`` and ``path`` unless it can be read."""
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"{what} {str(path)!r}: cannot read it: {reason}") from exc


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
    """A server-side ``SSLContext``; ``ConfigError`` names the file or option at fault.

    ``where`` prefixes the option names in error messages (e.g. ``listener 'tls:...' tls``).
    """
    _readable(certfile, f"{where}.certfile")
    _readable(keyfile, f"{where}.keyfile")
    if cafile is not None:
        _readable(cafile, f"{where}.cafile")
    if verify_peer and cafile is None:
        raise ConfigError(f"{where}.verify_peer: needs 'cafile' to verify client certificates")

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _VERSIONS[min_version]
    context.options |= ssl.OP_NO_COMPRESSION
    if ciphers is not None:
        try:
            context.set_ciphers(ciphers)
        except ssl.SSLError as exc:
            raise ConfigError(f"{where}.ciphers: no usable cipher in {ciphers!r}") from exc
    try:
        context.load_cert_chain(
            certfile, keyfile, password=keyfile_password.encode() if keyfile_password else None
        )
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(
            f"{where}.certfile {str(certfile)!r} / {where}.keyfile {str(keyfile)!r}: cannot"
            f" load the certificate and key (not PEM, not a pair, or a wrong or missing"
            f" keyfile_password): {exc}"
        ) from exc
    if cafile is not None:
        try:
            context.load_verify_locations(cafile=cafile)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"{where}.cafile {str(cafile)!r}: not a PEM bundle of CA certificates: {exc}"
            ) from exc
    if verify_peer:
        context.verify_mode = ssl.CERT_REQUIRED if fail_if_no_peer_cert else ssl.CERT_OPTIONAL
    else:
        context.verify_mode = ssl.CERT_NONE
    return context


async def start_tls(
    broker: Server,
    host: str,
    port: int,
    settings: ListenerSettings,
    context: ssl.SSLContext,
    backlog: int = 1024,
) -> asyncio.Server:
    """Binds a TLS listener whose connections are ``MqttConnection``s, like tcp."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: MqttConnection(broker, settings),
        host,
        port,
        backlog=backlog,
        reuse_address=True,
        ssl=context,
        ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S,
    )
    for sock in server.sockets:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        log.info("listener %s (TLS) bound to %s", settings.name, sock.getsockname()[:2])
    return server
