"""The fifteen MQTT control packets, one frozen slotted dataclass each.

Field names follow the specifications. Fields that exist only in MQTT 5 (reason
codes, properties) have defaults, so the same class serves protocol levels 3, 4 and 5;
the codec ignores what a level does not carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from broker_core.mqtt.fastinit import frozen_factory
from broker_core.mqtt.properties import EMPTY, Properties

__all__ = [
    "PROTOCOL_LEVELS",
    "Auth",
    "Connack",
    "Connect",
    "Disconnect",
    "Packet",
    "PacketType",
    "Pingreq",
    "Pingresp",
    "Puback",
    "Pubcomp",
    "Publish",
    "Pubrec",
    "Pubrel",
    "QoS",
    "RetainHandling",
    "Suback",
    "Subscribe",
    "SubscriptionOptions",
    "TopicSubscription",
    "Unsuback",
    "Unsubscribe",
    "Will",
]

MQTT_3_1 = 3
MQTT_3_1_1 = 4
MQTT_5 = 5
PROTOCOL_LEVELS = (MQTT_3_1, MQTT_3_1_1, MQTT_5)


class PacketType(IntEnum):
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


class QoS(IntEnum):
    AT_MOST_ONCE = 0
    AT_LEAST_ONCE = 1
    EXACTLY_ONCE = 2


class RetainHandling(IntEnum):
    SEND_ON_SUBSCRIBE = 0
    SEND_IF_NEW_SUBSCRIPTION = 1
    DO_NOT_SEND = 2


@dataclass(frozen=True, slots=True)
class Will:
    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    properties: Properties = EMPTY


@dataclass(frozen=True, slots=True)
class Connect:
    client_id: str
    protocol_level: int = MQTT_3_1_1
    clean_start: bool = True
    keep_alive: int = 60
    username: str | None = None
    password: bytes | None = None
    will: Will | None = None
    properties: Properties = EMPTY
    protocol_name: str = "MQTT"

    packet_type = PacketType.CONNECT


@dataclass(frozen=True, slots=True)
class Connack:
    session_present: bool = False
    reason_code: int = 0
    properties: Properties = EMPTY

    packet_type = PacketType.CONNACK


@dataclass(frozen=True, slots=True)
class Publish:
    topic: str
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int | None = None
    properties: Properties = EMPTY
    # The packet's bytes as received, kept by the decoder for QoS 0 so that a message
    # forwarded unchanged is not encoded again. Not part of the packet's value.
    raw: bytes | None = field(default=None, compare=False, repr=False)

    packet_type = PacketType.PUBLISH


@dataclass(frozen=True, slots=True)
class Puback:
    packet_id: int
    reason_code: int = 0
    properties: Properties = EMPTY

    packet_type = PacketType.PUBACK


@dataclass(frozen=True, slots=True)
class Pubrec:
    packet_id: int
    reason_code: int = 0
    properties: Properties = EMPTY

    packet_type = PacketType.PUBREC


@dataclass(frozen=True, slots=True)
class Pubrel:
    packet_id: int
    reason_code: int = 0
    properties: Properties = EMPTY

    packet_type = PacketType.PUBREL


@dataclass(frozen=True, slots=True)
class Pubcomp:
    packet_id: int
    reason_code: int = 0
    properties: Properties = EMPTY

    packet_type = PacketType.PUBCOMP


@dataclass(frozen=True, slots=True)
class SubscriptionOptions:
    """The Subscription Options byte (MQTT 5.0 3.8.3.1); 3.1.1 uses only ``qos``."""

    qos: int = 0
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = RetainHandling.SEND_ON_SUBSCRIBE


DEFAULT_OPTIONS = SubscriptionOptions()


@dataclass(frozen=True, slots=True)
class TopicSubscription:
    topic_filter: str
    options: SubscriptionOptions = DEFAULT_OPTIONS


@dataclass(frozen=True, slots=True)
class Subscribe:
    packet_id: int
    subscriptions: tuple[TopicSubscription, ...]
    properties: Properties = EMPTY

    packet_type = PacketType.SUBSCRIBE


@dataclass(frozen=True, slots=True)
class Suback:
    packet_id: int
    reason_codes: tuple[int, ...]
    properties: Properties = EMPTY

    packet_type = PacketType.SUBACK


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    packet_id: int
    topic_filters: tuple[str, ...]
    properties: Properties = EMPTY

    packet_type = PacketType.UNSUBSCRIBE


@dataclass(frozen=True, slots=True)
class Unsuback:
    packet_id: int
    reason_codes: tuple[int, ...] = ()
    properties: Properties = EMPTY

    packet_type = PacketType.UNSUBACK


@dataclass(frozen=True, slots=True)
class Pingreq:
    packet_type = PacketType.PINGREQ


@dataclass(frozen=True, slots=True)
class Pingresp:
    packet_type = PacketType.PINGRESP


@dataclass(frozen=True, slots=True)
class Disconnect:
    reason_code: int = 0
    properties: Properties = EMPTY

    packet_type = PacketType.DISCONNECT


@dataclass(frozen=True, slots=True)
class Auth:
    reason_code: int = 0
    properties: Properties = EMPTY

    packet_type = PacketType.AUTH


# Every field positionally, fast (the decoder builds one per PUBLISH): see fastinit.
new_publish = frozen_factory(Publish)

Packet = (
    Connect
    | Connack
    | Publish
    | Puback
    | Pubrec
    | Pubrel
    | Pubcomp
    | Subscribe
    | Suback
    | Unsubscribe
    | Unsuback
    | Pingreq
    | Pingresp
    | Disconnect
    | Auth
)
