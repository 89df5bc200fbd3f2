"""A blocking MQTT test client that speaks raw bytes, with a timeout on every wait.

It sends whatever bytes a test gives it (usually from :mod:`tests.helpers.mqtt_builder`) and
parses what the server sends with the independent parser there. It does no protocol work on
its own beyond what a helper method says (``do_connect``, ``subscribe``, ``publish``), so a
test sees every packet the server sends.

Packets that arrive while a helper waits for a specific one (say a PUBLISH delivered while
``publish`` waits for its PUBACK) are kept in :attr:`RawClient.backlog` and returned first by
the next :meth:`RawClient.recv_packet`.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Collection
from typing import Any

from tests.helpers import mqtt_builder as mb
from tests.helpers.timeouts import unit

__all__ = ["ConnectionClosedError", "RawClient", "count_publishes", "recv_timeout"]


def recv_timeout() -> float:
    """The default wait for a packet the test expects (generous: a loaded machine)."""
    return unit(10)


class ConnectionClosedError(AssertionError):
    """The server closed the connection while the test expected something else."""


_CLOSED_ERRNOS = {errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED, errno.ESHUTDOWN}


class RawClient:
    """One TCP connection to an MQTT server on loopback.

    ``protocol_level`` selects how received packets are parsed (3, 4 or 5); ``do_connect``
    sets it from its ``proto_ver``.
    """

    _ids = itertools.count(1)

    def __init__(
        self,
        host: str,
        port: int,
        *,
        protocol_level: int = 4,
        connect_timeout: float | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.protocol_level = protocol_level
        self.sock = socket.create_connection(
            (host, port), timeout=unit(5) if connect_timeout is None else connect_timeout
        )
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""
        self.backlog: deque[mb.Packet] = deque()
        self.closed_by_peer = False
        self.connack: mb.Packet | None = None
        self._next_mid = 0
        self.name = f"raw{next(self._ids)}"

    # -- context manager -----------------------------------------------------------------------

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the socket (without sending DISCONNECT)."""
        with contextlib.suppress(OSError):
            self.sock.close()

    def abort(self) -> None:
        """Close the connection abruptly with a TCP reset (no DISCONNECT, no FIN)."""
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close()

    # -- sending ---------------------------------------------------------------------------------

    def send(self, data: bytes, *, allow_closed: bool = False) -> None:
        """Send bytes. A connection closed by the server raises, unless ``allow_closed``."""
        try:
            self.sock.sendall(data)
        except OSError as exc:
            if exc.errno not in _CLOSED_ERRNOS and not isinstance(exc, ConnectionError):
                raise
            self.closed_by_peer = True
            if not allow_closed:
                raise ConnectionClosedError(
                    f"{self.name}: connection closed by the server while sending: {exc}"
                ) from exc

    def next_mid(self) -> int:
        """A fresh non-zero packet identifier for this connection."""
        self._next_mid = self._next_mid % 65535 + 1
        return self._next_mid

    # -- receiving -------------------------------------------------------------------------------

    def _read_more(self, deadline: float) -> bool:
        """Read once from the socket. False when the server closed the connection."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            raise
        except OSError as exc:
            if exc.errno in _CLOSED_ERRNOS or isinstance(exc, ConnectionError):
                self.closed_by_peer = True
                return False
            raise
        if not chunk:
            self.closed_by_peer = True
            return False
        self.buffer += chunk
        return True

    def _next_packet(self, deadline: float) -> mb.Packet | None:
        """The next packet from the wire, or None when the server closed the connection."""
        while True:
            framed = mb.split_packet(self.buffer)
            if framed is not None:
                data, self.buffer = framed
                return mb.parse_packet(data, self.protocol_level)
            if self.closed_by_peer or not self._read_more(deadline):
                if self.buffer:
                    raise AssertionError(
                        f"{self.name}: connection closed inside a packet: {self.buffer!r}"
                    )
                return None

    def recv_packet(self, timeout: float | None = None) -> mb.Packet:
        """The next packet (backlog first); raises on timeout or when the connection closes."""
        if self.backlog:
            return self.backlog.popleft()
        wait = recv_timeout() if timeout is None else timeout
        try:
            packet = self._next_packet(time.monotonic() + wait)
        except TimeoutError:
            raise AssertionError(f"{self.name}: no packet within {wait:.2f}s") from None
        if packet is None:
            raise ConnectionClosedError(f"{self.name}: connection closed by the server")
        return packet

    def expect(self, expected: bytes, timeout: float | None = None) -> mb.Packet:
        """Receive one packet and assert it is exactly ``expected``."""
        packet = self.recv_packet(timeout)
        if packet.raw != expected:
            raise AssertionError(
                f"{self.name}: expected {expected.hex(' ')}, got {packet.raw.hex(' ')} ({packet!r})"
            )
        return packet

    def expect_packet(
        self, packet_type: int, timeout: float | None = None, **fields: Any
    ) -> mb.Packet:
        """Receive one packet; assert its type and the given attribute values."""
        packet = self.recv_packet(timeout)
        if packet.type != packet_type:
            raise AssertionError(
                f"{self.name}: expected {mb.PacketType(packet_type).name}, got {packet!r}"
            )
        for name, value in fields.items():
            if getattr(packet, name) != value:
                raise AssertionError(f"{self.name}: expected {name}={value!r} in {packet!r}")
        return packet

    def wait_for(
        self,
        match: Callable[[mb.Packet], bool],
        timeout: float | None = None,
        what: str = "packet",
    ) -> mb.Packet:
        """Receive until a packet matches; the others go to the backlog, in order."""
        wait = recv_timeout() if timeout is None else timeout
        deadline = time.monotonic() + wait
        skipped: list[mb.Packet] = []
        for index, packet in enumerate(list(self.backlog)):
            if match(packet):
                del self.backlog[index]
                return packet
        try:
            while True:
                try:
                    packet = self._next_packet(deadline)
                except TimeoutError:
                    raise AssertionError(
                        f"{self.name}: no {what} within {wait:.2f}s; other packets: {skipped!r}"
                    ) from None
                if packet is None:
                    raise ConnectionClosedError(
                        f"{self.name}: connection closed while waiting for {what}; "
                        f"other packets: {skipped!r}"
                    )
                if match(packet):
                    return packet
                skipped.append(packet)
        finally:
            self.backlog.extend(skipped)

    def expect_no_packet(self, wait: float | None = None) -> None:
        """Assert that nothing arrives for ``wait`` seconds (a short, bounded absence check)."""
        if self.backlog:
            raise AssertionError(f"{self.name}: unexpected {self.backlog[0]!r}")
        duration = unit(0.4) if wait is None else wait
        try:
            packet = self._next_packet(time.monotonic() + duration)
        except TimeoutError:
            return
        if packet is None:
            raise ConnectionClosedError(f"{self.name}: connection closed by the server")
        raise AssertionError(f"{self.name}: unexpected {packet!r}")

    def collect(self, wait: float | None = None) -> list[mb.Packet]:
        """Every packet that arrives within ``wait`` seconds (backlog included)."""
        packets = list(self.backlog)
        self.backlog.clear()
        deadline = time.monotonic() + (unit(0.4) if wait is None else wait)
        while True:
            try:
                packet = self._next_packet(deadline)
            except TimeoutError:
                return packets
            if packet is None:
                return packets
            packets.append(packet)

    def expect_closed(
        self,
        timeout: float | None = None,
        *,
        reason_code: int | Collection[int] | None = None,
        require_reason: bool = False,
        packet_type: int | None = mb.PacketType.DISCONNECT,
    ) -> mb.Packet | None:
        """Assert that the server closes the connection within ``timeout``.

        Before closing, the server may send one packet of ``packet_type`` (DISCONNECT by
        default; CONNACK for errors in CONNECT; None: no packet at all), and with
        ``require_reason`` it must. When ``reason_code`` is given (one code or a collection),
        that packet's reason code must be one of them. Any other packet fails the test.
        Returns that packet or None.
        """
        wait = recv_timeout() if timeout is None else timeout
        deadline = time.monotonic() + wait
        allowed = (
            None
            if reason_code is None
            else {reason_code}
            if isinstance(reason_code, int)
            else set(reason_code)
        )
        final: mb.Packet | None = None
        pending = list(self.backlog)
        self.backlog.clear()
        while True:
            if pending:
                packet: mb.Packet | None = pending.pop(0)
            else:
                try:
                    packet = self._next_packet(deadline)
                except TimeoutError:
                    raise AssertionError(
                        f"{self.name}: connection still open after {wait:.2f}s"
                        + (f" (received {final!r})" if final else "")
                    ) from None
                except mb.ParseError as exc:
                    raise AssertionError(f"{self.name}: unparsable bytes: {exc}") from exc
            if packet is None:
                break
            type_name = mb.PacketType(packet.type).name
            want = "nothing" if packet_type is None else mb.PacketType(packet_type).name
            if final is not None or type_name != want:
                raise AssertionError(
                    f"{self.name}: expected the connection to close"
                    f"{' after a ' + want if require_reason else ''}, got {packet!r}"
                )
            final = packet
            if packet.type == mb.PacketType.DISCONNECT:
                # MQTT-3.14.2-2: the Server never sends Session Expiry Interval on DISCONNECT.
                assert "session_expiry_interval" not in packet.properties
        if require_reason and final is None:
            raise AssertionError(f"{self.name}: closed without a {packet_type!r}")
        if final is not None and allowed is not None and final.reason_code not in allowed:
            raise AssertionError(
                f"{self.name}: reason code 0x{final.reason_code:02X} of {final!r}, "
                f"expected one of {sorted(f'0x{c:02X}' for c in allowed)}"
            )
        return final

    # -- conveniences ----------------------------------------------------------------------------

    def do_connect(
        self,
        client_id: str | bytes = "",
        *,
        proto_ver: int = 4,
        expect_code: int | None = 0,
        timeout: float | None = None,
        **connect_args: Any,
    ) -> mb.Packet:
        """Send CONNECT (arguments of ``gen_connect``) and return the CONNACK.

        With ``expect_code`` (default success) the CONNACK's return / reason code is asserted.
        """
        self.protocol_level = proto_ver
        self.send(mb.gen_connect(client_id, proto_ver=proto_ver, **connect_args))
        connack = self.expect_packet(mb.PacketType.CONNACK, timeout)
        if expect_code is not None and connack.reason_code != expect_code:
            raise AssertionError(f"{self.name}: expected code {expect_code}, got {connack!r}")
        self.connack = connack
        return connack

    def subscribe(
        self,
        topics: Any,
        qos: int = 0,
        *,
        mid: int | None = None,
        properties: Any = None,
        timeout: float | None = None,
    ) -> mb.Packet:
        """Send SUBSCRIBE (arguments of ``gen_subscribe``) and return the SUBACK.

        Retained messages sent before the SUBACK go to the backlog.
        """
        mid = self.next_mid() if mid is None else mid
        self.send(
            mb.gen_subscribe(mid, topics, qos, proto_ver=self.protocol_level, properties=properties)
        )
        suback = self.wait_for(lambda p: p.type == mb.PacketType.SUBACK, timeout, what="SUBACK")
        if suback.packet_id != mid:
            raise AssertionError(f"{self.name}: {suback!r} answers SUBSCRIBE {mid}")
        return suback

    def unsubscribe(
        self, topics: Any, *, mid: int | None = None, properties: Any = None
    ) -> mb.Packet:
        """Send UNSUBSCRIBE and return the UNSUBACK."""
        mid = self.next_mid() if mid is None else mid
        self.send(
            mb.gen_unsubscribe(mid, topics, proto_ver=self.protocol_level, properties=properties)
        )
        unsuback = self.wait_for(lambda p: p.type == mb.PacketType.UNSUBACK, what="UNSUBACK")
        if unsuback.packet_id != mid:
            raise AssertionError(f"{self.name}: {unsuback!r} answers UNSUBSCRIBE {mid}")
        return unsuback

    def publish(
        self,
        topic: str | bytes,
        payload: bytes | str = b"",
        *,
        qos: int = 0,
        retain: bool = False,
        mid: int | None = None,
        properties: Any = None,
        timeout: float | None = None,
    ) -> mb.Packet | None:
        """Publish and complete the QoS flow; returns the PUBACK / PUBCOMP (None for QoS 0)."""
        if qos:
            mid = self.next_mid() if mid is None else mid
        self.send(
            mb.gen_publish(
                topic,
                payload,
                qos=qos,
                retain=retain,
                mid=mid if qos else None,
                proto_ver=self.protocol_level,
                properties=properties,
            )
        )
        if qos == 1:
            return self.wait_for(
                lambda p: p.type == mb.PacketType.PUBACK and p.packet_id == mid,
                timeout,
                what=f"PUBACK {mid}",
            )
        if qos == 2:
            pubrec = self.wait_for(
                lambda p: p.type == mb.PacketType.PUBREC and p.packet_id == mid,
                timeout,
                what=f"PUBREC {mid}",
            )
            if pubrec.reason_code is not None and pubrec.reason_code >= 0x80:
                return pubrec
            self.send(mb.gen_pubrel(mid or 0, proto_ver=self.protocol_level))
            return self.wait_for(
                lambda p: p.type == mb.PacketType.PUBCOMP and p.packet_id == mid,
                timeout,
                what=f"PUBCOMP {mid}",
            )
        return None

    def recv_publish(self, timeout: float | None = None, *, ack: bool = True) -> mb.Packet:
        """Wait for the next PUBLISH (other packets go to the backlog) and acknowledge it.

        QoS 1 is answered with PUBACK, QoS 2 with PUBREC, then PUBREL is awaited and answered
        with PUBCOMP, unless ``ack`` is False.
        """
        packet = self.wait_for(lambda p: p.type == mb.PacketType.PUBLISH, timeout, "PUBLISH")
        if ack:
            self.ack_publish(packet, timeout)
        return packet

    def ack_publish(self, packet: mb.Packet, timeout: float | None = None) -> None:
        """Complete the receiver's side of the QoS flow for a received PUBLISH."""
        mid = packet.packet_id or 0
        if packet.qos == 1:
            self.send(mb.gen_puback(mid, proto_ver=self.protocol_level))
        elif packet.qos == 2:
            self.send(mb.gen_pubrec(mid, proto_ver=self.protocol_level))
            self.wait_for(
                lambda p: p.type == mb.PacketType.PUBREL and p.packet_id == mid,
                timeout,
                what=f"PUBREL {mid}",
            )
            self.send(mb.gen_pubcomp(mid, proto_ver=self.protocol_level))

    def ping(self, timeout: float | None = None) -> None:
        """PINGREQ, then wait for the PINGRESP (other packets go to the backlog)."""
        self.send(mb.gen_pingreq())
        self.wait_for(lambda p: p.type == mb.PacketType.PINGRESP, timeout, "PINGRESP")

    def disconnect(self, reason_code: int | None = None, properties: Any = None) -> None:
        """Send DISCONNECT and close the socket."""
        if self.protocol_level >= 5:
            self.send(
                mb.gen_disconnect(reason_code, proto_ver=5, properties=properties),
                allow_closed=True,
            )
        else:
            self.send(mb.gen_disconnect(), allow_closed=True)
        self.close()


def count_publishes(sock: socket.socket, expected: int, timeout: float) -> int:
    """Reads ``sock`` until ``expected`` PUBLISH packets arrived, it closed or ``timeout``
    passed; the number of PUBLISH packets read (other packets are skipped)."""
    deadline = time.monotonic() + timeout
    buffer = b""
    count = 0
    while count < expected:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not chunk:
            break
        buffer += chunk
        pos = 0
        while len(buffer) - pos >= 2:
            try:
                length, end = mb.decode_varint(buffer, pos + 1)
            except mb.ParseError:  # the rest of the header is still on its way
                break
            if end + length > len(buffer):
                break
            if buffer[pos] >> 4 == mb.PacketType.PUBLISH:
                count += 1
            pos = end + length
        buffer = buffer[pos:]
    return count
