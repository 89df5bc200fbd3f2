"""Request and response bodies of the API, as pydantic models (they make the OpenAPI
description).

Requests forbid unknown fields, so a typo is a 422 naming it rather than a silently
ignored option. Every string that may end up in an MQTT packet must be valid UTF-8
without U+0000 (MQTT 5.0 1.5.4): JSON can carry lone surrogates, MQTT cannot.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict

__all__ = [
    "AdapterStatus",
    "BrokerInfo",
    "BytesMetrics",
    "ClientCounts",
    "ClientInfo",
    "ClientPage",
    "ComponentInfo",
    "ConnectionCount",
    "HealthStatus",
    "InstanceStatus",
    "ListenerInfo",
    "Message",
    "MessageMetrics",
    "MessageProperties",
    "Metrics",
    "OriginInfo",
    "PublishProperties",
    "PublishRequest",
    "PublishResult",
    "QueueMetrics",
    "ReloadResult",
    "RetainedPage",
    "RuleInfo",
    "SessionCounts",
    "SubscriptionInfo",
    "SubscriptionPage",
    "TlsHandshakeFailures",
    "TopicNode",
    "TopicTree",
    "UserProperty",
]


def _mqtt_string(value: str) -> str:
    """A string MQTT can carry: UTF-8 encodable, no NUL [MQTT-1.5.4-1, -2]."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid UTF-8 (no lone surrogates)") from None
    if "\0" in value:
        raise ValueError("must not contain the NUL character")
    return value


MqttString = Annotated[str, AfterValidator(_mqtt_string)]


class _Request(BaseModel):
    """A request body: unknown fields and loose types are errors (``true`` is not a QoS,
    ``1.0`` not an integer, ``"yes"`` not a boolean)."""

    model_config = ConfigDict(extra="forbid", strict=True)


# Integers in a range: ``true`` and ``1.0`` are not one (``Literal[0, 1, 2]`` takes them,
# even strict: ``True == 1``).
QoS = Annotated[int, Strict(), Field(ge=0, le=2)]
PayloadFormat = Annotated[int, Strict(), Field(ge=0, le=1)]


# -- health and broker --------------------------------------------------------------------


class HealthStatus(BaseModel):
    status: Literal["ok"] = Field(description="`ok` while the broker serves.")
    node: str = Field(description="The node name (`node_name`).")
    uptime_s: float = Field(description="Seconds since the broker started.")


class ListenerInfo(BaseModel):
    name: str = Field(description="The listener's name from the configuration.")
    address: str = Field(description="The bound address, `host:port`.")


class BrokerInfo(BaseModel):
    node: str = Field(description="The node name (`node_name`).")
    version: str = Field(description="The edgebus version.")
    uptime_s: int = Field(description="Whole seconds since the broker started.")
    started_at: float = Field(description="Start time, Unix seconds.")
    listeners: list[ListenerInfo] = Field(description="The MQTT listeners and their addresses.")


# -- clients and subscriptions -------------------------------------------------------------


class ClientInfo(BaseModel):
    clientid: str
    connected: bool = Field(description="False for a persistent session whose client is away.")
    username: str | None = Field(description="The authenticated user name, if any.")
    peer: str | None = Field(description="The client's `ip:port` while connected.")
    listener: str | None = Field(description="The listener it connected to.")
    protocol_level: int | None = Field(description="3 (MQTT 3.1), 4 (3.1.1) or 5 (5.0).")
    keep_alive: int | None = Field(description="Keep alive in seconds, as granted.")
    clean_start: bool | None = Field(description="Clean start / clean session flag.")
    session_expiry_interval: int = Field(description="Seconds the session outlives the client.")
    subscriptions: int = Field(description="Number of subscriptions.")
    queued_messages: int = Field(description="Messages waiting to be sent to the client.")
    queued_bytes: int = Field(
        description="Bytes of the queued messages: topics, payloads and properties."
    )
    inflight: int = Field(description="QoS 1/2 messages sent and not yet acknowledged.")
    inflight_bytes: int = Field(
        description="Bytes of the messages in flight: topics, payloads and properties."
    )


class ClientPage(BaseModel):
    total: int = Field(description="Clients matching the filters, on every page.")
    offset: int
    limit: int
    items: list[ClientInfo]


class SubscriptionInfo(BaseModel):
    clientid: str = Field(description="The client id, or the name of a local subscriber.")
    kind: str = Field(description="`mqtt` for clients; the protocol of a local subscriber.")
    topic: str = Field(description="The topic filter as subscribed (with `$share/...`).")
    share_group: str | None = Field(description="The shared-subscription group, if any.")
    qos: int
    no_local: bool
    retain_as_published: bool
    retain_handling: int
    subscription_id: int | None


class SubscriptionPage(BaseModel):
    total: int
    offset: int
    limit: int
    items: list[SubscriptionInfo]


class TopicNode(BaseModel):
    name: str = Field(description="This topic level.")
    topic: str = Field(description="The topic (or filter) up to this level.")
    subscriptions: int = Field(description="Subscriptions whose filter ends at this level.")
    retained: bool = Field(description="A retained message is held for this exact topic.")
    children: list[TopicNode]
    more: bool | None = Field(
        default=None,
        description="Only in an answer cut at `limit` nodes, on the nodes with children"
        " (within `depth`) the answer leaves out: ask again with this topic as `root`.",
    )


class TopicTree(BaseModel):
    nodes: int = Field(description="Nodes in the answer.")
    children: list[TopicNode] = Field(description="The first topic levels.")
    truncated: bool | None = Field(
        default=None,
        description="Only when true: the tree asked for has more than `limit` nodes; the"
        " answer holds every level but its deepest whole, the deepest one in part.",
    )


# -- messages -------------------------------------------------------------------------------


class UserProperty(_Request):
    name: MqttString
    value: MqttString


class MessageProperties(BaseModel):
    payload_format_indicator: int | None = None
    message_expiry_interval: int | None = None
    content_type: str | None = None
    response_topic: str | None = None
    correlation_data: str | None = Field(default=None, description="Base64.")
    user_properties: list[UserProperty] = Field(default_factory=list)


class OriginInfo(BaseModel):
    protocol: str = Field(description="`mqtt`, `api`, an adapter's protocol, `bridge`, ...")
    name: str = Field(description="Client id, adapter or bridge name, API key or user.")


class Message(BaseModel):
    topic: str
    payload: str = Field(description="The payload as text, or base64 (see `encoding`).")
    encoding: Literal["plain", "base64"] = Field(
        description="`plain` when the payload is UTF-8 text, else `base64`."
    )
    payload_size: int = Field(description="Payload bytes.")
    qos: int
    properties: MessageProperties
    origin: OriginInfo
    received_at: float = Field(description="When the broker received it, Unix seconds.")


class RetainedPage(BaseModel):
    total: int
    offset: int
    limit: int
    items: list[Message]


class PublishProperties(_Request):
    payload_format_indicator: PayloadFormat | None = Field(
        default=None, description="1: the payload is UTF-8 text."
    )
    message_expiry_interval: int | None = Field(
        default=None, ge=0, le=0xFFFFFFFF, description="Seconds."
    )
    content_type: MqttString | None = Field(default=None, max_length=65535)
    response_topic: MqttString | None = Field(default=None, min_length=1, max_length=65535)
    correlation_data: MqttString | None = Field(
        default=None, max_length=65535, description="Sent as its UTF-8 bytes."
    )
    user_properties: list[UserProperty] = Field(default_factory=list, max_length=256)


class PublishRequest(_Request):
    topic: MqttString = Field(
        min_length=1,
        max_length=65535,
        description=(
            "A topic name (no wildcards, not `$share/...`); `$delayed/<s>/<topic>` delays it."
        ),
    )
    payload: str = Field(default="", description="Text, or base64 with `encoding: base64`.")
    encoding: Literal["plain", "base64"] = Field(default="plain")
    qos: QoS = Field(default=0, description="0, 1 or 2.")
    retain: bool = Field(default=False, description="Retain it; an empty payload clears.")
    properties: PublishProperties | None = None


class PublishResult(BaseModel):
    id: int = Field(description="The message id given to it.")
    topic: str
    reached: int = Field(description="Subscribers it was delivered or queued to.")
    delayed: bool = Field(description="Scheduled with `$delayed/`: reached is 0 for now.")
    stored: bool | None = Field(
        default=None,
        description="QoS 1/2: true when what it changed is written (the store, bridge queues,"
        " the stream log); false when a write failed (the answer is 202: it was published"
        " all the same, `detail` says what that means). null for QoS 0 (not waited for).",
    )
    detail: str | None = Field(
        default=None, description="When `stored` is false: what was done and what was not."
    )


# -- components -----------------------------------------------------------------------------


class AdapterStatus(BaseModel):
    name: str
    type: str | None = None
    state: str = Field(description="`running`, `starting`, `backoff`, `stopped`, ...")
    last_error: str | None = Field(
        default=None, description="Why it last failed, if it did (kept while it runs again)."
    )
    restarts: int | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class ComponentInfo(BaseModel):
    name: str
    type: str | None = None
    state: str = Field(description="`configured` until its manager reports more.")
    details: dict[str, Any] = Field(default_factory=dict)


class InstanceStatus(BaseModel):
    """One component instance (adapter, bridge, sink) as its supervisor reports it."""

    kind: str = Field(description="`adapter`, `bridge` or `sink`.")
    type: str
    name: str
    protocol: str = Field(
        description="Origin protocol of what it publishes; the ACL knows the instance as"
        " `<protocol>:<name>`."
    )
    state: str = Field(
        description="`starting`, `running`, `degraded`, `backing_off`, `stopping`, `paused`,"
        " `stopped` or `unavailable`."
    )
    reason: str | None = Field(default=None, description="Why it is `degraded`.")
    last_error: str | None = Field(default=None, description="Why it last failed.")
    restarts: int = 0
    since: float = Field(description="When it entered its state (Unix time).")
    next_attempt_in_s: float | None = None
    stats: dict[str, int | float] = Field(
        default_factory=dict,
        description="Counters every kind has: `published`, `denied`, `dropped`,"
        " `too_large` (publishes dropped: their PUBLISH would exceed"
        " `mqtt.max_packet_size`), `queue_depth`, `tapped`, `tap_errors`, `inbox_depth`,"
        " `inbox_accepted`, `inbox_dropped`.",
    )
    component_stats: dict[str, int | float] = Field(
        default_factory=dict, description="The component's own counters (`stats()`)."
    )


class RuleInfo(BaseModel):
    name: str
    state: str
    hits: int | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class ReloadResult(BaseModel):
    reloaded: list[str] = Field(description="What was re-read, e.g. `acl`, `password_file`.")
    restart_required: list[str] = Field(
        default_factory=list,
        description="Sections of the file that differ from what runs and take effect at the"
        " next restart, e.g. `listeners`, `webhooks`.",
    )


# -- metrics --------------------------------------------------------------------------------


class ClientCounts(BaseModel):
    connected: int = Field(description="Clients connected now (sessions online).")
    connecting: int = Field(
        description="Connections not accepted yet (no CONNECT yet, or being decided)."
    )
    maximum: int = Field(description="The most clients connected at once since start.")
    total: int = Field(description="Sessions known, connected or not.")


class ConnectionCount(BaseModel):
    listener: str
    protocol: str = Field(description="`mqtt`.")
    version: str = Field(
        description="MQTT version: `3.1`, `3.1.1` or `5.0`; `connecting` before CONNACK."
    )
    count: int


class SessionCounts(BaseModel):
    online: int
    offline: int


class MessageMetrics(BaseModel):
    received: dict[str, int] = Field(description="Messages in, by origin protocol.")
    sent: dict[str, int] = Field(description="Messages out, by protocol.")
    dropped: dict[str, int] = Field(description="Messages dropped, by reason.")
    publish_denied: int = Field(description="Publishes refused by the ACL or for `$SYS`.")
    shared_redelivered: int = Field(
        description="Messages an ended session owed through a shared subscription, sent to"
        " another member of the group.",
    )
    retained: int
    delayed: int
    delayed_bytes: int = Field(
        description="Topic, payload and property bytes of the `$delayed/` messages waiting."
    )
    will_bytes: int = Field(
        description="Topic, payload and property bytes of the wills held: those of connected"
        " clients and the pending (delayed) ones."
    )


class BytesMetrics(BaseModel):
    received: dict[str, int]
    sent: dict[str, int]


class QueueMetrics(BaseModel):
    queued_messages: int = Field(description="Messages queued for MQTT sessions, summed.")
    queued_messages_max: int = Field(description="The longest session queue.")
    queued_bytes: int = Field(
        description="Topic, payload and property bytes of the messages queued for MQTT sessions."
    )
    inflight: int = Field(description="QoS 1/2 messages in flight to clients.")
    inflight_bytes: int = Field(
        description="Topic, payload and property bytes of the messages in flight to clients."
    )
    local_queued: int = Field(description="Messages waiting for local subscribers.")
    local_queued_max: int


class LimitMetrics(BaseModel):
    hits: dict[str, int] = Field(
        description="Times each bound was reached, by limit (docs/broker.md lists them)."
    )
    pending_connections: int = Field(description="Sockets that have not sent CONNECT yet.")
    retained_bytes: int = Field(description="Bytes of retained messages held.")
    topic_alias_bytes: int = Field(description="Topic characters held in topic alias tables.")
    router_cache_entries: int = Field(description="Topics in the router's match cache.")
    router_cache_bytes: int = Field(description="Estimated bytes of the router's match cache.")
    login_failures: int = Field(description="Failed logins (wrong or unknown credentials).")
    credentials_revoked: int = Field(
        0,
        description="Clients a reload disconnected because their password file entry was"
        " removed or changed.",
    )
    login_throttle_tracked: int = Field(
        description="User names and addresses the login throttle remembers."
    )


class TlsHandshakeFailures(BaseModel):
    listener: str
    reason: str = Field(
        description="`certificate_expired`, `certificate_revoked`, `unknown_ca`,"
        " `unsupported_protocol`, `peer_did_not_return_a_certificate`, `timeout`,"
        " `connection_lost`, ... (docs/security.md)."
    )
    count: int


class Metrics(BaseModel):
    node: str
    uptime_s: float
    clients: ClientCounts
    connections: list[ConnectionCount]
    sessions: SessionCounts
    subscriptions: int
    messages: MessageMetrics
    bytes: BytesMetrics
    queues: QueueMetrics
    store_pending_writes: int
    limits: LimitMetrics
    observer_errors: int = Field(description="Broker-event observers that raised.")
    tls_handshake_failures: list[TlsHandshakeFailures] = Field(
        default_factory=list,
        description="Failed TLS handshakes by listener and reason (docs/security.md).",
    )
    adapters: list[AdapterStatus]
    bridges: list[ComponentInfo]
    rules: list[RuleInfo]
    components: list[InstanceStatus] = Field(default_factory=list)
    rule_engine: dict[str, int] = Field(
        default_factory=dict,
        description="The rule engine's queue: `queue_depth`, `queue_size`, `dropped`,"
        " `processed`, `rules`.",
    )
    webhooks: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Per webhook: `queued`, `sent`, `failed`, `retried`, `dropped`,"
        " `queue_depth`.",
    )
