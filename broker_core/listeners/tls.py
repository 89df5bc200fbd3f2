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

__all__ = ["certificate_identity", "server_ssl_context", "start_tls", "tls_problems"]

log = logging.getLogger(__name__)

#: Seconds a client has to complete the TLS handshake.
HANDSHAKE_TIMEOUT_S = 10.0

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
    match the certificate or needs another ``keyfile_password``, unusable ``ciphers``."""
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
        try:
            context.load_cert_chain(
                certfile, keyfile, password=keyfile_password.encode() if keyfile_password else None
            )
        except (ssl.SSLError, ValueError) as exc:
            problems.append(
                (
                    "certfile",
                    f"cannot load {str(certfile)!r} with keyfile {str(keyfile)!r} (not PEM,"
                    f" not a pair, or a wrong or missing keyfile_password): {exc}",
                )
            )
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
        lambda: MqttConnection(broker, settings, loop),
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
