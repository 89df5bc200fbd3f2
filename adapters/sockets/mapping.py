"""Compiled mappings and their counters, shared by the ZeroMQ and NNG adapters.

A mapping's templates and codec are parsed once (``gateway.mapping``); per message,
``Inbound.context`` turns a native ``(topic, payload)`` into the Context to publish and
``Outbound.native`` turns a Context into the native ``(topic, payload)`` to send. The
frame layout (how topic and payload sit in the native message) is each adapter's
codec's business.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from adapters.failures import Unexpected
from adapters.sockets.config import InboundMapping, OutboundMapping
from adapters.sockets.frames import prefix_order
from broker_core.context import EMPTY_META, Context, Origin, new_context, next_message_id
from broker_core.mqtt.properties import Properties
from gateway.hub import HubClient, HubSubscription
from gateway.mapping import FilterTemplate, MappingError, TopicTemplate, codec

__all__ = [
    "Counters",
    "Inbound",
    "Outbound",
    "batches",
    "count_refusal",
    "mapping_names",
    "note_error",
    "note_failure",
]

log = logging.getLogger(__name__)
_unexpected = Unexpected(log)

MQTT_TOPIC = "mqtt.topic"


@dataclass(slots=True)
class Counters:
    """One mapping's counters (``stats()`` shows them as ``<mapping>.<counter>``)."""

    received: int = 0  # messages taken in: native (to MQTT) or MQTT (to native)
    published: int = 0  # MQTT messages published (messages, or replies to requests)
    sent: int = 0  # native messages sent (messages, requests, or replies)
    dropped: int = 0  # lost here: a full socket (send timeout), a full request table
    denied: int = 0  # publishes the broker refused (ACL, $SYS)
    failed: int = 0  # messages that did not fit the mapping (bad frames, topic, payload),
    # or whose handling failed unexpectedly (note_error)
    timeouts: int = 0  # requests without a reply in time
    connected: int = 0  # peers connected now (connect and bind sides)

    def stats(self, name: str, queue_dropped: int = 0) -> dict[str, int]:
        out = {f"{name}.{f.name}": getattr(self, f.name) for f in fields(self)}
        out[f"{name}.dropped"] += queue_dropped
        return out


def mapping_names(prefix: str, configs: tuple[InboundMapping | OutboundMapping, ...]) -> list[str]:
    """Each mapping's name: its ``name``, or ``<prefix>[<index>]``. Raises ``ValueError``
    when two are the same."""
    names = [c.name or f"{prefix}[{i}]" for i, c in enumerate(configs)]
    if len(set(names)) != len(names):
        raise ValueError(f"{prefix}: mapping names must be unique, got {names}")
    return names


def note_failure(mapping: Inbound | Outbound, exc: Exception) -> None:
    """Counts a message that did not fit ``mapping``; logs the 1st, 2nd, 4th, 8th, ...
    so that a stream of bad messages cannot flood the log."""
    counters = mapping.counters
    counters.failed += 1
    failed = counters.failed
    if failed & (failed - 1) == 0:
        log.warning("%s: %s (%d such messages so far)", mapping.name, exc, failed)


def note_error(mapping: Inbound | Outbound, exc: Exception) -> None:
    """Counts a message whose handling raised what nothing foresaw (in ``failed``) and
    logs it at a bounded rate with its traceback (``adapters.failures.Unexpected``): the
    mapping goes on with the next message."""
    mapping.counters.failed += 1
    _unexpected(exc, "%s: a message failed unexpectedly; dropped", mapping.name)


async def batches(subscription: HubSubscription, limit: int = 512) -> AsyncIterator[list[Context]]:
    """The subscription's Contexts in lists of up to ``limit``: one wait for a message,
    then what is queued behind it, taken without waiting (a busy mapping pays one
    wake-up per batch instead of one per message)."""
    async for context in subscription:
        batch = [context]
        while len(batch) < limit:
            queued = subscription.get_nowait()
            if queued is None:
                break
            batch.append(queued)
        yield batch


def _json(payload: bytes, what: str) -> Any:
    try:
        return json.loads(payload)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise MappingError(f"{what} needs a JSON payload: {exc}") from exc


#: A codec's ``decode(message, layout, delimiter, prefixes) -> (topic, payload)``.
Decode = Callable[[Any, str, bytes, tuple[bytes, ...]], tuple[bytes | None, bytes]]


class Inbound:
    """A native -> MQTT mapping, compiled."""

    __slots__ = (
        "config",
        "counters",
        "delimiter",
        "from_mqtt",
        "name",
        "payload_fields",
        "prefixes",
        "properties",
        "template",
        "to_mqtt",
        "topic_key",
    )

    def __init__(self, config: InboundMapping, name: str) -> None:
        self.config = config
        self.name = name
        self.template = TopicTemplate(config.to_mqtt)
        self.to_mqtt = codec(config.codec).to_mqtt
        self.from_mqtt = codec(config.codec).from_mqtt  # replies of reply sockets
        self.properties = codec(config.codec).properties()
        self.topic_key = config.TOPIC_KEY
        self.payload_fields = config.needs_payload_fields()
        self.delimiter = config.delimiter.encode()
        self.prefixes = prefix_order(config.subscribe)
        self.counters = Counters()

    def context(
        self,
        topic: bytes | None,
        payload: bytes,
        origin: Origin,
        properties: Properties | None = None,
    ) -> Context:
        """The Context to publish for a native message; raises ``MappingError``."""
        values: Mapping[str, Any]
        if topic is None:
            values = EMPTY_META
        else:
            try:
                values = {self.topic_key: topic.decode()}
            except UnicodeDecodeError as exc:
                raise MappingError(f"the native topic is not UTF-8: {topic[:64]!r}") from exc
        document = _json(payload, self.template.text) if self.payload_fields else None
        mqtt_topic = self.template.render(values, document)
        return new_context(
            mqtt_topic,
            self.to_mqtt(payload),
            self.config.qos,
            self.config.retain,
            self.properties if properties is None else properties,
            origin,
            values,
            next_message_id(),
            time.time_ns(),
        )

    def take(self, message: Any, decode: Decode, hub: HubClient) -> None:
        """Publishes one native message (``decode`` splits it), counted; never raises."""
        counters = self.counters
        counters.received += 1
        try:
            topic, payload = decode(message, self.config.frames, self.delimiter, self.prefixes)
            accepted = hub.publish(self.context(topic, payload, hub.origin))
        except MappingError as exc:
            note_failure(self, exc)
            return
        except Exception as exc:  # a bug: this message is lost, the mapping goes on
            note_error(self, exc)
            return
        if accepted:
            counters.published += 1
        else:
            count_refusal(counters, hub)


def count_refusal(counters: Counters, hub: HubClient) -> None:
    """Counts a publish the hub refused: one too large for ``mqtt.max_packet_size`` in
    ``dropped`` (as the hub counts it), any other (the ACL, ``$SYS``, an invalid topic
    name) in ``denied``."""
    if hub.refused_too_large:
        counters.dropped += 1
    else:
        counters.denied += 1


class Outbound:
    """An MQTT -> native mapping, compiled."""

    __slots__ = (
        "config",
        "counters",
        "delimiter",
        "from_mqtt",
        "identity",
        "name",
        "payload_fields",
        "properties",
        "source",
        "template",
        "to_mqtt",
        "topic_key",
    )

    def __init__(self, config: OutboundMapping, name: str) -> None:
        self.config = config
        self.name = name
        self.source = FilterTemplate(config.from_mqtt)
        self.template = TopicTemplate(config.topic)
        self.identity = config.topic == "{" + MQTT_TOPIC + "}"
        self.from_mqtt = codec(config.codec).from_mqtt
        self.to_mqtt = codec(config.codec).to_mqtt  # replies of request sockets
        self.properties = codec(config.codec).properties()
        self.topic_key = config.TOPIC_KEY
        self.payload_fields = config.needs_payload_fields()
        self.delimiter = config.delimiter.encode()
        self.counters = Counters()

    def native(self, context: Context) -> tuple[bytes, bytes]:
        """``(native topic, native payload)`` for a Context; raises ``MappingError``."""
        payload = self.from_mqtt(context.payload)
        if self.identity:
            return context.topic.encode(), payload
        captures = self.source.match(context.topic)
        if captures is None:  # a retained message of an overlapping filter, say
            raise MappingError(f"{context.topic!r} does not match {self.source.text!r}")
        values: dict[str, Any] = {MQTT_TOPIC: context.topic, **captures}
        document = _json(payload, self.template.text) if self.payload_fields else None
        topic = self.template.render(values, document)
        try:
            return topic.encode(), payload
        except UnicodeEncodeError as exc:  # a JSON field "\ud800": a lone surrogate
            raise MappingError(f"the topic is not UTF-8 text: {topic[:64]!r}") from exc

    def request(self, context: Context) -> tuple[bytes, bytes] | None:
        """``native(context)`` of an MQTT 5 request; None, counted, when it is not one
        (no Response Topic), does not fit or fails unexpectedly."""
        try:
            if not context.properties.response_topic:
                raise MappingError(f"{context.topic!r}: a request needs a response topic")
            return self.native(context)
        except MappingError as exc:
            note_failure(self, exc)
            return None
        except Exception as exc:  # a bug: this request is lost, the mapping goes on
            note_error(self, exc)
            return None
