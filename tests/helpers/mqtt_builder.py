"""An independent builder and parser of MQTT packet bytes, for tests.

Written from the MQTT 3.1, 3.1.1 and 5.0 specifications alone, in the spirit of mosquitto's
``mosq_test.gen_*``: every function returns the exact bytes of one control packet, built field
by field so that a reader can check it against the specification's tables. It never imports
``broker_core``: the codec under test is judged against these bytes, not the other way round.

Protocol levels: ``3`` is MQTT 3.1 (protocol name ``MQIsdp``), ``4`` is MQTT 3.1.1 and ``5`` is
MQTT 5.0. Every ``gen_*`` function takes ``proto_ver`` (default 4).

Properties (MQTT 5) are given as ``bytes`` (an already encoded block, length included), as a
mapping of property names to values, or as a sequence of ``(name or id, value)`` pairs; see
:func:`props`. Repeatable properties (``user_property``, ``subscription_identifier``) take a
list in the mapping form.

Deliberately malformed input is built with :func:`raw_packet` (any first byte, any remaining
length, any width of its encoding up to five bytes), :func:`varint` with ``width``, and
:func:`utf8` given raw ``bytes`` (any content, any declared length).

:func:`parse_packet` reads one whole packet back into a :class:`Packet`; :func:`split_packet`
frames a byte stream.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

__all__ = [
    "PROPERTIES",
    "PROPERTY_IDS",
    "ConnackCode",
    "Packet",
    "PacketType",
    "ParseError",
    "PropType",
    "ReasonCode",
    "binary",
    "decode_varint",
    "fixed_header",
    "gen_auth",
    "gen_connack",
    "gen_connect",
    "gen_disconnect",
    "gen_pingreq",
    "gen_pingresp",
    "gen_puback",
    "gen_pubcomp",
    "gen_publish",
    "gen_pubrec",
    "gen_pubrel",
    "gen_suback",
    "gen_subscribe",
    "gen_unsuback",
    "gen_unsubscribe",
    "parse_packet",
    "prop",
    "props",
    "raw_packet",
    "raw_props",
    "split_packet",
    "sub_options",
    "u8",
    "u16",
    "u32",
    "utf8",
    "varint",
]


class PacketType(IntEnum):
    """MQTT control packet types (the high nibble of the first byte)."""

    RESERVED = 0
    CONNECT = 1
    CONNACK = 2
    PUBLISH = 3
    PUBACK = 4
    PUBREC = 5
    PUBREL = 6
    PUBCOMP = 7
    SUBSCRIBE = 8
    SUBACK = 9
    UNSUBSCRIBE = 10
    UNSUBACK = 11
    PINGREQ = 12
    PINGRESP = 13
    DISCONNECT = 14
    AUTH = 15


class ConnackCode(IntEnum):
    """MQTT 3.1 / 3.1.1 CONNACK return codes (section 3.2.2.3)."""

    ACCEPTED = 0x00
    UNACCEPTABLE_PROTOCOL_VERSION = 0x01
    IDENTIFIER_REJECTED = 0x02
    SERVER_UNAVAILABLE = 0x03
    BAD_USER_NAME_OR_PASSWORD = 0x04
    NOT_AUTHORIZED = 0x05


class ReasonCode(IntEnum):
    """MQTT 5.0 reason codes (section 2.4). Equal values are aliases; names follow the spec."""

    SUCCESS = 0x00
    NORMAL_DISCONNECTION = 0x00
    GRANTED_QOS_0 = 0x00
    GRANTED_QOS_1 = 0x01
    GRANTED_QOS_2 = 0x02
    DISCONNECT_WITH_WILL_MESSAGE = 0x04
    NO_MATCHING_SUBSCRIBERS = 0x10
    NO_SUBSCRIPTION_EXISTED = 0x11
    CONTINUE_AUTHENTICATION = 0x18
    RE_AUTHENTICATE = 0x19
    UNSPECIFIED_ERROR = 0x80
    MALFORMED_PACKET = 0x81
    PROTOCOL_ERROR = 0x82
    IMPLEMENTATION_SPECIFIC_ERROR = 0x83
    UNSUPPORTED_PROTOCOL_VERSION = 0x84
    CLIENT_IDENTIFIER_NOT_VALID = 0x85
    BAD_USER_NAME_OR_PASSWORD = 0x86
    NOT_AUTHORIZED = 0x87
    SERVER_UNAVAILABLE = 0x88
    SERVER_BUSY = 0x89
    BANNED = 0x8A
    SERVER_SHUTTING_DOWN = 0x8B
    BAD_AUTHENTICATION_METHOD = 0x8C
    KEEP_ALIVE_TIMEOUT = 0x8D
    SESSION_TAKEN_OVER = 0x8E
    TOPIC_FILTER_INVALID = 0x8F
    TOPIC_NAME_INVALID = 0x90
    PACKET_IDENTIFIER_IN_USE = 0x91
    PACKET_IDENTIFIER_NOT_FOUND = 0x92
    RECEIVE_MAXIMUM_EXCEEDED = 0x93
    TOPIC_ALIAS_INVALID = 0x94
    PACKET_TOO_LARGE = 0x95
    MESSAGE_RATE_TOO_HIGH = 0x96
    QUOTA_EXCEEDED = 0x97
    ADMINISTRATIVE_ACTION = 0x98
    PAYLOAD_FORMAT_INVALID = 0x99
    RETAIN_NOT_SUPPORTED = 0x9A
    QOS_NOT_SUPPORTED = 0x9B
    USE_ANOTHER_SERVER = 0x9C
    SERVER_MOVED = 0x9D
    SHARED_SUBSCRIPTIONS_NOT_SUPPORTED = 0x9E
    CONNECTION_RATE_EXCEEDED = 0x9F
    MAXIMUM_CONNECT_TIME = 0xA0
    SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED = 0xA1
    WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED = 0xA2


class PropType(IntEnum):
    """Wire types of MQTT 5 properties (section 2.2.2.2)."""

    BYTE = 1
    TWO_BYTE_INT = 2
    FOUR_BYTE_INT = 3
    VARINT = 4
    UTF8 = 5
    BINARY = 6
    STRING_PAIR = 7


# Section 2.2.2.2, Table 2-4: identifier -> (name, type). Names are the spec's, snake_cased.
PROPERTIES: dict[int, tuple[str, PropType]] = {
    0x01: ("payload_format_indicator", PropType.BYTE),
    0x02: ("message_expiry_interval", PropType.FOUR_BYTE_INT),
    0x03: ("content_type", PropType.UTF8),
    0x08: ("response_topic", PropType.UTF8),
    0x09: ("correlation_data", PropType.BINARY),
    0x0B: ("subscription_identifier", PropType.VARINT),
    0x11: ("session_expiry_interval", PropType.FOUR_BYTE_INT),
    0x12: ("assigned_client_identifier", PropType.UTF8),
    0x13: ("server_keep_alive", PropType.TWO_BYTE_INT),
    0x15: ("authentication_method", PropType.UTF8),
    0x16: ("authentication_data", PropType.BINARY),
    0x17: ("request_problem_information", PropType.BYTE),
    0x18: ("will_delay_interval", PropType.FOUR_BYTE_INT),
    0x19: ("request_response_information", PropType.BYTE),
    0x1A: ("response_information", PropType.UTF8),
    0x1C: ("server_reference", PropType.UTF8),
    0x1F: ("reason_string", PropType.UTF8),
    0x21: ("receive_maximum", PropType.TWO_BYTE_INT),
    0x22: ("topic_alias_maximum", PropType.TWO_BYTE_INT),
    0x23: ("topic_alias", PropType.TWO_BYTE_INT),
    0x24: ("maximum_qos", PropType.BYTE),
    0x25: ("retain_available", PropType.BYTE),
    0x26: ("user_property", PropType.STRING_PAIR),
    0x27: ("maximum_packet_size", PropType.FOUR_BYTE_INT),
    0x28: ("wildcard_subscription_available", PropType.BYTE),
    0x29: ("subscription_identifier_available", PropType.BYTE),
    0x2A: ("shared_subscription_available", PropType.BYTE),
}
PROPERTY_IDS: dict[str, int] = {name: pid for pid, (name, _) in PROPERTIES.items()}
# Only these may appear more than once in one packet (user properties everywhere, subscription
# identifiers in a PUBLISH sent by the server).
REPEATABLE = frozenset({"user_property", "subscription_identifier"})

_PROTOCOL_NAMES = {3: b"MQIsdp", 4: b"MQTT", 5: b"MQTT"}


class ParseError(ValueError):
    """The bytes given to :func:`parse_packet` / :func:`split_packet` are not a valid packet."""


# ---------------------------------------------------------------------------------------------
# Data representation (section 1.5)
# ---------------------------------------------------------------------------------------------


def u8(value: int) -> bytes:
    """One byte."""
    return struct.pack("!B", value)


def u16(value: int) -> bytes:
    """Two Byte Integer, big-endian (1.5.2)."""
    return struct.pack("!H", value)


def u32(value: int) -> bytes:
    """Four Byte Integer, big-endian (1.5.3)."""
    return struct.pack("!I", value)


def varint(value: int, *, width: int | None = None) -> bytes:
    """Variable Byte Integer (1.5.5 / 2.2.3 of 3.1.1).

    With ``width``, pads the encoding with continuation bytes to exactly ``width`` bytes
    (1..5): a non-minimal or over-long (5-byte) encoding, for malformed-input tests.
    """
    if value < 0:
        raise ValueError(f"varint must be >= 0, got {value}")
    out = bytearray()
    while True:
        digit = value % 128
        value //= 128
        out.append(digit)
        if value == 0:
            break
    if width is not None:
        if not 1 <= width <= 5 or width < len(out):
            raise ValueError(f"cannot encode in {width} bytes")
        out.extend(b"\x00" * (width - len(out)))
    for i in range(len(out) - 1):
        out[i] |= 0x80
    return bytes(out)


def decode_varint(data: bytes, offset: int = 0) -> tuple[int, int]:
    """Decode a Variable Byte Integer at ``offset``: ``(value, offset after it)``.

    Raises :class:`ParseError` when it runs past the end of ``data`` or past four bytes.
    """
    value = 0
    for i in range(4):
        if offset + i >= len(data):
            raise ParseError("truncated variable byte integer")
        byte = data[offset + i]
        value += (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, offset + i + 1
    raise ParseError("variable byte integer longer than four bytes")


def utf8(value: str | bytes, *, length: int | None = None) -> bytes:
    """UTF-8 Encoded String (1.5.4): a two-byte length, then the bytes.

    ``bytes`` are written as given (for ill-formed UTF-8, U+0000, over-long forms); ``length``
    overrides the declared length.
    """
    data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    return u16(len(data) if length is None else length) + data


def binary(value: bytes, *, length: int | None = None) -> bytes:
    """Binary Data (1.5.6): a two-byte length, then the bytes."""
    return u16(len(value) if length is None else length) + bytes(value)


def fixed_header(
    packet_type: int, flags: int, remaining_length: int, *, width: int | None = None
) -> bytes:
    """The fixed header: type << 4 | flags, then the Remaining Length as a varint."""
    return u8(((packet_type & 0x0F) << 4) | (flags & 0x0F)) + varint(remaining_length, width=width)


def raw_packet(
    first_byte: int,
    body: bytes = b"",
    *,
    remaining_length: int | None = None,
    width: int | None = None,
) -> bytes:
    """A packet with any first byte (type and flags), for malformed-input tests.

    ``remaining_length`` overrides the declared length (which is otherwise ``len(body)``),
    ``width`` forces the number of bytes of its encoding (up to 5).
    """
    length = len(body) if remaining_length is None else remaining_length
    return u8(first_byte) + varint(length, width=width) + body


def _packet(packet_type: PacketType, flags: int, body: bytes) -> bytes:
    return fixed_header(packet_type, flags, len(body)) + body


# ---------------------------------------------------------------------------------------------
# Properties (MQTT 5, section 2.2.2)
# ---------------------------------------------------------------------------------------------

PropsArg = bytes | Mapping[str, Any] | Sequence[tuple[int | str, Any]] | None


def _property_id(key: int | str) -> int:
    if isinstance(key, str):
        try:
            return PROPERTY_IDS[key]
        except KeyError:
            raise ValueError(f"unknown property name {key!r}") from None
    return key


def prop(key: int | str, value: Any, *, prop_type: PropType | None = None) -> bytes:
    """One encoded property: identifier (a varint) then the value in its type.

    ``key`` is a name or an identifier; an unknown identifier needs ``prop_type``.
    """
    pid = _property_id(key)
    if prop_type is None:
        if pid not in PROPERTIES:
            raise ValueError(f"unknown property id 0x{pid:02X}: give prop_type")
        prop_type = PROPERTIES[pid][1]
    head = varint(pid)
    if prop_type is PropType.BYTE:
        return head + u8(value)
    if prop_type is PropType.TWO_BYTE_INT:
        return head + u16(value)
    if prop_type is PropType.FOUR_BYTE_INT:
        return head + u32(value)
    if prop_type is PropType.VARINT:
        return head + varint(value)
    if prop_type is PropType.UTF8:
        return head + utf8(value)
    if prop_type is PropType.BINARY:
        return head + binary(value)
    key_text, value_text = value
    return head + utf8(key_text) + utf8(value_text)


def _pairs(properties: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    for name, value in properties.items():
        if (
            name in REPEATABLE
            and isinstance(value, list | tuple)
            and not (name == "user_property" and len(value) == 2 and isinstance(value[0], str))
        ):
            for item in value:
                yield name, item
        else:
            yield name, value


def props(*pairs: tuple[int | str, Any], **named: Any) -> bytes:
    """A whole property block: Property Length (varint) then the properties, in order.

    ``props()`` is the empty block ``b"\\x00"``. Pairs come first, in the order given
    (duplicates allowed, for malformed tests), then keyword properties in keyword order::

        props(("user_property", ("a", "1")), message_expiry_interval=60,
              user_property=[("k", "v"), ("k", "w")])
    """
    body = b"".join(prop(key, value) for key, value in pairs)
    body += b"".join(prop(name, value) for name, value in _pairs(named))
    return varint(len(body)) + body


def raw_props(body: bytes, *, length: int | None = None) -> bytes:
    """A property block from raw property bytes, optionally lying about its length."""
    return varint(len(body) if length is None else length) + body


def _props_block(properties: PropsArg, proto_ver: int) -> bytes:
    if proto_ver < 5:
        if properties is not None:
            raise ValueError("properties exist only in MQTT 5 (proto_ver=5)")
        return b""
    if properties is None:
        return b"\x00"
    if isinstance(properties, bytes | bytearray):
        return bytes(properties)
    if isinstance(properties, Mapping):
        return props(**properties)
    return props(*properties)


# ---------------------------------------------------------------------------------------------
# Control packets (section 3)
# ---------------------------------------------------------------------------------------------


def gen_connect(
    client_id: str | bytes = "",
    *,
    proto_ver: int = 4,
    clean_session: bool = True,
    keepalive: int = 60,
    username: str | bytes | None = None,
    password: bytes | str | None = None,
    will_topic: str | bytes | None = None,
    will_payload: bytes | str = b"",
    will_qos: int = 0,
    will_retain: bool = False,
    will_properties: PropsArg = None,
    properties: PropsArg = None,
    proto_name: str | bytes | None = None,
    connect_flags: int | None = None,
    reserved_flag: bool = False,
    header_flags: int = 0,
) -> bytes:
    """CONNECT (3.1). A Will is present when ``will_topic`` is not None.

    ``connect_flags`` replaces the computed Connect Flags byte (the payload still follows the
    arguments); ``reserved_flag`` sets bit 0; ``header_flags`` sets the fixed-header flags.
    ``clean_session`` is Clean Start in MQTT 5.
    """
    name = _PROTOCOL_NAMES.get(proto_ver, b"MQTT") if proto_name is None else proto_name
    flags = 0
    if username is not None:
        flags |= 0x80
    if password is not None:
        flags |= 0x40
    if will_topic is not None:
        flags |= 0x04 | ((will_qos & 0x03) << 3) | (0x20 if will_retain else 0)
    if clean_session:
        flags |= 0x02
    if reserved_flag:
        flags |= 0x01
    if connect_flags is not None:
        flags = connect_flags
    body = utf8(name) + u8(proto_ver) + u8(flags) + u16(keepalive)
    body += _props_block(properties, proto_ver)
    body += utf8(client_id)
    if will_topic is not None:
        body += _props_block(will_properties, proto_ver)
        body += utf8(will_topic)
        body += binary(will_payload.encode() if isinstance(will_payload, str) else will_payload)
    if username is not None:
        body += utf8(username)
    if password is not None:
        body += binary(password.encode() if isinstance(password, str) else password)
    return _packet(PacketType.CONNECT, header_flags, body)


def gen_connack(
    session_present: bool = False,
    reason_code: int = 0,
    *,
    proto_ver: int = 4,
    properties: PropsArg = None,
) -> bytes:
    """CONNACK (3.2): acknowledge flags, return / reason code, properties (MQTT 5).

    MQTT 3.1 (``proto_ver=3``) has no session present flag: that byte is reserved, 0."""
    body = u8(0x01 if session_present and proto_ver != 3 else 0x00) + u8(reason_code)
    body += _props_block(properties, proto_ver)
    return _packet(PacketType.CONNACK, 0, body)


def gen_publish(
    topic: str | bytes,
    payload: bytes | str = b"",
    *,
    qos: int = 0,
    retain: bool = False,
    dup: bool = False,
    mid: int | None = None,
    proto_ver: int = 4,
    properties: PropsArg = None,
) -> bytes:
    """PUBLISH (3.3). The Packet Identifier is written when ``mid`` is given.

    ``qos`` may be 3 (invalid) for malformed tests; QoS 1 and 2 need ``mid``.
    """
    if qos in (1, 2) and mid is None:
        raise ValueError("QoS 1 and 2 PUBLISH need a packet identifier (mid)")
    flags = (0x08 if dup else 0) | ((qos & 0x03) << 1) | (0x01 if retain else 0)
    body = utf8(topic)
    if mid is not None:
        body += u16(mid)
    body += _props_block(properties, proto_ver)
    body += payload.encode() if isinstance(payload, str) else bytes(payload)
    return _packet(PacketType.PUBLISH, flags, body)


def _ack(
    packet_type: PacketType,
    flags: int,
    mid: int,
    reason_code: int | None,
    proto_ver: int,
    properties: PropsArg,
) -> bytes:
    body = u16(mid)
    if proto_ver >= 5:
        # 3.4.2.1: the Reason Code and Property Length can be omitted when the Reason Code is
        # 0x00 and there are no properties; the Property Length alone can be omitted likewise.
        if reason_code is not None or properties is not None:
            body += u8(0 if reason_code is None else reason_code)
        if properties is not None:
            body += _props_block(properties, proto_ver)
    elif reason_code is not None or properties is not None:
        raise ValueError("reason codes and properties in acks exist only in MQTT 5")
    return _packet(packet_type, flags, body)


def gen_puback(
    mid: int, reason_code: int | None = None, *, proto_ver: int = 4, properties: PropsArg = None
) -> bytes:
    """PUBACK (3.4). In MQTT 5 the short form (no reason code) is used unless one is given."""
    return _ack(PacketType.PUBACK, 0, mid, reason_code, proto_ver, properties)


def gen_pubrec(
    mid: int, reason_code: int | None = None, *, proto_ver: int = 4, properties: PropsArg = None
) -> bytes:
    """PUBREC (3.5)."""
    return _ack(PacketType.PUBREC, 0, mid, reason_code, proto_ver, properties)


def gen_pubrel(
    mid: int,
    reason_code: int | None = None,
    *,
    proto_ver: int = 4,
    properties: PropsArg = None,
    flags: int = 0x02,
) -> bytes:
    """PUBREL (3.6). Fixed-header flags are 0010 unless ``flags`` says otherwise."""
    return _ack(PacketType.PUBREL, flags, mid, reason_code, proto_ver, properties)


def gen_pubcomp(
    mid: int, reason_code: int | None = None, *, proto_ver: int = 4, properties: PropsArg = None
) -> bytes:
    """PUBCOMP (3.7)."""
    return _ack(PacketType.PUBCOMP, 0, mid, reason_code, proto_ver, properties)


def sub_options(
    qos: int = 0,
    *,
    no_local: bool = False,
    retain_as_published: bool = False,
    retain_handling: int = 0,
    reserved: int = 0,
) -> int:
    """The Subscription Options byte (3.8.3.1); ``reserved`` sets bits 6-7 (malformed)."""
    return (
        (qos & 0x03)
        | (0x04 if no_local else 0)
        | (0x08 if retain_as_published else 0)
        | ((retain_handling & 0x03) << 4)
        | ((reserved & 0x03) << 6)
    )


def gen_subscribe(
    mid: int,
    topics: str | bytes | Sequence[str | bytes | tuple[str | bytes, int]],
    qos: int = 0,
    *,
    proto_ver: int = 4,
    properties: PropsArg = None,
    flags: int = 0x02,
) -> bytes:
    """SUBSCRIBE (3.8).

    ``topics`` is one filter (with ``qos``), a list of filters (each with ``qos``), or a list
    of ``(filter, options byte)`` pairs, the byte being a QoS or :func:`sub_options`. An empty
    list gives a SUBSCRIBE with no payload (malformed).
    """
    if isinstance(topics, str | bytes):
        entries: list[tuple[str | bytes, int]] = [(topics, qos)]
    else:
        entries = [item if isinstance(item, tuple) else (item, qos) for item in topics]
    body = u16(mid) + _props_block(properties, proto_ver)
    for topic_filter, options in entries:
        body += utf8(topic_filter) + u8(options)
    return _packet(PacketType.SUBSCRIBE, flags, body)


def gen_suback(
    mid: int,
    reason_codes: int | Sequence[int],
    *,
    proto_ver: int = 4,
    properties: PropsArg = None,
) -> bytes:
    """SUBACK (3.9): one return / reason code per filter."""
    codes = [reason_codes] if isinstance(reason_codes, int) else list(reason_codes)
    body = u16(mid) + _props_block(properties, proto_ver) + bytes(codes)
    return _packet(PacketType.SUBACK, 0, body)


def gen_unsubscribe(
    mid: int,
    topics: str | bytes | Sequence[str | bytes],
    *,
    proto_ver: int = 4,
    properties: PropsArg = None,
    flags: int = 0x02,
) -> bytes:
    """UNSUBSCRIBE (3.10). An empty list gives an UNSUBSCRIBE with no payload (malformed)."""
    entries = [topics] if isinstance(topics, str | bytes) else list(topics)
    body = u16(mid) + _props_block(properties, proto_ver)
    body += b"".join(utf8(topic_filter) for topic_filter in entries)
    return _packet(PacketType.UNSUBSCRIBE, flags, body)


def gen_unsuback(
    mid: int,
    reason_codes: int | Sequence[int] | None = None,
    *,
    proto_ver: int = 4,
    properties: PropsArg = None,
) -> bytes:
    """UNSUBACK (3.11). MQTT 3.x has no payload; MQTT 5 has one reason code per filter."""
    body = u16(mid)
    if proto_ver >= 5:
        codes = (
            []
            if reason_codes is None
            else [reason_codes]
            if isinstance(reason_codes, int)
            else list(reason_codes)
        )
        body += _props_block(properties, proto_ver) + bytes(codes)
    elif reason_codes is not None:
        raise ValueError("UNSUBACK reason codes exist only in MQTT 5")
    return _packet(PacketType.UNSUBACK, 0, body)


def gen_pingreq() -> bytes:
    """PINGREQ (3.12)."""
    return _packet(PacketType.PINGREQ, 0, b"")


def gen_pingresp() -> bytes:
    """PINGRESP (3.13)."""
    return _packet(PacketType.PINGRESP, 0, b"")


def _reason_and_props(reason_code: int | None, properties: PropsArg) -> bytes:
    if reason_code is None and properties is None:
        return b""
    body = u8(0 if reason_code is None else reason_code)
    if properties is not None:
        body += _props_block(properties, 5)
    return body


def gen_disconnect(
    reason_code: int | None = None,
    *,
    proto_ver: int = 4,
    properties: PropsArg = None,
    flags: int = 0,
) -> bytes:
    """DISCONNECT (3.14). In MQTT 5 the reason code and properties are omitted when absent."""
    if proto_ver < 5:
        if reason_code is not None or properties is not None:
            raise ValueError("DISCONNECT reason codes and properties exist only in MQTT 5")
        return _packet(PacketType.DISCONNECT, flags, b"")
    return _packet(PacketType.DISCONNECT, flags, _reason_and_props(reason_code, properties))


def gen_auth(
    reason_code: int | None = None, *, properties: PropsArg = None, flags: int = 0
) -> bytes:
    """AUTH (3.15, MQTT 5 only)."""
    return _packet(PacketType.AUTH, flags, _reason_and_props(reason_code, properties))


# ---------------------------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------------------------


@dataclass
class Packet:
    """One parsed packet. Fields that do not apply to its type keep their defaults."""

    type: int
    flags: int
    raw: bytes
    remaining_length: int
    # PUBLISH fixed-header flags
    dup: bool = False
    qos: int = 0
    retain: bool = False
    packet_id: int | None = None
    # PUBLISH
    topic: str | None = None
    payload: bytes = b""
    # CONNACK
    session_present: bool | None = None
    # CONNACK return code / MQTT 5 reason code of CONNACK, acks, DISCONNECT, AUTH
    reason_code: int | None = None
    # SUBACK / UNSUBACK (MQTT 5)
    reason_codes: list[int] = field(default_factory=list)
    # MQTT 5 properties: name -> value; user_property and subscription_identifier -> lists
    properties: dict[str, Any] = field(default_factory=dict)
    property_list: list[tuple[str, Any]] = field(default_factory=list)
    # CONNECT
    protocol_name: str | None = None
    protocol_level: int | None = None
    connect_flags: int | None = None
    keepalive: int | None = None
    client_id: str | None = None
    will_properties: dict[str, Any] = field(default_factory=dict)
    will_topic: str | None = None
    will_payload: bytes | None = None
    username: str | None = None
    password: bytes | None = None
    # SUBSCRIBE: (filter, options byte); UNSUBSCRIBE: (filter, 0)
    subscriptions: list[tuple[str, int]] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The packet type's name, e.g. ``"PUBLISH"``."""
        return PacketType(self.type).name

    @property
    def clean_session(self) -> bool:
        """CONNECT: the Clean Session / Clean Start flag."""
        return bool((self.connect_flags or 0) & 0x02)

    @property
    def user_properties(self) -> list[tuple[str, str]]:
        """MQTT 5 user properties in wire order."""
        return list(self.properties.get("user_property", []))

    def __repr__(self) -> str:
        shown = {
            "packet_id": self.packet_id,
            "topic": self.topic,
            "reason_code": self.reason_code,
            "session_present": self.session_present,
        }
        extra = ", ".join(f"{k}={v!r}" for k, v in shown.items() if v is not None)
        if self.type == PacketType.PUBLISH:
            extra += f", qos={self.qos}, retain={self.retain}, dup={self.dup}"
            extra += f", payload={self.payload[:40]!r}"
        if self.reason_codes:
            extra += f", reason_codes={self.reason_codes!r}"
        if self.properties:
            extra += f", properties={self.properties!r}"
        return f"<{self.name} {extra.lstrip(', ')}>"


class _Reader:
    def __init__(self, data: bytes, offset: int = 0) -> None:
        self.data = data
        self.pos = offset

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n > self.remaining():
            raise ParseError(f"truncated {what}: need {n} bytes, have {self.remaining()}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u16(self, what: str) -> int:
        return int(struct.unpack("!H", self.take(2, what))[0])

    def u32(self, what: str) -> int:
        return int(struct.unpack("!I", self.take(4, what))[0])

    def varint(self, what: str) -> int:
        try:
            value, self.pos = decode_varint(self.data, self.pos)
        except ParseError as exc:
            raise ParseError(f"{what}: {exc}") from None
        return value

    def binary(self, what: str) -> bytes:
        return self.take(self.u16(what), what)

    def utf8(self, what: str) -> str:
        data = self.binary(what)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"{what} is not well-formed UTF-8: {data!r}") from exc

    def properties(self, strict: bool) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
        length = self.varint("property length")
        end = self.pos + length
        if end > len(self.data):
            raise ParseError(f"property length {length} runs past the packet")
        values: dict[str, Any] = {}
        ordered: list[tuple[str, Any]] = []
        while self.pos < end:
            pid = self.varint("property identifier")
            if pid not in PROPERTIES:
                raise ParseError(f"unknown property identifier 0x{pid:02X}")
            name, prop_type = PROPERTIES[pid]
            value: Any
            if prop_type is PropType.BYTE:
                value = self.u8(name)
            elif prop_type is PropType.TWO_BYTE_INT:
                value = self.u16(name)
            elif prop_type is PropType.FOUR_BYTE_INT:
                value = self.u32(name)
            elif prop_type is PropType.VARINT:
                value = self.varint(name)
            elif prop_type is PropType.UTF8:
                value = self.utf8(name)
            elif prop_type is PropType.BINARY:
                value = self.binary(name)
            else:
                value = (self.utf8(name + " key"), self.utf8(name + " value"))
            ordered.append((name, value))
            if name in REPEATABLE:
                values.setdefault(name, []).append(value)
            elif name in values and strict:
                raise ParseError(f"property {name} appears more than once")
            else:
                values[name] = value
        if self.pos != end:
            raise ParseError("properties overrun the property length")
        return values, ordered


# Section 2.1.3 (5.0) / 2.2.2 (3.1.1): required fixed-header flags, PUBLISH excepted.
_REQUIRED_FLAGS = {t: 0 for t in PacketType} | {
    PacketType.PUBREL: 0x02,
    PacketType.SUBSCRIBE: 0x02,
    PacketType.UNSUBSCRIBE: 0x02,
}


def split_packet(buffer: bytes) -> tuple[bytes, bytes] | None:
    """Frame a stream: ``(first whole packet, rest)``, or None while the packet is incomplete."""
    if len(buffer) < 2:
        return None
    try:
        length, offset = decode_varint(buffer, 1)
    except ParseError as exc:
        if "truncated" in str(exc):
            return None
        raise
    end = offset + length
    if len(buffer) < end:
        return None
    return bytes(buffer[:end]), bytes(buffer[end:])


def parse_packet(data: bytes, protocol_level: int = 4, *, strict: bool = True) -> Packet:
    """Parse exactly one whole packet sent at ``protocol_level`` (3, 4 or 5).

    With ``strict`` (the default), reserved fixed-header flags, QoS 3, trailing bytes and
    duplicated non-repeatable properties raise :class:`ParseError`.
    """
    if len(data) < 2:
        raise ParseError("a packet has at least two bytes")
    first = data[0]
    packet_type, flags = first >> 4, first & 0x0F
    length, offset = decode_varint(data, 1)
    if offset + length != len(data):
        raise ParseError(
            f"remaining length {length} does not match {len(data) - offset} bytes given"
        )
    v5 = protocol_level >= 5
    if packet_type == PacketType.RESERVED or (packet_type == PacketType.AUTH and not v5):
        raise ParseError(f"reserved packet type {packet_type}")
    ptype = PacketType(packet_type)
    if strict and ptype is not PacketType.PUBLISH and flags != _REQUIRED_FLAGS[ptype]:
        raise ParseError(f"{ptype.name} with reserved flags 0x{flags:X}")
    pkt = Packet(type=ptype, flags=flags, raw=bytes(data), remaining_length=length)
    reader = _Reader(data, offset)
    parser = _PARSERS[ptype]
    parser(pkt, reader, v5, strict)
    if reader.remaining() and strict:
        raise ParseError(f"{reader.remaining()} unexpected trailing bytes in {ptype.name}")
    return pkt


def _parse_connect(pkt: Packet, r: _Reader, v5: bool, strict: bool) -> None:
    pkt.protocol_name = r.utf8("protocol name")
    pkt.protocol_level = r.u8("protocol level")
    v5 = pkt.protocol_level >= 5
    pkt.connect_flags = flags = r.u8("connect flags")
    pkt.keepalive = r.u16("keep alive")
    if v5:
        pkt.properties, pkt.property_list = r.properties(strict)
    pkt.client_id = r.utf8("client identifier")
    if flags & 0x04:
        if v5:
            pkt.will_properties, _ = r.properties(strict)
        pkt.will_topic = r.utf8("will topic")
        pkt.will_payload = r.binary("will payload")
    pkt.qos = (flags >> 3) & 0x03
    pkt.retain = bool(flags & 0x20)
    if flags & 0x80:
        pkt.username = r.utf8("user name")
    if flags & 0x40:
        pkt.password = r.binary("password")


def _parse_connack(pkt: Packet, r: _Reader, v5: bool, strict: bool) -> None:
    ack_flags = r.u8("connack flags")
    if strict and ack_flags & 0xFE:
        raise ParseError(f"CONNACK reserved flag bits set: 0x{ack_flags:02X}")
    pkt.session_present = bool(ack_flags & 0x01)
    pkt.reason_code = r.u8("connack return code")
    if v5 and r.remaining():
        pkt.properties, pkt.property_list = r.properties(strict)


def _parse_publish(pkt: Packet, r: _Reader, v5: bool, strict: bool) -> None:
    pkt.dup = bool(pkt.flags & 0x08)
    pkt.qos = (pkt.flags >> 1) & 0x03
    pkt.retain = bool(pkt.flags & 0x01)
    if pkt.qos == 3 and strict:
        raise ParseError("PUBLISH with QoS 3")
    pkt.topic = r.utf8("topic name")
    if pkt.qos > 0:
        pkt.packet_id = r.u16("packet identifier")
    if v5:
        pkt.properties, pkt.property_list = r.properties(strict)
    pkt.payload = r.take(r.remaining(), "payload")


def _parse_ack(pkt: Packet, r: _Reader, v5: bool, strict: bool) -> None:
    pkt.packet_id = r.u16("packet identifier")
    if v5:
        pkt.reason_code = r.u8("reason code") if r.remaining() else 0
        if r.remaining():
            pkt.properties, pkt.property_list = r.properties(strict)


def _parse_subscribe(pkt: Packet, r: _Reader, v5: bool, strict: bool) -> None:
    pkt.packet_id = r.u16("packet identifier")
    if v5:
        pkt.properties, pkt.property_list = r.properties(strict)
    while r.remaining():
        topic_filter = r.utf8("topic filter")
        pkt.subscriptions.append((topic_filter, r.u8("subscription options")))


def _parse_unsubscribe(pkt: Packet, r: _Reader, v5: bool, strict: bool) -> None:
    pkt.packet_id = r.u16("packet identifier")
    if v5:
        pkt.properties, pkt.property_list = r.properties(strict)
    while r.remaining():
        pkt.subscriptions.append((r.utf8("topic filter"), 0))


def _parse_suback(pkt: Packet, r: _Reader, v5: bool, strict: bool) -> None:
    pkt.packet_id = r.u16("packet identifier")
    if v5:
        pkt.properties, pkt.property_list = r.properties(strict)
    pkt.reason_codes = list(r.take(r.remaining(), "reason codes"))
    if pkt.reason_codes:
        pkt.reason_code = pkt.reason_codes[0]


def _parse_unsuback(pkt: Packet, r: _Reader, v5: bool, strict: bool) -> None:
    pkt.packet_id = r.u16("packet identifier")
    if v5:
        pkt.properties, pkt.property_list = r.properties(strict)
        pkt.reason_codes = list(r.take(r.remaining(), "reason codes"))
        if pkt.reason_codes:
            pkt.reason_code = pkt.reason_codes[0]


def _parse_empty(pkt: Packet, r: _Reader, v5: bool, strict: bool) -> None:
    if r.remaining() and strict:
        raise ParseError(f"{pkt.name} has a remaining length of {pkt.remaining_length}")


def _parse_disconnect(pkt: Packet, r: _Reader, v5: bool, strict: bool) -> None:
    if not v5:
        _parse_empty(pkt, r, v5, strict)
        return
    pkt.reason_code = r.u8("reason code") if r.remaining() else 0
    if r.remaining():
        pkt.properties, pkt.property_list = r.properties(strict)


_PARSERS = {
    PacketType.CONNECT: _parse_connect,
    PacketType.CONNACK: _parse_connack,
    PacketType.PUBLISH: _parse_publish,
    PacketType.PUBACK: _parse_ack,
    PacketType.PUBREC: _parse_ack,
    PacketType.PUBREL: _parse_ack,
    PacketType.PUBCOMP: _parse_ack,
    PacketType.SUBSCRIBE: _parse_subscribe,
    PacketType.SUBACK: _parse_suback,
    PacketType.UNSUBSCRIBE: _parse_unsubscribe,
    PacketType.UNSUBACK: _parse_unsuback,
    PacketType.PINGREQ: _parse_empty,
    PacketType.PINGRESP: _parse_empty,
    PacketType.DISCONNECT: _parse_disconnect,
    PacketType.AUTH: _parse_disconnect,
}
