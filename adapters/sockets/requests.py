"""MQTT 5 request/response across the native side, both ways.

- **A native service answers MQTT requests** (``mqtt_to_zmq`` with ``req``/``dealer``,
  ``mqtt_to_nng`` with ``req0``): an MQTT 5 request carries a Response Topic and,
  usually, Correlation Data. The adapter sends the payload to the service and publishes
  the service's reply to the Response Topic with the same Correlation Data
  (``reply_context``).
- **A native front for an MQTT responder** (``zmq_to_mqtt`` with ``rep``/``router``,
  ``nng_to_mqtt`` with ``rep0``): a native request becomes an MQTT message with the
  mapping's response topic and Correlation Data of the adapter's own
  (``PendingReplies.open``); the responder publishes its reply there with that
  Correlation Data, which resolves the waiting request (``PendingReplies.resolve``).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from dataclasses import replace
from typing import Any

from adapters.sockets.mapping import (
    Decode,
    Inbound,
    Outbound,
    count_refusal,
    note_error,
    note_failure,
)
from broker_core.context import Context, Origin, new_context, next_message_id
from broker_core.mqtt.properties import Properties
from gateway.hub import HubClient, HubSubscription
from gateway.mapping import MappingError

__all__ = [
    "PendingReplies",
    "ask_responder",
    "collect_replies",
    "default_response_topic",
    "publish_reply",
    "reply_context",
    "request_properties",
]


def default_response_topic(adapter_type: str, adapter: str, mapping: str) -> str:
    """``edgebus/replies/<type>/<adapter>/<mapping>``, with the mapping name made a
    single topic level."""
    level = "".join(c if c.isalnum() or c in "-_." else "_" for c in mapping)
    return f"edgebus/replies/{adapter_type}/{adapter}/{level}"


class PendingReplies:
    """Requests published to MQTT responders, waiting for their replies.

    Each request gets Correlation Data unique to this table (8 random bytes, then a
    counter); a reply carrying it resolves that request's future. At most ``limit``
    requests wait at once; ``open`` raises ``MappingError`` beyond that.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._prefix = os.urandom(8)
        self._counter = itertools.count(1)
        self._waiting: dict[bytes, asyncio.Future[Context]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def open(self) -> tuple[bytes, asyncio.Future[Context]]:
        """Correlation Data for a new request, and the future its reply resolves."""
        if len(self._waiting) >= self.limit:
            raise MappingError(f"{self.limit} requests are already waiting for replies")
        key = self._prefix + next(self._counter).to_bytes(8, "big")
        future: asyncio.Future[Context] = asyncio.get_running_loop().create_future()
        self._waiting[key] = future
        return key, future

    def resolve(self, reply: Context) -> bool:
        """Hands ``reply`` to the request its Correlation Data names; False when none
        waits for it (unknown, expired, or no Correlation Data)."""
        key = reply.properties.correlation_data
        future = self._waiting.pop(key, None) if key is not None else None
        if future is None or future.done():
            return False
        future.set_result(reply)
        return True

    def discard(self, key: bytes) -> None:
        """Forgets a request (its reply came, or it timed out)."""
        self._waiting.pop(key, None)

    def close(self) -> None:
        for future in self._waiting.values():
            future.cancel()
        self._waiting.clear()


def request_properties(base: Properties, response_topic: str, correlation: bytes) -> Properties:
    """``base`` with the Response Topic and Correlation Data of a request."""
    return replace(base, response_topic=response_topic, correlation_data=correlation)


def reply_context(mapping: Outbound, request: Context, payload: bytes, origin: Origin) -> Context:
    """The MQTT reply to ``request`` carrying the native service's ``payload``: to its
    Response Topic, with its Correlation Data, at its QoS."""
    response_topic = request.properties.response_topic
    if not response_topic:
        raise MappingError(f"the request on {request.topic!r} has no response topic")
    properties = mapping.properties
    correlation = request.properties.correlation_data
    if correlation is not None:
        properties = replace(properties, correlation_data=correlation)
    return new_context(
        response_topic,
        mapping.to_mqtt(payload),
        request.qos,
        False,
        properties,
        origin,
        {"request.topic": request.topic},
        next_message_id(),
        time.time_ns(),
    )


def publish_reply(hub: HubClient, mapping: Outbound, request: Context, payload: bytes) -> None:
    """Publishes a native service's reply to ``request`` (``reply_context``), counted;
    never raises."""
    try:
        accepted = hub.publish(reply_context(mapping, request, payload, hub.origin))
    except MappingError as exc:
        note_failure(mapping, exc)
        return
    except Exception as exc:  # a bug: this reply is lost, the mapping goes on
        note_error(mapping, exc)
        return
    if accepted:
        mapping.counters.published += 1
    else:
        count_refusal(mapping.counters, hub)


async def collect_replies(subscription: HubSubscription, pending: PendingReplies) -> None:
    """Hands every reply arriving on ``subscription`` to the request it answers."""
    async for reply in subscription:
        pending.resolve(reply)


async def ask_responder(
    hub: HubClient,
    mapping: Inbound,
    pending: PendingReplies,
    message: Any,
    decode: Decode,
    response_topic: str,
) -> bytes:
    """Publishes a native request (``decode`` splits ``message``) to the MQTT responder
    and returns its reply's payload, native; ``b""`` when there is none (the request
    does not fit, is refused, finds the table full, times out, or fails unexpectedly),
    counted in the mapping's counters. Never raises (but ``CancelledError``)."""
    counters = mapping.counters
    counters.received += 1
    try:
        topic, payload = decode(message, mapping.config.frames, mapping.delimiter, mapping.prefixes)
    except MappingError as exc:
        note_failure(mapping, exc)
        return b""
    except Exception as exc:  # a bug: the native requester gets the empty answer
        note_error(mapping, exc)
        return b""
    try:
        correlation, future = pending.open()
    except MappingError:  # max_inflight requests wait already
        counters.dropped += 1
        return b""
    try:
        properties = request_properties(mapping.properties, response_topic, correlation)
        context = mapping.context(topic, payload, hub.origin, properties)
        if not hub.publish(context):
            count_refusal(counters, hub)
            return b""
        counters.published += 1
        try:
            async with asyncio.timeout(mapping.config.timeout):
                reply = await future
        except TimeoutError:
            counters.timeouts += 1
            return b""
        return mapping.from_mqtt(reply.payload)
    except MappingError as exc:
        note_failure(mapping, exc)
        return b""
    except Exception as exc:  # a bug: the native requester gets the empty answer
        note_error(mapping, exc)
        return b""
    finally:
        pending.discard(correlation)
