"""Encoding a PUBLISH for delivery to a subscriber, once per wire variant.

A message fanned out to many subscribers is encoded once per *variant*: the protocol
family (MQTT 5 or earlier), QoS, retain flag and subscription identifiers (MQTT 5
only), the key ``(v5, qos, retain, subscription_ids)`` of the fan-out's cache. QoS 0
variants are whole frames shared by every subscriber; QoS 1/2 variants are a prefix
(fixed header and topic) and a suffix (properties and payload) around each
subscriber's own packet id.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from broker_core.mqtt import wire
from broker_core.mqtt.encoder import fixed_header
from broker_core.mqtt.properties import EMPTY

if TYPE_CHECKING:
    from broker_core.context import Context

__all__ = ["publish_parts"]


def _property_block(context: Context, subscription_ids: tuple[int, ...], now: float) -> bytes:
    props = context.properties
    if props is EMPTY:
        if not subscription_ids:
            return b"\x00"
        body = b""
    else:
        if props.message_expiry_interval:  # 0 goes as 0: never more than received
            remaining = context.expiry_remaining(now)
            if remaining is not None and remaining != props.message_expiry_interval:
                props = replace(props, message_expiry_interval=max(remaining, 1))
        block = props.encoded()
        if not subscription_ids:
            return block
        _, start = wire.read_varint(block, 0, len(block))
        body = block[start:]
    body += b"".join(b"\x0b" + wire.encode_varint(sid) for sid in subscription_ids)
    return wire.encode_varint(len(body)) + body


def publish_parts(
    context: Context,
    qos: int,
    retain: bool,
    subscription_ids: tuple[int, ...],
    v5: bool,
    now: float,
    dup: bool = False,
) -> tuple[bytes, bytes]:
    """(prefix, suffix) of a PUBLISH; a QoS 1/2 frame is ``prefix + packet_id + suffix``."""
    topic = context.topic.encode("utf-8")
    if v5:
        suffix = _property_block(context, subscription_ids, now) + context.payload
    else:
        suffix = context.payload
    remaining = 2 + len(topic) + len(suffix) + (2 if qos else 0)
    b0 = 0x30 | (qos << 1) | (0x08 if dup else 0) | (0x01 if retain else 0)
    prefix = fixed_header(b0, remaining) + len(topic).to_bytes(2, "big") + topic
    return prefix, suffix
