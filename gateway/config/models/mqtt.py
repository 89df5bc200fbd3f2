"""``mqtt``: protocol limits the broker enforces and advertises."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from gateway.config.models.base import ConfigModel, doc_default
from gateway.config.values import DurationSpec, SizeSpec

__all__ = ["MqttConfig"]

_MAX_PACKET = 268_435_455  # the largest Remaining Length MQTT can encode, plus header
_NEVER = 0xFFFF_FFFF  # session expiry interval meaning "never expires"


def _default_burst(data: dict[str, Any]) -> int | None:
    rate = data.get("publish_rate")
    return math.ceil(rate) if rate else None


class MqttConfig(ConfigModel):
    """MQTT protocol limits, for every listener. MQTT 5 clients are told the limits
    that the protocol can advertise (receive maximum, maximum packet size, topic alias
    maximum, maximum QoS, retain/wildcard/shared/subscription-identifier availability,
    server keep alive)."""

    max_packet_size: Annotated[int, SizeSpec(ge=1, le=_MAX_PACKET)] = Field(
        default=1_000_000,
        description="Largest MQTT packet accepted; bigger packets close the connection"
        " (MQTT 5: reason code 0x95). A message an adapter, bridge or rule publishes is"
        " held to it too, counted as the PUBLISH it would be (refused and counted"
        " in messages.dropped too_large, and in the component's too_large or the rule"
        " action's failed).",
    )
    server_keep_alive: Annotated[float, DurationSpec(le=65535, whole_seconds=True)] | None = Field(
        default=None,
        description="When set, the keep alive imposed on every MQTT 5 client (sent as"
        " Server Keep Alive), whatever it asked for; 0 disables keep alive.",
    )
    max_keepalive: Annotated[float, DurationSpec(ge=1, le=65535, whole_seconds=True)] = Field(
        default=65535.0,
        description="Longest keep alive accepted. An MQTT 5 client asking for more is"
        " told this value as Server Keep Alive.",
    )
    receive_maximum: int = Field(
        default=32,
        ge=1,
        le=65535,
        description="QoS 1 and 2 PUBLISH packets a client may have unacknowledged towards"
        " the broker (advertised to MQTT 5 clients, disconnected with 0x93 past it). An"
        " MQTT 3.1.1/3.1 client is told none and not disconnected: only its QoS 2 PUBLISH"
        " packets count, and one past it waits, with every packet after it, until a"
        " PUBREL makes room (docs/broker.md).",
    )
    max_inflight: int = Field(
        default=256,
        ge=1,
        le=65535,
        description="QoS 1 and 2 PUBLISH packets the broker sends a client before waiting"
        " for acknowledgements; also capped by the client's own receive maximum.",
    )
    max_queued_messages: int = Field(
        default=1000,
        ge=1,
        description="Messages queued per session while the client is offline or its"
        " inflight window is full.",
    )
    max_queued_bytes: Annotated[int, SizeSpec(ge=1)] = Field(
        default=64_000_000,
        description="Bytes queued per session, at most; a message counts its topic, payload"
        " and properties.",
    )
    max_queued_bytes_total: Annotated[int, SizeSpec(ge=1)] = Field(
        default=256_000_000,
        description="Bytes (topic, payload, properties) queued in all sessions and in flight"
        " to all clients together; past it a message is queued only if its session's own"
        " queue makes room (`drop_oldest`), else dropped and counted (`queue_full`).",
    )
    max_inflight_bytes: Annotated[int, SizeSpec(ge=1)] = Field(
        default=16_000_000,
        description="Bytes (topic, payload, properties) of QoS 1 and 2 messages in flight to"
        " one client, awaiting its acknowledgement; past it further messages wait in its"
        " queue (a larger message still goes when nothing else is in flight). Mosquitto's"
        " name; there 0 means no limit, here there is always one.",
    )
    max_offline_sessions: int = Field(
        default=10_000,
        ge=0,
        description="Sessions kept for clients that are not connected; past it the session"
        " offline the longest ends as if it had expired (its will is published).",
    )
    max_will_bytes_total: Annotated[int, SizeSpec(ge=0)] = Field(
        default=64_000_000,
        description="Bytes (topic, payload, properties) of the wills held: those of connected"
        " clients, from their CONNECT until the connection ends, and the pending ones of"
        " clients gone away, waiting out their Will Delay Interval; 0 = no limit. A CONNECT"
        " whose will has no room is refused (0x97; 3.1.1: 3); a will that would pass it"
        " when its connection ends is published at once instead of after its delay.",
    )
    queue_overflow: Literal["drop_oldest", "drop_new"] = Field(
        default="drop_oldest",
        description="What a full session queue drops: the oldest queued message or the new one.",
    )
    max_session_expiry: Annotated[float, DurationSpec(le=_NEVER - 1, whole_seconds=True)] = Field(
        default=604800.0,
        description="Cap on the session expiry interval a client asks for.",
    )
    max_topic_alias: int = Field(
        default=10,
        ge=0,
        le=65535,
        description="Topic aliases a client may use towards the broker, advertised as Topic"
        " Alias Maximum (mosquitto's default is 10); 0 disables them.",
    )
    max_topic_alias_bytes: Annotated[int, SizeSpec(ge=1)] = Field(
        default=32_000_000,
        description="Topic characters held in the topic alias tables of all connections"
        " together; a client whose new alias would pass it is disconnected with 0x97.",
    )
    max_packet_properties: int = Field(
        default=128,
        ge=1,
        description="MQTT 5 properties (user properties included) in one property block of a"
        " packet; more close the connection with 0x97.",
    )
    max_packet_properties_bytes: Annotated[int, SizeSpec(ge=1)] = Field(
        default=131_072,
        description="Bytes of one property block of a packet; more close the connection with 0x97.",
    )
    max_subscriptions: int = Field(
        default=1000,
        ge=1,
        description="Subscriptions one session may hold; a filter beyond gets 0x97 in SUBACK"
        " (3.1.1: 0x80).",
    )
    max_subscriptions_total: int = Field(
        default=100_000,
        ge=1,
        description="Subscriptions in the broker, local ones (adapters, bridges) included; a"
        " client's filter beyond gets 0x97 in SUBACK (3.1.1: 0x80).",
    )
    max_topic_levels: int = Field(
        default=128,
        ge=1,
        le=65535,
        description="Levels of a topic name or filter (`a/b/c` has 3). A deeper filter gets"
        " 0x8F in SUBACK (3.1.1: 0x80); a deeper PUBLISH is refused with 0x90 (MQTT 5"
        " QoS 0: dropped; MQTT 3.1.1 and 3.1: the connection is closed, at every QoS), a"
        " CONNECT with a deeper will with 0x90 (3.1.1: 3), an HTTP API"
        " publish with 400; a deeper component filter (adapter mapping, bridge forward or"
        " local topic, rule FROM, `stream.topics`) is a configuration error, and 422 through"
        " the API. 128 as EMQX (mosquitto: 200), so a"
        " message taken here can be bridged there; each level of a subscription or a"
        " retained message costs a node of the broker's topic tries.",
    )
    read_budget: Annotated[int, SizeSpec(ge=1)] = Field(
        default=65536,
        description="Bytes of packets handled from one connection per event-loop turn (at"
        " least one packet); the rest waits for the next turn, after the other connections,"
        " so one client cannot stall them.",
    )
    max_qos: Literal[0, 1, 2] = Field(
        default=2,
        description="Highest QoS granted; higher subscriptions are downgraded and (MQTT 5)"
        " higher publishes refused.",
    )
    retain_available: bool = Field(default=True, description="Accept retained messages.")
    max_retained_messages: int = Field(
        default=100000,
        ge=0,
        description="Retained messages stored, at most; 0 = no limit. A new topic beyond it"
        " is not retained (MQTT 5 QoS 1/2: refused with 0x97). The broker's own $SYS"
        " statistics are not counted.",
    )
    max_retained_bytes: Annotated[int, SizeSpec(ge=0)] = Field(
        default=64_000_000,
        description="Bytes of retained messages stored (topics, payloads, properties); 0 = no"
        " limit. A message that would pass it is not retained (MQTT 5 QoS 1/2: refused with"
        " 0x97). The broker's own $SYS statistics are not counted.",
    )
    wildcard_subscriptions: bool = Field(
        default=True, description="Accept subscriptions with `+` and `#`."
    )
    shared_subscriptions: bool = Field(
        default=True, description="Accept `$share/<group>/<filter>` subscriptions."
    )
    subscription_identifiers: bool = Field(
        default=True, description="Accept MQTT 5 subscription identifiers."
    )
    max_client_id_length: int = Field(
        default=65535,
        ge=23,
        le=65535,
        description="Longest client identifier accepted, in bytes (MQTT requires at least 23).",
    )
    publish_rate: float | None = Field(
        default=None,
        gt=0,
        description="PUBLISH packets per second accepted from each client (token bucket);"
        " null = unlimited.",
    )
    publish_burst: int | None = Field(
        default_factory=_default_burst,
        ge=1,
        description="Size of each client's PUBLISH token bucket; needs `publish_rate`.",
        json_schema_extra=doc_default("`publish_rate` rounded up"),
    )
    write_high_water: Annotated[int, SizeSpec(ge=1)] = Field(
        default=1_000_000,
        description="Bytes waiting in a client's socket buffer at which delivery to it"
        " pauses and messages queue instead, and reading from it pauses until it has read"
        " them.",
    )
    write_timeout: Annotated[float, DurationSpec(gt=0)] = Field(
        default=60.0,
        description="How long a client whose socket buffer is over `write_high_water` may"
        " read nothing of it: past that the connection is closed (reset: nothing can"
        " reach a client that does not read, no DISCONNECT either), its will published,"
        " and the limit hit `write_timeout` counted. A client that reads some starts its"
        " time again: the broker's buffer for it shrank, or (Linux) the bytes the kernel"
        " holds for its socket not yet acknowledged by the client fell, from one 0.5 s"
        " sweep to the next (docs/broker.md). EMQX closes after 15 s (`send_timeout`);"
        " mosquitto and NanoMQ never.",
    )
    max_delayed_messages: int = Field(
        default=100000,
        ge=0,
        description="Pending `$delayed/<seconds>/<topic>` messages, at most; 0 = no limit.",
    )
    max_delayed_bytes: Annotated[int, SizeSpec(ge=0)] = Field(
        default=64_000_000,
        description="Bytes (topic, payload, properties) of pending `$delayed/` messages, at"
        " most; 0 = no limit. A message that would pass it is refused (MQTT 5 QoS 1/2: 0x97;"
        " HTTP API: 503), as past `max_delayed_messages`.",
    )

    @field_validator("publish_burst", mode="before")
    @classmethod
    def _burst_needs_rate(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return _default_burst(info.data)
        if info.data.get("publish_rate") is None and "publish_rate" in info.data:
            raise ValueError("only works together with 'publish_rate'")
        return value
