"""The server ``SSLContext`` of a TLS listener, built from its files and rebuilt when they
change.

``server_ssl_context`` builds the context from plain arguments (the gateway passes the
``tls:`` section of a listener): TLS 1.2 or 1.3 at least, the server certificate and key,
and for mutual TLS the CA bundle client certificates are verified against:

    verify_peer  fail_if_no_peer_cert  verify_mode     a client without a certificate
    false        -                     CERT_NONE       is not asked for one
    true         false                 CERT_OPTIONAL   falls back to username/password
    true         true                  CERT_REQUIRED   fails the handshake

A certificate that does not chain to ``cafile`` fails the handshake in both verifying
modes, and so does one revoked by the CRL of ``crlfile`` (``VERIFY_CRL_CHECK_LEAF``: the
client certificate is checked, its issuer must have a CRL in the file).

``ServerTls`` holds the context a listener's new handshakes use. It builds a fresh one
from the same files and options (``TlsFiles``) when the CRL file changes (its
modification time, looked at with each handshake) and when the gateway reloads
(``reload``: SIGHUP, ``POST /reload``) and a file's content changed: a renewed server
certificate, a new CA bundle, a CRL that lists more or fewer certificates, or an older
one, all take effect from the next handshake, without a restart. Adding a CRL to the
running context instead (``load_verify_locations``) grew its store with each change and
kept every CRL loaded before: OpenSSL went on using the one with the latest
``lastUpdate``, so a certificate taken off the CRL stayed refused until a restart.
Connections already up keep the context of their handshake. A file that cannot be
loaded keeps the context in use and is logged at ERROR, naming the file.

The context's ``SSLObject``s (``_AlertingSSLObject``) write the alert of a failed
handshake to the accepted socket the listener names in ``accepted_socket``
(``listeners.tls``).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import os
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from broker_core.errors import ConfigError
from broker_core.listeners.keys import load_key_pair

__all__ = [
    "ServerTls",
    "TlsFiles",
    "accepted_socket",
    "load_crl",
    "server_ssl_context",
    "tls_problems",
]

# The TLS listener's log: one logger name for what a listener's TLS says.
log = logging.getLogger("broker_core.listeners.tls")

_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}

#: The accepted socket a handshake task is for, in that task's context: where
#: ``_AlertingSSLObject`` writes the alert of a failed handshake.
accepted_socket: contextvars.ContextVar[socket.socket | None] = contextvars.ContextVar(
    "edgebus_tls_accepted", default=None
)


class _AlertingSSLObject(ssl.SSLObject):
    """The server side of one connection; after a failed ``do_handshake`` it writes the
    alert OpenSSL put in the outgoing BIO to the accepted socket (``accepted_socket``),
    which the loop's SSL protocol closes without writing it. Only ``do_handshake``
    differs."""

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


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """What a listener's server context is built from: ``server_ssl_context``'s
    arguments."""

    certfile: Path
    keyfile: Path
    cafile: Path | None = None
    verify_peer: bool = False
    fail_if_no_peer_cert: bool = False
    min_version: Literal["1.2", "1.3"] = "1.2"
    ciphers: str | None = None
    keyfile_password: str | None = field(default=None, repr=False)
    crlfile: Path | None = None

    def digest(self) -> bytes:
        """A digest of the files' contents (an unreadable file counts as empty): equal
        digests, the same context."""
        sha = hashlib.sha256()
        for path in (self.certfile, self.keyfile, self.cafile, self.crlfile):
            data = b""
            if path is not None:
                with contextlib.suppress(OSError), open(path, "rb") as file:
                    data = file.read()
            sha.update(len(data).to_bytes(8, "big") + data)
        return sha.digest()


class _ServerContext(ssl.SSLContext):
    """A server context whose ``SSLObject``s send the alert of a failed handshake."""

    sslobject_class = _AlertingSSLObject
    files: TlsFiles | None = None  # what it was built from (server_ssl_context)

    def wrap_bio(
        self, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, *args: Any, **kwargs: Any
    ) -> ssl.SSLObject:
        sslobj = super().wrap_bio(incoming, outgoing, *args, **kwargs)
        if isinstance(sslobj, _AlertingSSLObject):
            sslobj._edgebus_outgoing = outgoing
            sslobj._edgebus_socket = accepted_socket.get()
        return sslobj


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read, or None."""
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def _load(files: TlsFiles) -> tuple[_ServerContext, list[tuple[str, str]]]:
    """A server context loaded with the files, and every problem on the way as
    ``(option, message)``: an unreadable file, a file that is not PEM, a key that does not
    match the certificate, needs a ``keyfile_password`` or another one (never asked for
    on the terminal: ``listeners.keys``), unusable ``ciphers``, a ``crlfile`` holding no
    CRL."""
    problems: list[tuple[str, str]] = []
    certfile, keyfile, cafile, crlfile = files.certfile, files.keyfile, files.cafile, files.crlfile
    paths = {"certfile": certfile, "keyfile": keyfile, "cafile": cafile, "crlfile": crlfile}
    for option, path in paths.items():
        reason = None if path is None else _unreadable(path)
        if reason is not None:
            problems.append((option, f"cannot read {str(path)!r}: {reason}"))
    context = _ServerContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _VERSIONS[files.min_version]
    context.options |= ssl.OP_NO_COMPRESSION
    if files.ciphers is not None:
        try:
            context.set_ciphers(files.ciphers)
        except ssl.SSLError:
            problems.append(("ciphers", f"no usable cipher in {files.ciphers!r}"))
    if not any(option in ("certfile", "keyfile") for option, _ in problems):
        problem = load_key_pair(context, certfile, keyfile, files.keyfile_password)
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
    if files.verify_peer:
        context.verify_mode = ssl.CERT_REQUIRED if files.fail_if_no_peer_cert else ssl.CERT_OPTIONAL
    else:
        context.verify_mode = ssl.CERT_NONE
    context.files = files
    return context, problems


def load_crl(context: ssl.SSLContext, crlfile: Path) -> str | None:
    """Adds the CRLs of the PEM file ``crlfile`` to ``context`` and checks client
    certificates against them (``VERIFY_CRL_CHECK_LEAF``); what is wrong with the file,
    or None. Meant for a fresh context: a context keeps every CRL added to it, and
    OpenSSL uses the latest ``lastUpdate`` of a CA's (``ServerTls`` builds a new context
    when the file changes)."""
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
    """Every reason the files and ``ciphers`` would not build a context, as ``(option,
    message)`` pairs (``option`` is ``certfile``, ``keyfile``, ``cafile``, ``crlfile`` or
    ``ciphers``); empty when they would. Loads the files and keeps nothing."""
    files = TlsFiles(
        certfile,
        keyfile,
        cafile=cafile,
        min_version=min_version,
        ciphers=ciphers,
        keyfile_password=keyfile_password,
        crlfile=crlfile,
    )
    return _load(files)[1]


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
    ``crlfile``: PEM CRLs client certificates are checked against (with ``verify_peer``).
    The context remembers what it was built from (``TlsFiles``), so a ``ServerTls`` can
    build it again.
    """
    files = TlsFiles(
        certfile,
        keyfile,
        cafile=cafile,
        verify_peer=verify_peer,
        fail_if_no_peer_cert=fail_if_no_peer_cert,
        min_version=min_version,
        ciphers=ciphers,
        keyfile_password=keyfile_password,
        crlfile=crlfile,
    )
    context, problems = _load(files)
    if verify_peer and cafile is None:
        problems.append(("verify_peer", "needs 'cafile' to verify client certificates"))
    if crlfile is not None and not verify_peer:
        problems.append(("crlfile", "only works with 'verify_peer: true'"))
    if problems:
        lines = [f"{where}.{option}: {message}" for option, message in problems]
        raise ConfigError("\n".join(lines), lines)
    return context


def _mtime(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


class ServerTls:
    """The context a TLS listener's new handshakes use (``for_handshake``), built again
    from its files (``TlsFiles``) when the CRL file's modification time changes (a
    ``stat`` with each handshake) or on ``reload``. A context that cannot be built is
    logged at ERROR with each file or option at fault, and the one in use stays; a
    context made elsewhere (no ``files``) is used as it is."""

    __slots__ = ("_crl_mtime", "_digest", "context", "files", "name")

    def __init__(self, context: ssl.SSLContext, name: str) -> None:
        self.context = context
        self.name = name
        files = getattr(context, "files", None)
        self.files: TlsFiles | None = files if isinstance(files, TlsFiles) else None
        self._crl_mtime = None if self.files is None else _mtime(self.files.crlfile)
        self._digest = None if self.files is None else self.files.digest()

    def for_handshake(self) -> ssl.SSLContext:
        """The context for the next handshake: a new one when the CRL file changed."""
        files = self.files
        if files is not None and files.crlfile is not None:
            mtime = _mtime(files.crlfile)
            if mtime != self._crl_mtime:
                self._crl_mtime = mtime
                if self._rebuild(files):
                    log.info("listener %s: CRL %s read again", self.name, files.crlfile)
        return self.context

    def reload(self) -> bool:
        """Builds the context again when a file's content changed since it was built
        (SIGHUP, ``POST /reload``); True when new handshakes use a new one."""
        files = self.files
        if files is None or files.digest() == self._digest:
            return False
        self._crl_mtime = _mtime(files.crlfile)
        if not self._rebuild(files):
            return False
        log.info(
            "listener %s: TLS files read again (%s); new handshakes use them",
            self.name,
            ", ".join(str(path) for path in _paths(files)),
        )
        return True

    def _rebuild(self, files: TlsFiles) -> bool:
        digest = files.digest()  # before the load: a file changing meanwhile reloads again
        context, problems = _load(files)
        if problems:
            for option, message in problems:
                log.error(
                    "listener %s: tls.%s: %s; the TLS files read before stay in use",
                    self.name,
                    option,
                    message,
                )
            return False
        self.context = context
        self._digest = digest
        return True


def _paths(files: TlsFiles) -> list[Path]:
    return [p for p in (files.certfile, files.keyfile, files.cafile, files.crlfile) if p]
