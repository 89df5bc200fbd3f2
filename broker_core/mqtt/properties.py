"""MQTT 5 properties (MQTT 5.0 section 2.2.2): identifiers, types, where each may appear.

One frozen ``Properties`` value holds every property; absent ones are ``None`` (or an
empty tuple for the two that may repeat). ``EMPTY`` is shared by every packet without
properties, so the common case allocates nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import IntEnum

from broker_core.errors import MalformedPacket, ProtocolError, ProtocolViolation
from broker_core.mqtt import wire
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.topics import validate_topic_name

__all__ = [
    "EMPTY",
    "NO_LIMITS",
    "PUBLISH_FORWARDED",
    "PacketKind",
    "Properties",
    "PropertyId",
    "PropertyLimitExceeded",
    "PropertyLimits",
    "decode_properties",
    "encode_properties",
]


class PropertyId(IntEnum):
    PAYLOAD_FORMAT_INDICATOR = 0x01
    MESSAGE_EXPIRY_INTERVAL = 0x02
    CONTENT_TYPE = 0x03
    RESPONSE_TOPIC = 0x08
    CORRELATION_DATA = 0x09
    SUBSCRIPTION_IDENTIFIER = 0x0B
    SESSION_EXPIRY_INTERVAL = 0x11
    ASSIGNED_CLIENT_IDENTIFIER = 0x12
    SERVER_KEEP_ALIVE = 0x13
    AUTHENTICATION_METHOD = 0x15
    AUTHENTICATION_DATA = 0x16
    REQUEST_PROBLEM_INFORMATION = 0x17
    WILL_DELAY_INTERVAL = 0x18
    REQUEST_RESPONSE_INFORMATION = 0x19
    RESPONSE_INFORMATION = 0x1A
    SERVER_REFERENCE = 0x1C
    REASON_STRING = 0x1F
    RECEIVE_MAXIMUM = 0x21
    TOPIC_ALIAS_MAXIMUM = 0x22
    TOPIC_ALIAS = 0x23
    MAXIMUM_QOS = 0x24
    RETAIN_AVAILABLE = 0x25
    USER_PROPERTY = 0x26
    MAXIMUM_PACKET_SIZE = 0x27
    WILDCARD_SUBSCRIPTION_AVAILABLE = 0x28
    SUBSCRIPTION_IDENTIFIER_AVAILABLE = 0x29
    SHARED_SUBSCRIPTION_AVAILABLE = 0x2A


class PacketKind(IntEnum):
    """Where a property block appears: the packet types plus the will properties."""

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
    DISCONNECT = 14
    AUTH = 15
    WILL = 16


@dataclass(frozen=True, slots=True, repr=False)
class Properties:
    payload_format_indicator: int | None = None
    message_expiry_interval: int | None = None
    content_type: str | None = None
    response_topic: str | None = None
    correlation_data: bytes | None = None
    subscription_identifiers: tuple[int, ...] = ()
    session_expiry_interval: int | None = None
    assigned_client_identifier: str | None = None
    server_keep_alive: int | None = None
    authentication_method: str | None = None
    authentication_data: bytes | None = None
    request_problem_information: int | None = None
    will_delay_interval: int | None = None
    request_response_information: int | None = None
    response_information: str | None = None
    server_reference: str | None = None
    reason_string: str | None = None
    receive_maximum: int | None = None
    topic_alias_maximum: int | None = None
    topic_alias: int | None = None
    maximum_qos: int | None = None
    retain_available: int | None = None
    user_properties: tuple[tuple[str, str], ...] = ()
    maximum_packet_size: int | None = None
    wildcard_subscription_available: int | None = None
    subscription_identifier_available: int | None = None
    shared_subscription_available: int | None = None
    # Cache of this value's encoding; properties are immutable and shared by reference,
    # so a message fanned out to many subscribers encodes its properties once.
    _encoded: bytes | None = field(default=None, init=False, repr=False, compare=False)

    def __bool__(self) -> bool:
        return self != EMPTY

    def __repr__(self) -> str:
        set_fields = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in _FIELD_NAMES
            if getattr(self, name) not in (None, ())
        )
        return f"Properties({set_fields})"

    def encoded(self) -> bytes:
        """The property block: its length as a varint, then the properties."""
        cached = self._encoded
        if cached is None:
            cached = encode_properties(self)
            object.__setattr__(self, "_encoded", cached)
        return cached

    def encoded_length(self) -> int:
        """``len(self.encoded())`` without keeping the encoding when it is not cached yet:
        what a held message (queued, delayed, a pending will) counts for its properties
        without holding them twice until it is sent."""
        cached = self._encoded
        return len(cached) if cached is not None else len(encode_properties(self))


_FIELD_NAMES = tuple(f.name for f in fields(Properties) if not f.name.startswith("_"))
EMPTY = Properties()

# Data types (MQTT 5.0 2.2.2.2).
_BYTE, _U16, _U32, _VARINT, _UTF8, _BINARY, _PAIR = range(7)

_P = PropertyId
_K = PacketKind
_ACKS = (_K.PUBACK, _K.PUBREC, _K.PUBREL, _K.PUBCOMP)
_WITH_REASON_STRING = (*_ACKS, _K.CONNACK, _K.SUBACK, _K.UNSUBACK, _K.DISCONNECT, _K.AUTH)

# id -> (attribute, type, packets where it may appear)
_TABLE: dict[int, tuple[str, int, frozenset[int]]] = {
    _P.PAYLOAD_FORMAT_INDICATOR: (
        "payload_format_indicator",
        _BYTE,
        frozenset((_K.PUBLISH, _K.WILL)),
    ),
    _P.MESSAGE_EXPIRY_INTERVAL: ("message_expiry_interval", _U32, frozenset((_K.PUBLISH, _K.WILL))),
    _P.CONTENT_TYPE: ("content_type", _UTF8, frozenset((_K.PUBLISH, _K.WILL))),
    _P.RESPONSE_TOPIC: ("response_topic", _UTF8, frozenset((_K.PUBLISH, _K.WILL))),
    _P.CORRELATION_DATA: ("correlation_data", _BINARY, frozenset((_K.PUBLISH, _K.WILL))),
    _P.SUBSCRIPTION_IDENTIFIER: (
        "subscription_identifiers",
        _VARINT,
        frozenset((_K.PUBLISH, _K.SUBSCRIBE)),
    ),
    _P.SESSION_EXPIRY_INTERVAL: (
        "session_expiry_interval",
        _U32,
        frozenset((_K.CONNECT, _K.CONNACK, _K.DISCONNECT)),
    ),
    _P.ASSIGNED_CLIENT_IDENTIFIER: ("assigned_client_identifier", _UTF8, frozenset((_K.CONNACK,))),
    _P.SERVER_KEEP_ALIVE: ("server_keep_alive", _U16, frozenset((_K.CONNACK,))),
    _P.AUTHENTICATION_METHOD: (
        "authentication_method",
        _UTF8,
        frozenset((_K.CONNECT, _K.CONNACK, _K.AUTH)),
    ),
    _P.AUTHENTICATION_DATA: (
        "authentication_data",
        _BINARY,
        frozenset((_K.CONNECT, _K.CONNACK, _K.AUTH)),
    ),
    _P.REQUEST_PROBLEM_INFORMATION: (
        "request_problem_information",
        _BYTE,
        frozenset((_K.CONNECT,)),
    ),
    _P.WILL_DELAY_INTERVAL: ("will_delay_interval", _U32, frozenset((_K.WILL,))),
    _P.REQUEST_RESPONSE_INFORMATION: (
        "request_response_information",
        _BYTE,
        frozenset((_K.CONNECT,)),
    ),
    _P.RESPONSE_INFORMATION: ("response_information", _UTF8, frozenset((_K.CONNACK,))),
    _P.SERVER_REFERENCE: ("server_reference", _UTF8, frozenset((_K.CONNACK, _K.DISCONNECT))),
    _P.REASON_STRING: ("reason_string", _UTF8, frozenset(_WITH_REASON_STRING)),
    _P.RECEIVE_MAXIMUM: ("receive_maximum", _U16, frozenset((_K.CONNECT, _K.CONNACK))),
    _P.TOPIC_ALIAS_MAXIMUM: ("topic_alias_maximum", _U16, frozenset((_K.CONNECT, _K.CONNACK))),
    _P.TOPIC_ALIAS: ("topic_alias", _U16, frozenset((_K.PUBLISH,))),
    _P.MAXIMUM_QOS: ("maximum_qos", _BYTE, frozenset((_K.CONNACK,))),
    _P.RETAIN_AVAILABLE: ("retain_available", _BYTE, frozenset((_K.CONNACK,))),
    _P.USER_PROPERTY: ("user_properties", _PAIR, frozenset(k for k in _K)),
    _P.MAXIMUM_PACKET_SIZE: ("maximum_packet_size", _U32, frozenset((_K.CONNECT, _K.CONNACK))),
    _P.WILDCARD_SUBSCRIPTION_AVAILABLE: (
        "wildcard_subscription_available",
        _BYTE,
        frozenset((_K.CONNACK,)),
    ),
    _P.SUBSCRIPTION_IDENTIFIER_AVAILABLE: (
        "subscription_identifier_available",
        _BYTE,
        frozenset((_K.CONNACK,)),
    ),
    _P.SHARED_SUBSCRIPTION_AVAILABLE: (
        "shared_subscription_available",
        _BYTE,
        frozenset((_K.CONNACK,)),
    ),
}

# Byte properties whose only values are 0 and 1 ("It is a Protocol Error to include a
# value other than 0 or 1"), and properties for which 0 is a Protocol Error.
_BOOLEAN_BYTES = frozenset(
    (
        _P.PAYLOAD_FORMAT_INDICATOR,
        _P.REQUEST_PROBLEM_INFORMATION,
        _P.REQUEST_RESPONSE_INFORMATION,
        _P.MAXIMUM_QOS,
        _P.RETAIN_AVAILABLE,
        _P.WILDCARD_SUBSCRIPTION_AVAILABLE,
        _P.SUBSCRIPTION_IDENTIFIER_AVAILABLE,
        _P.SHARED_SUBSCRIPTION_AVAILABLE,
    )
)
# (Topic Alias 0 is an error too, but one with its own reason code, 0x94: the session's.)
_NONZERO = frozenset((_P.RECEIVE_MAXIMUM, _P.MAXIMUM_PACKET_SIZE, _P.SUBSCRIPTION_IDENTIFIER))
# Encoding order: by identifier, the repeatable ones last.
_ENCODE_ORDER = sorted(_TABLE.items())
PUBLISH_FORWARDED = (
    "payload_format_indicator",
    "message_expiry_interval",
    "content_type",
    "response_topic",
    "correlation_data",
    "user_properties",
)


@dataclass(frozen=True, slots=True)
class PropertyLimits:
    """What one property block may hold: ``count`` properties, ``size`` bytes."""

    count: int
    size: int


NO_LIMITS = PropertyLimits(1 << 62, 1 << 62)


class PropertyLimitExceeded(ProtocolError):
    """A property block holds more properties or bytes than the receiver allows."""

    default_reason_code = ReasonCode.QUOTA_EXCEEDED


def decode_properties(
    buf: bytes, pos: int, end: int, kind: PacketKind, limits: PropertyLimits = NO_LIMITS
) -> tuple[Properties, int]:
    """Reads a property block at ``pos``; returns the properties and the position after it.

    A block larger than ``limits`` raises ``PropertyLimitExceeded`` (0x97) before, or as
    soon as, it is read that far: a packet of many properties costs little to refuse.
    """
    length, pos = wire.read_varint(buf, pos, end)
    if length == 0:
        return EMPTY, pos
    stop = pos + length
    if stop > end:
        raise MalformedPacket("property length runs past the end of the packet")
    if length > limits.size:
        raise PropertyLimitExceeded(f"{length} bytes of properties, more than {limits.size}")
    left = limits.count
    values: dict[str, object] = {}
    user: list[tuple[str, str]] = []
    sub_ids: list[int] = []
    while pos < stop:
        if not left:
            raise PropertyLimitExceeded(f"more than {limits.count} properties in {kind.name}")
        left -= 1
        ident, pos = wire.read_varint(buf, pos, stop)
        entry = _TABLE.get(ident)
        if entry is None:
            raise MalformedPacket(f"unknown property identifier 0x{ident:02X}")
        name, kind_of_value, allowed = entry
        if kind not in allowed:
            raise MalformedPacket(f"property {name} is not allowed in {kind.name}")
        value: object
        if kind_of_value == _BYTE:
            value, pos = wire.read_u8(buf, pos, stop)
        elif kind_of_value == _U16:
            value, pos = wire.read_u16(buf, pos, stop)
        elif kind_of_value == _U32:
            value, pos = wire.read_u32(buf, pos, stop)
        elif kind_of_value == _VARINT:
            value, pos = wire.read_varint(buf, pos, stop)
        elif kind_of_value == _UTF8:
            value, pos = wire.read_utf8(buf, pos, stop)
        elif kind_of_value == _BINARY:
            value, pos = wire.read_binary(buf, pos, stop)
        else:
            key, pos = wire.read_utf8(buf, pos, stop)
            val, pos = wire.read_utf8(buf, pos, stop)
            user.append((key, val))
            continue
        if ident in _BOOLEAN_BYTES and value not in (0, 1):
            raise ProtocolViolation(f"property {name} must be 0 or 1, got {value!r}")
        if ident in _NONZERO and value == 0:
            raise ProtocolViolation(f"property {name} must not be 0")
        if ident == _P.RESPONSE_TOPIC:
            validate_topic_name(value)  # type: ignore[arg-type]  # [MQTT-3.3.2-14]
            if not value:
                raise ProtocolViolation("empty response topic")
        if ident == _P.SUBSCRIPTION_IDENTIFIER:
            if sub_ids and kind != PacketKind.PUBLISH:
                raise ProtocolViolation("subscription identifier included more than once")
            sub_ids.append(value)  # type: ignore[arg-type]
            continue
        if name in values:
            raise ProtocolViolation(f"property {name} included more than once")
        values[name] = value
    if pos != stop:
        raise MalformedPacket("property block length does not match its contents")
    if user:
        values["user_properties"] = tuple(user)
    if sub_ids:
        values["subscription_identifiers"] = tuple(sub_ids)
    return Properties(**values), pos  # type: ignore[arg-type]


def encode_properties(props: Properties) -> bytes:
    """The property block of ``props``: varint length, then each present property."""
    if props is EMPTY:
        return b"\x00"
    parts: list[bytes] = []
    for ident, (name, kind_of_value, _allowed) in _ENCODE_ORDER:
        value = getattr(props, name)
        if value is None or value == ():
            continue
        if kind_of_value == _PAIR:
            for key, val in value:
                parts.append(b"\x26" + wire.encode_utf8(key) + wire.encode_utf8(val))
            continue
        if kind_of_value == _VARINT:
            for sub_id in value:
                parts.append(b"\x0b" + wire.encode_varint(sub_id))
            continue
        head = bytes((ident,))
        if kind_of_value == _BYTE:
            parts.append(head + bytes((value,)))
        elif kind_of_value == _U16:
            parts.append(head + value.to_bytes(2, "big"))
        elif kind_of_value == _U32:
            parts.append(head + value.to_bytes(4, "big"))
        elif kind_of_value == _UTF8:
            parts.append(head + wire.encode_utf8(value))
        else:
            parts.append(head + wire.encode_binary(value))
    body = b"".join(parts)
    return wire.encode_varint(len(body)) + body


def property_names() -> tuple[str, ...]:
    """Names of every property field, in declaration order (for tests and tools)."""
    return _FIELD_NAMES
