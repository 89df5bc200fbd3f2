"""One connection to the remote broker, on the gateway's event loop: ``open_link``.

The bridge speaks MQTT with the project's own codec (``broker_core.mqtt``): packets are
decoded by a ``Decoder`` given the protocol level up front and encoded by ``encode``,
and the bytes go through an ``asyncio.Protocol`` (TCP, or TLS with a client
certificate, SNI and ALPN), so the bridge has no thread and no buffer of its own: what
waits to be sent waits in the disk queue. (paho-mqtt was measured in the role: a few
thousand QoS 1 messages per second at about 100 µs of CPU each, several times short of
mosquitto's own bridge; docs/bridges.md, "The client".) Runs of plain PUBACKs, what a
remote acknowledging a stream sends, are read straight from the bytes (``on_pubacks``).

``open_link`` connects, sends CONNECT (MQTT 3.1.1 or 5, with the MQTT 5 CONNECT
properties), and returns once the CONNACK accepted it; ``BridgeError`` names why not
(with a hint when TLS meets a plain port or plain TCP a TLS port). What came after the
CONNACK (a resumed session's queued messages, often in its segment) is held, reading
paused, until ``start()``: then it and every packet received go to ``on_packet``;
``lost`` completes with the reason the connection ended. ``probe(now)`` keeps the link
alive and finds a dead one: a PINGREQ when nothing was sent or received for half the
keep alive, and the link is given up when that PINGREQ (or anything else) is not
answered within the keep alive.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import sys
import time
from array import array
from collections.abc import Callable
from typing import Any, cast

from broker_core.errors import BridgeError, ProtocolError
from broker_core.listeners.keys import load_key_pair
from broker_core.listeners.tls_context import load_crl
from broker_core.mqtt.codec import MAX_PACKET_SIZE, Decoder
from broker_core.mqtt.encoder import encode
from broker_core.mqtt.packets import (
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
)
from broker_core.mqtt.properties import EMPTY, Properties
from broker_core.mqtt.reason_codes import ReasonCode
from gateway.config.models.bridges import BridgeConfig, BridgeTlsConfig

__all__ = [
    "ANSWERED_IN_TLS",
    "LEVELS",
    "Link",
    "certificate_names",
    "certificate_refused",
    "open_link",
    "reason_name",
    "tls_context",
]

log = logging.getLogger(__name__)

#: ``protocol_version`` -> MQTT protocol level.
LEVELS = {"3.1.1": 4, "5": 5}

_WRITE_HIGH_WATER = 1024 * 1024
_LITTLE_ENDIAN = sys.byteorder == "little"

# MQTT 3.1.1 CONNACK return codes (3.2.2.3).
_V3_CONNACK = {
    1: "unacceptable protocol version",
    2: "identifier rejected",
    3: "server unavailable",
    4: "bad user name or password",
    5: "not authorized",
}


def reason_name(code: int) -> str:
    """``0x87 not authorized``: a reason code for people."""
    try:
        name = ReasonCode(code).name.lower().replace("_", " ")
    except ValueError:
        name = "unknown reason"
    return f"0x{code:02X} {name}"


def tls_context(config: BridgeConfig) -> ssl.SSLContext | None:
    """The client TLS context of a bridge, or None for plain TCP; ``BridgeError`` when
    a file cannot be used."""
    if not config.uses_tls():
        return None
    tls = config.tls or BridgeTlsConfig()
    try:
        context = ssl.create_default_context(cafile=None if tls.cafile is None else str(tls.cafile))
    except (OSError, ssl.SSLError) as exc:
        raise BridgeError(f"bridge {config.name}: TLS files: {exc}") from exc
    if tls.certfile is not None:  # never prompts for the pass phrase of an encrypted key
        problem = load_key_pair(context, tls.certfile, tls.keyfile, tls.key_password())
        if problem is not None:
            option, message = problem
            raise BridgeError(f"bridge {config.name}: TLS files: tls.{option}: {message}")
    if tls.crlfile is not None and tls.verify:  # read with each connection: a new CRL counts
        crl_problem = load_crl(context, tls.crlfile)
        if crl_problem is not None:
            raise BridgeError(f"bridge {config.name}: TLS files: tls.crlfile: {crl_problem}")
    if not tls.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    alpn = config.alpn()
    if alpn:
        context.set_alpn_protocols(list(alpn))
    return context


# OpenSSL's X509_V_ERR_* codes that get a hint of what to check.
_NAME_MISMATCH = {62, 64}  # HOSTNAME_MISMATCH, IP_ADDRESS_MISMATCH
_DATES = {9, 10}  # CERT_NOT_YET_VALID, CERT_HAS_EXPIRED
# UNABLE_TO_GET_ISSUER_CERT, DEPTH_ZERO_SELF_SIGNED_CERT, SELF_SIGNED_CERT_IN_CHAIN,
# UNABLE_TO_GET_ISSUER_CERT_LOCALLY, UNABLE_TO_VERIFY_LEAF_SIGNATURE
_UNTRUSTED = {2, 18, 19, 20, 21}
# UNABLE_TO_GET_CRL, CRL_NOT_YET_VALID, CRL_HAS_EXPIRED, CERT_REVOKED: with tls.crlfile
_CRL = {3, 11, 12, 23}


def certificate_refused(
    exc: ssl.SSLCertVerificationError, config: BridgeConfig, names: list[str] | None = None
) -> str:
    """Why the remote's certificate was refused, as OpenSSL's verification says it
    (``verify_message``: "Hostname mismatch, certificate is not valid for 'x'.",
    "certificate has expired", "unable to get local issuer certificate"), with what to
    check; not the bare ``CERTIFICATE_VERIFY_FAILED`` of ``exc.reason``. ``names``: the
    names the certificate is for, when known (``certificate_names``)."""
    message = (exc.verify_message or exc.reason or str(exc)).rstrip(".")
    code = exc.verify_code
    text = f"certificate verify failed: {message} (OpenSSL verify code {code})"
    tls = config.tls or BridgeTlsConfig()
    if code in _NAME_MISMATCH:
        where = "tls.server_name" if tls.server_name else "the host of `server`"
        if names:
            text = f"{text}; the certificate is for {', '.join(names)}"
        return f"{text}; the name verified is {where}"
    if code in _DATES:
        return f"{text}; check the certificate's dates and this machine's clock"
    if code in _UNTRUSTED:
        trusted = "the system's CAs" if tls.cafile is None else f"tls.cafile '{tls.cafile}'"
        return f"{text}; its issuer is not among the CAs trusted: {trusted}"
    if code in _CRL and tls.crlfile is not None:
        if code == 23:
            return f"{text}; tls.crlfile '{tls.crlfile}' lists it"
        if code == 3:
            return f"{text}; tls.crlfile '{tls.crlfile}' has no CRL of its issuer"
        return f"{text}; check tls.crlfile '{tls.crlfile}' (its dates) and this machine's clock"
    return text


async def certificate_names(
    config: BridgeConfig, host: str, port: int, server_name: str | None
) -> list[str] | None:
    """The names the remote's certificate is for (``DNS:other.example``, ``IP:10.0.0.1``;
    its subject's CN when it has no subjectAltName), read in a second handshake that
    verifies the certificate as the bridge does but for its name; None when that fails
    too (the certificate is not trusted either, or the remote is gone). Only after a
    name mismatch: OpenSSL says which name did not match, not which ones would."""
    context = tls_context(config)
    if context is None:
        return None
    context.check_hostname = False
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(config.connect_timeout):
            transport, _ = await loop.create_connection(
                asyncio.Protocol,
                host,
                port,
                ssl=context,
                server_hostname=server_name,
                ssl_handshake_timeout=config.connect_timeout,
            )
    except (TimeoutError, OSError, BridgeError):  # ssl.SSLError is an OSError
        return None
    try:
        cert = transport.get_extra_info("peercert") or {}
    finally:
        transport.abort()
    kinds = {"IP Address": "IP"}
    names = [f"{kinds.get(kind, kind)}:{value}" for kind, value in cert.get("subjectAltName", ())]
    if not names:
        names = [
            f"CN={value}"
            for rdn in cert.get("subject", ())
            for key, value in rdn
            if key == "commonName"
        ]
    return names or None


class Link(asyncio.Protocol):
    """One MQTT connection to the remote broker; see the module docstring."""

    def __init__(
        self, level: int, on_packet: Callable[[Packet], None], max_packet: int | None
    ) -> None:
        self.level = level
        self.on_packet = on_packet
        self.on_writable: Callable[[], None] | None = None
        #: Runs of plain PUBACKs (success, no properties), as their Packet Identifiers:
        #: read straight from the bytes, no packet objects (see ``_pubacks``).
        self.on_pubacks: Callable[[list[int]], None] | None = None
        self.decoder = Decoder(max_packet or MAX_PACKET_SIZE, protocol_level=level)
        self.transport: asyncio.Transport | None = None
        self.writable = False
        loop = asyncio.get_running_loop()
        self.connack: asyncio.Future[Connack] = loop.create_future()
        self.lost: asyncio.Future[str] = loop.create_future()
        self.last_received = self.last_sent = time.monotonic()
        self.ping_sent: float | None = None
        self.reason: str | None = None  # why we closed it
        #: False until ``start``: packets after the CONNACK are held (``held``).
        self.started = False
        self.held: list[Packet] = []

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self.transport = transport
        transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        self.writable = True

    def data_received(self, data: bytes) -> None:
        self.last_received = time.monotonic()
        self.ping_sent = None
        if data[:2] == b"\x40\x02" and self.on_pubacks is not None and not self.decoder.buffered:
            data = self._pubacks(data)
            if not data:
                return
        try:
            packets = self.decoder.feed(data)
        except ProtocolError as exc:
            if not self.connack.done() and _looks_like_tls(data):
                self.close(ANSWERED_IN_TLS, ReasonCode.PROTOCOL_ERROR)
                return
            self.close(f"malformed packet from the remote: {exc}", exc.reason_code)
            return
        if self.started:
            self._dispatch(packets)
            return
        if not packets and not self.connack.done() and _looks_like_tls(data):
            self.close(ANSWERED_IN_TLS, ReasonCode.PROTOCOL_ERROR)
            return
        for index, packet in enumerate(packets):
            if type(packet) is not Connack:
                if not self.connack.done():  # [MQTT-3.2.0-1]
                    if type(packet) is Disconnect:
                        self._dispatch([packet])  # closes, with the remote's reason
                        return
                    name = type(packet).__name__.upper()
                    self.close(
                        f"protocol violation: the remote sent {name} before CONNACK",
                        ReasonCode.PROTOCOL_ERROR,
                    )
                    return
                # What follows the CONNACK (the session's queued messages, often in the
                # same segment) waits for ``start``: the bridge is not attached yet.
                self.held.extend(packets[index:])
                if self.transport is not None:
                    self.transport.pause_reading()
                return
            if not self.connack.done():
                self.connack.set_result(packet)

    def start(self) -> None:
        """The bridge is attached: what the remote sent after the CONNACK goes to
        ``on_packet`` now, and from now on as it arrives."""
        if self.started:
            return
        self.started = True
        held, self.held = self.held, []
        if self.transport is None:
            return
        self._dispatch(held)
        if self.transport is not None:
            self.transport.resume_reading()

    def _dispatch(self, packets: list[Packet]) -> None:
        for packet in packets:
            if self.transport is None:
                return
            kind = type(packet)
            if kind is Pingresp:
                continue
            if kind is Connack:
                if not self.connack.done():
                    self.connack.set_result(packet)  # type: ignore[arg-type]
                continue
            if kind is Disconnect:
                code = packet.reason_code  # type: ignore[union-attr]
                text = packet.properties.reason_string  # type: ignore[union-attr]
                self.close(
                    f"the remote disconnected: {reason_name(code)}" + (f" ({text})" if text else "")
                )
                return
            try:
                self.on_packet(packet)
            except ProtocolError as exc:
                self.close(str(exc), exc.reason_code)
                return
            except Exception as exc:  # a bug of ours: this link ends, with the cause logged
                log.error("handling %s from the remote failed", kind.__name__, exc_info=True)
                self.close(
                    f"internal error handling {kind.__name__.upper()} from the remote:"
                    f" {type(exc).__name__}: {exc}",
                    ReasonCode.UNSPECIFIED_ERROR,
                )
                return

    def _pubacks(self, data: bytes) -> bytes:
        """Hands the run of plain PUBACKs that ``data`` starts with to ``on_pubacks``
        (4 bytes each: 0x40, remaining length 2, the Packet Identifier); returns the
        rest, for the decoder. A remote acknowledging a stream sends little else."""
        n = len(data)
        count = n // 4
        if n % 4 == 0 and data[0::4] == b"\x40" * count and data[1::4] == b"\x02" * count:
            words = array("H", data)  # [fixed header, Packet Identifier] per PUBACK
            if _LITTLE_ENDIAN:
                words.byteswap()
            ids = words[1::2].tolist()
            if 0 not in ids:  # Packet Identifier 0 is malformed: the decoder says so
                self.on_pubacks(ids)  # type: ignore[misc]
                return b""
        pos = 0
        ids = []
        while pos + 4 <= n and data[pos] == 0x40 and data[pos + 1] == 2:
            mid = data[pos + 2] << 8 | data[pos + 3]
            if not mid:
                break
            ids.append(mid)
            pos += 4
        if ids:
            self.on_pubacks(ids)  # type: ignore[misc]
        return data[pos:]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.writable = False
        if not self.connack.done():
            reason = self.reason or (
                f"closed before CONNACK: {_cause(exc)}"
                if exc
                else "closed by the remote before CONNACK"
            )
            self.connack.set_exception(BridgeError(reason))
        else:
            reason = self.reason or (
                f"connection lost: {_cause(exc)}" if exc else "the remote closed the connection"
            )
        if not self.lost.done():
            self.lost.set_result(reason)

    def pause_writing(self) -> None:
        self.writable = False

    def resume_writing(self) -> None:
        self.writable = self.transport is not None
        if self.writable and self.on_writable is not None:
            self.on_writable()

    # -- sending -----------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        transport = self.transport
        if transport is not None:
            transport.write(data)
            self.last_sent = time.monotonic()

    def send(self, packet: Packet) -> None:
        self.write(encode(packet, self.level))

    @property
    def alive(self) -> bool:
        return self.transport is not None

    def close(self, reason: str, code: int = ReasonCode.NORMAL_DISCONNECTION) -> None:
        """Ends the connection (with a DISCONNECT carrying ``code`` on MQTT 5)."""
        transport = self.transport
        if transport is None:
            return
        self.reason = self.reason or reason
        if (
            self.connack.done()
            and not self.connack.cancelled()
            and self.connack.exception() is None
        ):
            self.send(Disconnect(code if self.level == 5 else 0))
        transport.close()

    def abort(self, reason: str) -> None:
        """Drops a dead connection at once (nothing more is written)."""
        if self.transport is not None:
            self.reason = self.reason or reason
            self.transport.abort()

    def probe(self, now: float, keepalive: float) -> None:
        """Keep alive: ping a quiet link, drop one that does not answer."""
        if self.ping_sent is not None:
            if now - self.ping_sent >= keepalive:
                self.abort(f"no answer from the remote for {keepalive:g}s (keep alive)")
            return
        if now - self.last_received >= keepalive / 2 or now - self.last_sent >= keepalive / 2:
            self.ping_sent = now
            self.send(Pingreq())


def _cause(exc: BaseException | None) -> str:
    """What an exception says, for people: ``Connection reset by peer``, never empty."""
    if exc is None:
        return "no error"
    if isinstance(exc, OSError) and exc.strerror and not isinstance(exc, ssl.SSLError):
        return exc.strerror
    return str(exc) or type(exc).__name__


#: Why a link was closed whose first bytes from the remote were a TLS record.
ANSWERED_IN_TLS = "the remote answered with TLS, not MQTT"


def _looks_like_tls(data: bytes) -> bool:
    """A TLS record's header: content type 21 (alert) or 22 (handshake), version 3.x.
    As MQTT, 0x15 / 0x16 is a CONNECT with reserved flags set: never from a server."""
    return len(data) >= 3 and data[0] in (0x15, 0x16) and data[1] == 3


#: Errors that mean the peer reset or closed the connection under the TLS handshake.
_CLOSED_IN_HANDSHAKE = (
    ConnectionResetError,
    BrokenPipeError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


def _plain_port_hint(host: str, port: int) -> str:
    return f"is {host}:{port} a plain MQTT port? the bridge has tls enabled"


def _tls_port_hint(host: str, port: int) -> str:
    return f"is {host}:{port} a TLS port? tls is not enabled for this bridge"


def _connect_packet(config: BridgeConfig, client_id: str, level: int, clean_start: bool) -> Connect:
    properties = EMPTY
    if level == 5:
        cp = config.connect_properties
        values: dict[str, Any] = {
            "session_expiry_interval": int(cp.session_expiry_interval) or None,
            "receive_maximum": cp.receive_maximum,
            "maximum_packet_size": cp.maximum_packet_size,
            "topic_alias_maximum": cp.topic_alias_maximum or None,
            "request_response_information": 1 if cp.request_response_information else None,
            "request_problem_information": None if cp.request_problem_information else 0,
            "user_properties": tuple(cp.user_properties.items()),
        }
        if any(value not in (None, ()) for value in values.values()):
            properties = Properties(**values)
    password = None if config.password is None else config.password.get_secret_value().encode()
    return Connect(
        client_id,
        level,
        clean_start,
        int(config.keepalive),
        config.username,
        password,
        None,
        properties,
    )


async def open_link(
    config: BridgeConfig,
    host: str,
    port: int,
    client_id: str,
    on_packet: Callable[[Packet], None],
    clean_start: bool | None = None,
) -> tuple[Link, Connack]:
    """Connects to the remote broker; see the module docstring."""
    level = LEVELS[config.protocol_version]
    context = tls_context(config)
    server_name = None
    if context is not None:
        server_name = (config.tls.server_name if config.tls else None) or host
    loop = asyncio.get_running_loop()
    max_packet = config.connect_properties.maximum_packet_size if level == 5 else None
    link: Link | None = None
    try:
        async with asyncio.timeout(config.connect_timeout):
            _, link = await loop.create_connection(
                lambda: Link(level, on_packet, max_packet),
                host,
                port,
                ssl=context,
                server_hostname=server_name,
                ssl_handshake_timeout=config.connect_timeout if context else None,
            )
            link.send(
                _connect_packet(
                    config,
                    client_id,
                    level,
                    config.clean_start if clean_start is None else clean_start,
                )
            )
            try:
                connack = await link.connack
            except BridgeError as exc:
                if link.reason == ANSWERED_IN_TLS:
                    raise BridgeError(
                        f"{host}:{port} answered with TLS, not MQTT ({_tls_port_hint(host, port)})"
                    ) from None
                if link.reason is not None:
                    raise  # closed by us, for the reason it says
                hint = "" if context is not None else f" ({_tls_port_hint(host, port)})"
                raise BridgeError(f"connection to {host}:{port} {exc}{hint}") from None
    except TimeoutError:
        if link is not None:
            link.abort("timeout")
        raise BridgeError(
            f"no CONNACK from {host}:{port} within {config.connect_timeout:g}s"
        ) from None
    except ssl.SSLCertVerificationError as exc:
        names = None
        if exc.verify_code in _NAME_MISMATCH:
            names = await certificate_names(config, host, port, server_name)
        raise BridgeError(
            f"TLS with {host}:{port} failed: {certificate_refused(exc, config, names)}"
        ) from exc
    except OSError as exc:  # ssl.SSLError is one
        if context is not None and link is None:  # in the TLS handshake
            if isinstance(exc, _CLOSED_IN_HANDSHAKE):
                raise BridgeError(
                    f"TLS handshake with {host}:{port} failed: the remote closed the connection"
                    f" ({_plain_port_hint(host, port)})"
                ) from exc
            if isinstance(exc, ssl.SSLError) and exc.reason == "WRONG_VERSION_NUMBER":
                raise BridgeError(
                    f"TLS handshake with {host}:{port} failed: the remote's answer is not TLS"
                    f" ({_plain_port_hint(host, port)})"
                ) from exc
        if isinstance(exc, ssl.SSLError):
            raise BridgeError(f"TLS with {host}:{port} failed: {exc.reason or exc}") from exc
        raise BridgeError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from exc
    code = connack.reason_code
    if code:
        text = _V3_CONNACK.get(code, str(code)) if level < 5 else reason_name(code)
        link.abort("refused")
        raise BridgeError(f"{host}:{port} refused the connection: {text}")
    return link, connack
