"""Decoding MQTT control packets: ``Decoder(max_packet_size).feed(data) -> list[Packet]``.

The decoder keeps partial input between calls and is strict: anything the
specifications call malformed or a protocol error raises ``MalformedPacket`` or
``ProtocolViolation`` carrying the reason code, and nothing else escapes. Packets
decoded before an error in the same ``feed`` are returned; the error is raised by the
next call (and then by every call after it: a decoder that failed stays failed).

The protocol level is learned from CONNECT on a server (``protocol_level=None``) or
given up front on a client.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_core.errors import MalformedPacket, ProtocolError, ProtocolViolation
from broker_core.mqtt import topics, wire
from broker_core.mqtt.fastinit import frozen_factory
from broker_core.mqtt.packets import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    SubscriptionOptions,
    TopicSubscription,
    Unsuback,
    Unsubscribe,
    Will,
    new_publish,
)
from broker_core.mqtt.properties import (
    EMPTY,
    NO_LIMITS,
    PacketKind,
    Properties,
    PropertyLimits,
    decode_properties,
)
from broker_core.mqtt.reason_codes import ReasonCode

__all__ = ["MAX_PACKET_SIZE", "Decoder", "UnsupportedProtocolVersion"]

MAX_PACKET_SIZE = 268_435_460  # 1 + 4 + the largest remaining length


# (protocol level, buffer, start of the variable header, end of the packet, limits)
_PacketDecoder = Callable[[int, bytes, int, int, PropertyLimits], Packet]


class UnsupportedProtocolVersion(ProtocolError):
    """CONNECT names a protocol level this server does not speak [MQTT-3.1.2-2]."""

    default_reason_code = ReasonCode.UNSUPPORTED_PROTOCOL_VERSION


# Fixed header flags every packet type but PUBLISH must carry [MQTT-2.2.2-1, -2].
_REQUIRED_FLAGS = {
    1: 0,
    2: 0,
    4: 0,
    5: 0,
    6: 2,
    7: 0,
    8: 2,
    9: 0,
    10: 2,
    11: 0,
    12: 0,
    13: 0,
    14: 0,
    15: 0,
}

_PUBACK_CODES = frozenset((0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99))
_PUBREL_CODES = frozenset((0x00, 0x92))
_SUBACK_CODES = frozenset((0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2))
_UNSUBACK_CODES = frozenset((0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91))
_AUTH_CODES = frozenset((0x00, 0x18, 0x19))
_DISCONNECT_CODES = frozenset(
    (0x00, 0x04, *range(0x80, 0x84), 0x87, 0x89, 0x8B, *range(0x8D, 0x91), *range(0x93, 0xA3))
)
_CONNACK_CODES = frozenset(
    (0x00, *range(0x80, 0x8B), 0x8C, 0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F)
)


# Shared by every Decoder that is not accumulating a large packet (never appended to:
# ``feed`` starts a new list for that), so that an idle connection carries no list.
_NO_CHUNKS: list[bytes] = []


class Decoder:
    """Turns a byte stream into packets; one per connection."""

    __slots__ = (
        "_chunks",
        "_have",
        "_need",
        "_pending",
        "error",
        "input_pending",
        "max_packet_size",
        "property_limits",
        "protocol_level",
        "read_budget",
    )

    def __init__(
        self,
        max_packet_size: int = MAX_PACKET_SIZE,
        protocol_level: int | None = None,
        property_limits: PropertyLimits = NO_LIMITS,
        read_budget: int = 0,
    ) -> None:
        self.max_packet_size = max_packet_size
        self.protocol_level = protocol_level
        self.property_limits = property_limits
        # Bytes of packets decoded per feed, at least one packet (0: all); the rest waits
        # for ``feed(b"")`` and ``input_pending`` says so (the driver's read budget).
        self.read_budget = read_budget
        self.input_pending = False
        self._pending = b""
        self._chunks: list[bytes] = _NO_CHUNKS  # a list only while a large packet arrives
        self._have = 0
        self._need = 0
        #: The error that stopped this decoder, if any.
        self.error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of their packet."""
        return len(self._pending) + self._have

    def feed(self, data: bytes) -> list[Packet]:
        if self.error is not None:
            raise self.error
        if self._need:
            # Accumulating one large packet: join once, when it is complete.
            self._chunks.append(bytes(data))
            self._have += len(data)
            if self._have < self._need:
                return []
            buf = b"".join(self._chunks)
            self._chunks = _NO_CHUNKS
            self._need = self._have = 0
        elif self._pending:
            buf = self._pending + data
            self._pending = b""
        else:
            buf = data if type(data) is bytes else bytes(data)
        packets: list[Packet] = []
        pos = 0
        n = len(buf)
        waiting_for = 0  # size of an incomplete packet whose length is already known
        budget = self.read_budget or n
        limits = self.property_limits
        self.input_pending = False
        try:
            while n - pos >= 2:
                if pos >= budget:
                    self.input_pending = True
                    break
                b0 = buf[pos]
                if b0 >> 4 != 3 and _REQUIRED_FLAGS.get(b0 >> 4) != b0 & 0x0F:
                    # Fail on the fixed header, before waiting for a body that may
                    # never come (a non-MQTT peer, a corrupt stream).
                    self._decode(b0, buf, pos, pos, pos)
                # Remaining Length (MQTT 5.0 2.1.4, 3.1.1 2.2.3): at most 4 bytes; MQTT 5
                # alone requires the minimal encoding [MQTT-1.5.5-1], checked on the rare
                # branch (a last byte 0) and for a CONNECT once its level is known.
                rl = buf[pos + 1]
                i = pos + 2
                if rl & 0x80:
                    rl &= 0x7F
                    shift = 7
                    complete = False
                    while i < n:
                        byte = buf[i]
                        i += 1
                        rl |= (byte & 0x7F) << shift
                        if not byte & 0x80:
                            if not byte and self.protocol_level == 5:
                                raise MalformedPacket("remaining length is not minimally encoded")
                            complete = True
                            break
                        shift += 7
                        if shift == 28:
                            raise MalformedPacket("remaining length longer than 4 bytes")
                    if not complete:
                        break
                total = i - pos + rl
                if total > self.max_packet_size:
                    raise ProtocolError(
                        f"packet of {total} bytes exceeds the maximum packet size "
                        f"{self.max_packet_size}",
                        ReasonCode.PACKET_TOO_LARGE,
                    )
                end = i + rl
                if end > n:
                    waiting_for = total
                    break
                if b0 >> 4 == 3:  # PUBLISH, the hot path: no detour through _decode
                    packets.append(
                        _publish(self.protocol_level or 4, b0 & 0x0F, buf, pos, i, end, limits)
                    )
                else:
                    packets.append(self._decode(b0, buf, pos, i, end))
                pos = end
        except ProtocolError as exc:
            self.error = exc
            if packets:
                return packets
            raise
        if pos < n:
            tail = buf[pos:] if pos else buf
            if waiting_for > 4096:
                # A large packet arriving in pieces: collect the pieces, join once.
                self._chunks = [tail]
                self._have = n - pos
                self._need = waiting_for
            else:
                self._pending = tail
        return packets

    def _decode(self, b0: int, buf: bytes, start: int, pos: int, end: int) -> Packet:
        ptype = b0 >> 4
        flags = b0 & 0x0F
        limits = self.property_limits
        if ptype == 3:
            return _publish(self.protocol_level or 4, flags, buf, start, pos, end, limits)
        required = _REQUIRED_FLAGS.get(ptype)
        if required is None:
            raise MalformedPacket("reserved packet type 0")
        if flags != required:
            raise MalformedPacket(f"reserved flags 0x{flags:X} in packet type {ptype}")
        if ptype == 1:
            connect = _connect(self, buf, pos, end)
            # The level was not known when the length was read: MQTT 5's minimal
            # encoding [MQTT-1.5.5-1] is checked now; 3.1 / 3.1.1 have no such rule.
            if self.protocol_level == 5 and pos - start > 1 + len(wire.encode_varint(end - pos)):
                raise MalformedPacket("remaining length is not minimally encoded")
            return connect
        level = self.protocol_level or 4
        if ptype == 15 and level < 5:
            raise MalformedPacket("AUTH packet before MQTT 5")
        return _DECODERS[ptype](level, buf, pos, end, limits)


def _publish(
    level: int, flags: int, buf: bytes, start: int, pos: int, end: int, limits: PropertyLimits
) -> Publish:
    qos = (flags >> 1) & 3
    if qos == 3:
        raise MalformedPacket("PUBLISH with QoS 3")  # [MQTT-3.3.1-4]
    dup = bool(flags & 8)
    if dup and not qos:
        raise MalformedPacket("DUP set on a QoS 0 PUBLISH")  # [MQTT-3.3.1-2]
    if pos + 2 > end:
        raise MalformedPacket("PUBLISH ends before its topic")
    stop = pos + 2 + ((buf[pos] << 8) | buf[pos + 1])
    if stop > end:
        raise MalformedPacket("PUBLISH topic runs past the end of the packet")
    try:
        topic = buf[pos + 2 : stop].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedPacket(f"topic is not well-formed UTF-8: {exc.reason}") from exc
    if "\x00" in topic:
        raise MalformedPacket("topic contains U+0000")
    if "+" in topic or "#" in topic:
        topics.validate_topic_name(topic)
    pos = stop
    packet_id = None
    if qos:
        if pos + 2 > end:
            raise MalformedPacket("PUBLISH ends before its packet identifier")
        packet_id = (buf[pos] << 8) | buf[pos + 1]
        if not packet_id:
            raise ProtocolViolation("packet identifier 0")  # [MQTT-2.2.1-3]
        pos += 2
    props = EMPTY
    if level == 5:
        if pos < end and not buf[pos]:  # no properties (the next packet's byte is not)
            pos += 1
        else:
            props, pos = decode_properties(buf, pos, end, PacketKind.PUBLISH, limits)
    raw = None if qos else (buf if start == 0 and end == len(buf) else buf[start:end])
    return new_publish(topic, buf[pos:end], qos, bool(flags & 1), dup, packet_id, props, raw)


# The protocol name and level of an MQTT 3.1.1 or 5.0 CONNECT, as they are on the wire.
_MQTT_NAME_LEVELS = {b"\x00\x04MQTT\x04": 4, b"\x00\x04MQTT\x05": 5}


def _connect(dec: Decoder, buf: bytes, pos: int, end: int) -> Connect:
    level = _MQTT_NAME_LEVELS.get(buf[pos : pos + 7]) if pos + 10 <= end else None
    keep_alive: int | None = None
    if level is not None:  # the common case, read at once: name, level, flags, keep alive
        name = "MQTT"
        flags = buf[pos + 7]
        keep_alive = (buf[pos + 8] << 8) | buf[pos + 9]
        pos += 10
    else:
        name, pos = wire.read_utf8(buf, pos, end)
        level, pos = wire.read_u8(buf, pos, end)
        if name not in ("MQTT", "MQIsdp"):
            raise ProtocolViolation(f"unknown protocol name {name!r}")  # [MQTT-3.1.2-1]
        if (name, level) not in (("MQTT", 4), ("MQTT", 5), ("MQIsdp", 3)):
            raise UnsupportedProtocolVersion(f"unsupported protocol {name!r} level {level}")
        flags, pos = wire.read_u8(buf, pos, end)
    dec.protocol_level = level
    if flags & 0x01:
        raise MalformedPacket("CONNECT reserved flag is set")  # [MQTT-3.1.2-3]
    clean_start = bool(flags & 0x02)
    has_will = bool(flags & 0x04)
    will_qos = (flags >> 3) & 3
    will_retain = bool(flags & 0x20)
    has_password = bool(flags & 0x40)
    has_username = bool(flags & 0x80)
    if will_qos == 3:
        raise MalformedPacket("will QoS 3")  # [MQTT-3.1.2-14]
    if not has_will and (will_qos or will_retain):
        raise MalformedPacket("will QoS or retain set without a will")  # [MQTT-3.1.2-11, -13, -15]
    if level < 5 and has_password and not has_username:
        raise ProtocolViolation("password without user name")  # [MQTT-3.1.2-22]
    if keep_alive is None:
        keep_alive, pos = wire.read_u16(buf, pos, end)
    props = EMPTY
    if level == 5:
        props, pos = decode_properties(buf, pos, end, PacketKind.CONNECT, dec.property_limits)
        if props.authentication_data is not None and props.authentication_method is None:
            raise ProtocolViolation("authentication data without a method")  # 3.1.2.11.10
    client_id, pos = wire.read_utf8(buf, pos, end)
    will = None
    if has_will:
        will_props = EMPTY
        if level == 5:
            will_props, pos = decode_properties(buf, pos, end, PacketKind.WILL, dec.property_limits)
        will_topic, pos = wire.read_utf8(buf, pos, end)
        if not will_topic:
            raise ProtocolViolation("empty will topic")  # [MQTT-4.7.3-1]
        topics.validate_topic_name(will_topic)
        will_payload, pos = wire.read_binary(buf, pos, end)
        will = Will(will_topic, will_payload, will_qos, will_retain, will_props)
    username = password = None
    if has_username:
        username, pos = wire.read_utf8(buf, pos, end)
    if has_password:
        password, pos = wire.read_binary(buf, pos, end)
    if pos != end:
        raise MalformedPacket("CONNECT has bytes after its payload")
    return Connect(client_id, level, clean_start, keep_alive, username, password, will, props, name)


def _connack(level: int, buf: bytes, pos: int, end: int, limits: PropertyLimits) -> Connack:
    ack_flags, pos = wire.read_u8(buf, pos, end)
    if ack_flags & 0xFE:
        raise MalformedPacket("CONNACK reserved flags set")  # [MQTT-3.2.2-1]
    code, pos = wire.read_u8(buf, pos, end)
    props = EMPTY
    if level == 5:
        if code not in _CONNACK_CODES:
            raise ProtocolViolation(f"invalid CONNACK reason code 0x{code:02X}")
        props, pos = decode_properties(buf, pos, end, PacketKind.CONNACK, limits)
    elif code > 5:
        raise ProtocolViolation(f"invalid CONNACK return code {code}")
    _expect_end(pos, end, "CONNACK")
    return Connack(bool(ack_flags & 1), code, props)


def _packet_id(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    packet_id, pos = wire.read_u16(buf, pos, end)
    if not packet_id:
        raise ProtocolViolation("packet identifier 0")  # [MQTT-2.2.1-3]
    return packet_id, pos


def _ack_decoder(
    cls: type[Puback] | type[Pubrec] | type[Pubrel] | type[Pubcomp],
    kind: PacketKind,
    codes: frozenset[int],
) -> _PacketDecoder:
    new = frozen_factory(cls)  # one per QoS 1/2 message: the fast constructor

    def decode(level: int, buf: bytes, pos: int, end: int, limits: PropertyLimits) -> Packet:
        if end - pos == 2:  # the common short form: just the packet id
            packet_id = (buf[pos] << 8) | buf[pos + 1]
            if not packet_id:
                raise ProtocolViolation("packet identifier 0")  # [MQTT-2.2.1-3]
            return new(packet_id, 0, EMPTY)
        packet_id, pos = _packet_id(buf, pos, end)
        code, props = _reason_and_properties(level, buf, pos, end, kind, codes, limits)
        return new(packet_id, code, props)

    return decode


def _subscribe(level: int, buf: bytes, pos: int, end: int, limits: PropertyLimits) -> Subscribe:
    packet_id, pos = _packet_id(buf, pos, end)
    props = EMPTY
    if level == 5:
        props, pos = decode_properties(buf, pos, end, PacketKind.SUBSCRIBE, limits)
    subs: list[TopicSubscription] = []
    while pos < end:
        topic_filter, pos = wire.read_utf8(buf, pos, end)
        options, pos = wire.read_u8(buf, pos, end)
        qos = options & 0x03
        if qos == 3:
            if level == 5:  # 5.0 3.8.3.1: a Protocol Error; 3.1.1 [MQTT-3.8.3-4]: malformed
                raise ProtocolViolation("subscription Maximum QoS 3")
            raise MalformedPacket("subscription QoS 3")
        if level == 5:
            if options & 0xC0:
                raise MalformedPacket("subscription options reserved bits set")  # [MQTT-3.8.3-5]
            retain_handling = (options >> 4) & 3
            if retain_handling == 3:
                raise ProtocolViolation("retain handling 3")
            opts = SubscriptionOptions(qos, bool(options & 4), bool(options & 8), retain_handling)
        else:
            if options & 0xFC:
                raise MalformedPacket("subscription options reserved bits set")  # [MQTT-3.8.3-4]
            opts = _V3_OPTIONS[qos]
        if topics.parse_shared(topic_filter) is None:
            topics.validate_topic_filter(topic_filter)
        subs.append(TopicSubscription(topic_filter, opts))
    if not subs:
        raise ProtocolViolation("SUBSCRIBE without topic filters")  # [MQTT-3.8.3-3]
    return Subscribe(packet_id, tuple(subs), props)


_V3_OPTIONS = tuple(SubscriptionOptions(q) for q in range(3))


def _suback(level: int, buf: bytes, pos: int, end: int, limits: PropertyLimits) -> Suback:
    packet_id, pos = _packet_id(buf, pos, end)
    props = EMPTY
    if level == 5:
        props, pos = decode_properties(buf, pos, end, PacketKind.SUBACK, limits)
    codes = tuple(buf[pos:end])
    allowed = _SUBACK_CODES if level == 5 else frozenset((0, 1, 2, 0x80))
    for code in codes:
        if code not in allowed:
            raise ProtocolViolation(f"invalid SUBACK return code 0x{code:02X}")
    if not codes:
        raise ProtocolViolation("SUBACK without return codes")
    return Suback(packet_id, codes, props)


def _unsubscribe(level: int, buf: bytes, pos: int, end: int, limits: PropertyLimits) -> Unsubscribe:
    packet_id, pos = _packet_id(buf, pos, end)
    props = EMPTY
    if level == 5:
        props, pos = decode_properties(buf, pos, end, PacketKind.UNSUBSCRIBE, limits)
    filters: list[str] = []
    while pos < end:
        topic_filter, pos = wire.read_utf8(buf, pos, end)
        if topics.parse_shared(topic_filter) is None:
            topics.validate_topic_filter(topic_filter)
        filters.append(topic_filter)
    if not filters:
        raise ProtocolViolation("UNSUBSCRIBE without topic filters")  # [MQTT-3.10.3-2]
    return Unsubscribe(packet_id, tuple(filters), props)


def _unsuback(level: int, buf: bytes, pos: int, end: int, limits: PropertyLimits) -> Unsuback:
    packet_id, pos = _packet_id(buf, pos, end)
    if level < 5:
        _expect_end(pos, end, "UNSUBACK")
        return Unsuback(packet_id)
    props, pos = decode_properties(buf, pos, end, PacketKind.UNSUBACK, limits)
    codes = tuple(buf[pos:end])
    for code in codes:
        if code not in _UNSUBACK_CODES:
            raise ProtocolViolation(f"invalid UNSUBACK reason code 0x{code:02X}")
    if not codes:
        raise ProtocolViolation("UNSUBACK without reason codes")
    return Unsuback(packet_id, codes, props)


def _pingreq(level: int, buf: bytes, pos: int, end: int, limits: PropertyLimits) -> Pingreq:
    _expect_end(pos, end, "PINGREQ")
    return _PINGREQ


def _pingresp(level: int, buf: bytes, pos: int, end: int, limits: PropertyLimits) -> Pingresp:
    _expect_end(pos, end, "PINGRESP")
    return _PINGRESP


_PINGREQ = Pingreq()
_PINGRESP = Pingresp()


def _reason_and_properties(
    level: int,
    buf: bytes,
    pos: int,
    end: int,
    kind: PacketKind,
    codes: frozenset[int],
    limits: PropertyLimits,
) -> tuple[int, Properties]:
    code = 0
    props = EMPTY
    if level == 5 and pos < end:
        code = buf[pos]
        pos += 1
        if code not in codes:
            raise ProtocolViolation(f"invalid {kind.name} reason code 0x{code:02X}")
        if pos < end:
            props, pos = decode_properties(buf, pos, end, kind, limits)
    _expect_end(pos, end, kind.name)
    return code, props


# A DISCONNECT with nothing after its fixed header (reason 0x00, no properties: every
# pre-5 DISCONNECT and most MQTT 5 ones), one for all: each connection ends with one.
_DISCONNECT_NORMAL = Disconnect()


def _disconnect(level: int, buf: bytes, pos: int, end: int, limits: PropertyLimits) -> Disconnect:
    if pos == end:
        return _DISCONNECT_NORMAL
    code, props = _reason_and_properties(
        level, buf, pos, end, PacketKind.DISCONNECT, _DISCONNECT_CODES, limits
    )
    return Disconnect(code, props)


def _auth(level: int, buf: bytes, pos: int, end: int, limits: PropertyLimits) -> Auth:
    code, props = _reason_and_properties(level, buf, pos, end, PacketKind.AUTH, _AUTH_CODES, limits)
    return Auth(code, props)


def _expect_end(pos: int, end: int, what: str) -> None:
    if pos != end:
        raise MalformedPacket(f"{what} has {end - pos} unexpected trailing bytes")


_DECODERS: dict[int, _PacketDecoder] = {
    2: _connack,
    4: _ack_decoder(Puback, PacketKind.PUBACK, _PUBACK_CODES),
    5: _ack_decoder(Pubrec, PacketKind.PUBREC, _PUBACK_CODES),
    6: _ack_decoder(Pubrel, PacketKind.PUBREL, _PUBREL_CODES),
    7: _ack_decoder(Pubcomp, PacketKind.PUBCOMP, _PUBREL_CODES),
    8: _subscribe,
    9: _suback,
    10: _unsubscribe,
    11: _unsuback,
    12: _pingreq,
    13: _pingresp,
    14: _disconnect,
    15: _auth,
}
