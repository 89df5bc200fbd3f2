"""What a bridge sends and brings in: its forwards and subscriptions, compiled. Pure.

- ``Outbound.route(context)``: the first forward whose local filter matches the
  message gives the remote topic (its template filled with the filter's captures), the
  QoS (the message's, at most the forward's and the remote's), the retain flag (kept
  only with ``retain: true``) and the properties MQTT 5 forwards (an expiring message
  carries its own ``received_at``, so the interval left is computed when it is sent).
- ``Inbound.route(topic)``: the first subscription whose remote filter matches gives
  the local topic and whether the retain flag is kept.

A template that cannot be filled (an empty level, a ``+``) is a ``MappingError``: the
message is dropped and counted. AWS IoT Core's limits apply to the remote topic and the
payload (``AWS_IOT_LIMITS``); so does the remote's Maximum Packet Size, once known.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from broker_core.context import Context
from broker_core.mqtt.properties import EMPTY, PUBLISH_FORWARDED, Properties
from gateway.config.models.bridges import (
    AWS_IOT_LIMITS,
    BridgeConfig,
    BridgeForward,
    BridgeSubscription,
    aws_topic_problem,
)
from gateway.mapping import FilterTemplate, MappingError, TopicTemplate

__all__ = [
    "Inbound",
    "InboundRoute",
    "MappingError",
    "Outbound",
    "Queued",
    "expiry_left",
    "forwarded_properties",
]


def forwarded_properties(properties: Properties) -> Properties:
    """The PUBLISH properties that travel with a message to another broker (payload
    format, expiry, content type, response topic, correlation data, user properties)."""
    if properties is EMPTY:
        return EMPTY
    kept = {name: getattr(properties, name) for name in PUBLISH_FORWARDED}
    if all(value in (None, ()) for value in kept.values()):
        return EMPTY
    return Properties(**kept)


@dataclass(slots=True, eq=False)
class Queued:
    """One message on its way to the remote broker: what ``Outbound.route`` makes of a
    local message, then the same object in the bridge's queue and window (no copy)."""

    topic: str  # the remote topic
    payload: bytes
    qos: int
    retain: bool
    properties: Properties
    received_at: float  # wall time, seconds
    size: int  # topic and payload: what counts against queue.max_bytes
    seq: int = 0  # its place in the bridge's order, once queued; 0: QoS 0 in memory only
    dup: bool = False  # it may have been sent before: DUP on the next send
    released: bool = False  # QoS 2: PUBREC received and that on disk: PUBREL, not PUBLISH

    @classmethod
    def of(
        cls,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        properties: Properties,
        received_at: float,
        seq: int = 0,
    ) -> Queued:
        return cls(
            topic, payload, qos, retain, properties, received_at, len(topic) + len(payload), seq
        )


class _Forward:
    __slots__ = ("local", "qos", "remote", "retain")

    def __init__(self, config: BridgeForward, max_qos: int) -> None:
        self.local = FilterTemplate(config.local)
        self.remote = None if config.remote is None else TopicTemplate(config.remote)
        self.qos = min(config.qos, max_qos)
        self.retain = config.retain


_CACHE_LIMIT = 10_000


class Outbound:
    """The forwards of one bridge. What a topic maps to is remembered (up to
    ``_CACHE_LIMIT`` topics, then forgotten all at once): a stream reuses its topics."""

    def __init__(self, config: BridgeConfig) -> None:
        self.aws = config.type == "aws_iot"
        self.forwards = [_Forward(forward, config.max_qos()) for forward in config.forwards]
        self.filters = [forward.local.topic_filter for forward in self.forwards]
        self._topics: dict[str, tuple[_Forward, str] | None] = {}

    def route(self, context: Context) -> Queued | None:
        """The message to send, or None when no forward matches; ``MappingError`` when
        it cannot be sent (template, AWS IoT Core's limits)."""
        topics = self._topics
        local = context.topic
        found = topics[local] if local in topics else self._remote_topic(local)
        if found is None:
            return None
        forward, topic = found
        payload = context.payload
        if self.aws and len(payload) > AWS_IOT_LIMITS.payload_bytes:
            raise MappingError(
                f"{topic!r}: AWS IoT Core takes payloads of {AWS_IOT_LIMITS.payload_bytes}"
                f" bytes at most, got {len(payload)}"
            )
        qos = context.qos
        properties = context.properties
        return Queued(
            topic,
            payload,
            qos if qos < forward.qos else forward.qos,
            context.retain and forward.retain,
            properties if properties is EMPTY else forwarded_properties(properties),
            context.received_at / 1e9,
            len(topic) + len(payload),
        )

    def queues(self, topic: str) -> bool:
        """Whether a QoS 1/2 message of ``topic`` would be queued at QoS 1 or 2 (its
        forward's ``qos`` is not 0, its topic maps): what a ``Refusal`` refuses while
        the queue cannot be opened."""
        try:
            found = self._topics[topic] if topic in self._topics else self._remote_topic(topic)
        except MappingError:  # dropped and counted (dropped_mapping), acknowledged
            return False
        return found is not None and found[0].qos > 0

    def _remote_topic(self, local: str) -> tuple[_Forward, str] | None:
        found: tuple[_Forward, str] | None = None
        for forward in self.forwards:
            captures = forward.local.match(local)
            if captures is None:
                continue
            topic = local if forward.remote is None else forward.remote.render(captures)
            if self.aws:
                problem = aws_topic_problem(topic)
                if problem is not None:
                    raise MappingError(f"{topic!r}: {problem}")
            found = (forward, topic)
            break
        if len(self._topics) >= _CACHE_LIMIT:
            self._topics.clear()
        self._topics[local] = found
        return found


@dataclass(frozen=True, slots=True)
class InboundRoute:
    topic: str
    retain: bool
    qos: int


class _Subscription:
    __slots__ = ("config", "local", "remote")

    def __init__(self, config: BridgeSubscription) -> None:
        self.config = config
        self.remote = FilterTemplate(config.remote)
        self.local = None if config.local is None else TopicTemplate(config.local)


class Inbound:
    """The subscriptions of one bridge."""

    def __init__(self, config: BridgeConfig) -> None:
        max_qos = config.max_qos()
        self.subscriptions = [_Subscription(s) for s in config.subscriptions]
        self.requests = [  # (filter, qos, no_local, retain_as_published, retain_handling)
            (
                s.remote.topic_filter,
                min(s.config.qos, max_qos),
                s.config.no_local,
                s.config.asks_retain_as_published(),
                s.config.retain_handling,
            )
            for s in self.subscriptions
        ]

    def route(self, topic: str, retain: bool, qos: int) -> InboundRoute | None:
        """Where a remote message goes locally; None when no subscription matches."""
        for subscription in self.subscriptions:
            captures = subscription.remote.match(topic)
            if captures is None:
                continue
            local = topic if subscription.local is None else subscription.local.render(captures)
            return InboundRoute(local, retain and subscription.config.retain, qos)
        return None


def expiry_left(properties: Properties, received_at: float, now: float) -> Properties | None:
    """``properties`` with the Message Expiry Interval left at ``now``; None when the
    message has expired (MQTT 5.0 3.3.2.3.3)."""
    interval = properties.message_expiry_interval
    if interval is None:
        return properties
    left = interval - int(now - received_at)
    if left <= 0:
        return None
    return properties if left == interval else replace(properties, message_expiry_interval=left)
