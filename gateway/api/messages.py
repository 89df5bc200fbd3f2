"""Messages between JSON and ``Context``: payloads as text or base64, MQTT 5 properties.

``message_of(context)`` shows a message (a retained one); ``context_of(request, origin)``
builds the Context the API publishes, after ``check_topic`` said the topic is one a
client could publish to.
"""

from __future__ import annotations

import base64
import binascii

from broker_core.clock import now_ns, to_wall_ns
from broker_core.context import Context, Origin
from broker_core.delayed import DELAYED_PREFIX, parse_delayed_topic
from broker_core.mqtt.properties import EMPTY, Properties
from broker_core.mqtt.topics import SHARE_PREFIX, too_deep, topic_name_problem
from gateway.api.schemas import (
    Message,
    MessageProperties,
    OriginInfo,
    PublishProperties,
    PublishRequest,
    UserProperty,
)

__all__ = [
    "PayloadError",
    "TopicDenied",
    "check_topic",
    "context_of",
    "decode_payload",
    "encode_payload",
    "message_of",
]


class PayloadError(ValueError):
    """A request's payload or topic cannot be published; the message says why."""


class TopicDenied(PayloadError):
    """A topic the broker would refuse from a publisher as it does in ``Broker.publish``
    (``$SYS``, ``$share/``, an invalid ``$delayed/``, deeper than ``max_topic_levels``):
    counted as the broker counts it, in ``publish_denied`` and ``limit`` (the bound of
    ``Counters.limit_hits`` reached, or None)."""

    def __init__(self, message: str, limit: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit


def encode_payload(payload: bytes) -> tuple[str, str]:
    """``(text, "plain")`` for UTF-8 text, else ``(base64, "base64")``."""
    try:
        return payload.decode("utf-8"), "plain"
    except UnicodeDecodeError:
        return base64.b64encode(payload).decode("ascii"), "base64"


def decode_payload(text: str, encoding: str) -> bytes:
    if encoding == "base64":
        try:
            return base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise PayloadError("payload: not valid base64") from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise PayloadError("payload: not valid UTF-8 text (use encoding: base64)") from None


def check_topic(topic: str, max_levels: int | None = None) -> tuple[int, str] | None:
    """Raises ``PayloadError`` unless a client could publish to ``topic`` (``TopicDenied``
    for one the broker refuses and counts); returns
    ``(delay, target)`` for a ``$delayed/`` topic, else None. ``max_levels``: the
    broker's ``mqtt.max_topic_levels`` (of the topic the message is routed to)."""
    problem = topic_name_problem(topic)
    if problem is not None:
        if topic.startswith(SHARE_PREFIX):
            raise TopicDenied(f"topic: {problem}")
        raise PayloadError(f"topic: {problem}")
    if max_levels is not None:
        target = topic
        if topic.startswith(DELAYED_PREFIX):
            parsed = parse_delayed_topic(topic)
            target = topic if parsed is None else parsed[1]
        if too_deep(target, max_levels):
            raise TopicDenied(
                f"topic: {target.count('/') + 1} levels, more than mqtt.max_topic_levels"
                f" ({max_levels})",
                "topic_levels",
            )
    if topic.startswith("$SYS"):
        raise TopicDenied("topic: $SYS topics belong to the broker")
    if topic.startswith(DELAYED_PREFIX):
        delayed = parse_delayed_topic(topic)
        if delayed is None:
            raise TopicDenied("topic: expected $delayed/<seconds>/<topic>")
        return delayed
    return None


def _properties(props: PublishProperties | None) -> Properties:
    if props is None:
        return EMPTY
    if props.response_topic is not None and (
        "+" in props.response_topic or "#" in props.response_topic
    ):
        raise PayloadError("properties.response_topic: must not contain wildcards")
    built = Properties(
        payload_format_indicator=props.payload_format_indicator,
        message_expiry_interval=props.message_expiry_interval,
        content_type=props.content_type,
        response_topic=props.response_topic,
        correlation_data=None
        if props.correlation_data is None
        else props.correlation_data.encode("utf-8"),
        user_properties=tuple((item.name, item.value) for item in props.user_properties),
    )
    return built if built else EMPTY


def context_of(request: PublishRequest, origin: Origin, topic: str | None = None) -> Context:
    """The Context of ``request``, addressed to ``topic`` (default: the request's)."""
    payload = decode_payload(request.payload, request.encoding)
    properties = _properties(request.properties)
    if properties.payload_format_indicator == 1:
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError:
            raise PayloadError(
                "payload: payload_format_indicator 1 says UTF-8, the payload is not"
            ) from None
    return Context(
        request.topic if topic is None else topic,
        payload,
        request.qos,
        request.retain,
        properties,
        origin,
        received_at=now_ns(),
    )


def message_of(context: Context) -> Message:
    text, encoding = encode_payload(context.payload)
    props = context.properties
    correlation = props.correlation_data
    return Message(
        topic=context.topic,
        payload=text,
        encoding=encoding,  # type: ignore[arg-type]
        payload_size=len(context.payload),
        qos=context.qos,
        properties=MessageProperties(
            payload_format_indicator=props.payload_format_indicator,
            message_expiry_interval=props.message_expiry_interval,
            content_type=props.content_type,
            response_topic=props.response_topic,
            correlation_data=None
            if correlation is None
            else base64.b64encode(correlation).decode("ascii"),
            user_properties=[
                UserProperty(name=name, value=value) for name, value in props.user_properties
            ],
        ),
        origin=OriginInfo(protocol=context.origin.protocol, name=context.origin.name),
        # received_at is on the broker's clock: shown on the wall clock (broker_core.clock)
        received_at=to_wall_ns(context.received_at) / 1e9,
    )
