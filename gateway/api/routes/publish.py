"""``/publish`` and ``/publish/batch``: messages into the broker, origin ``api``.

A published message goes through the same path as an MQTT client's after the ACL:
retained store, routing, delivery; ``$delayed/<seconds>/<topic>`` schedules it. The
API caller is trusted (it holds a key or is a configured user): the topic ACL, which
governs MQTT clients and adapters, does not apply. The message's origin is
``api``/<caller>, e.g. ``api``/``key-0`` or ``api``/``operator``.

A QoS 1 or 2 message is acknowledged as an MQTT PUBACK is: the answer comes once what it
changed is durable, in the broker's store and every durable participant (a bridge's
queue, the stream log; ``broker_core.acks``). A batch waits once, after its last message.
When a write fails the answer is 503 and nothing is acknowledged. QoS 0 is answered at
once, as MQTT's is fire-and-forget.
"""

from __future__ import annotations

from typing import Annotated, NoReturn

from fastapi import APIRouter, Body, HTTPException, status

from broker_core.clock import now as clock_now
from broker_core.context import Context, Origin
from broker_core.mqtt.session_state import message_size
from broker_core.retained import is_broker_own, retained_size
from gateway.api.components import GatewayView
from gateway.api.deps import Caller, Gw, Responses
from gateway.api.durable import written
from gateway.api.messages import PayloadError, check_topic, context_of
from gateway.api.schemas import PublishRequest, PublishResult

__all__ = ["MAX_BATCH", "router"]

#: Most messages in one ``/publish/batch`` request.
MAX_BATCH = 1000

router = APIRouter(tags=["publish"])

_ERRORS: Responses = {
    400: {"description": "The message cannot be published (the detail says why)"},
    413: {"description": "The payload is larger than `mqtt.max_packet_size`"},
    503: {
        "description": "Over `mqtt.max_delayed_messages` or `_bytes`, or the retained bounds,"
        " or the store could not write a QoS 1/2 message"
    },
}


def _prepare(
    gateway: GatewayView, request: PublishRequest, origin: Origin, where: str = ""
) -> tuple[Context, int | None]:
    """The Context to publish and its delay, or an HTTPException saying what is wrong
    (``where`` prefixes the message: ``[3]`` in a batch)."""
    limits = gateway.broker.limits
    try:
        delayed = check_topic(request.topic, limits.max_topic_levels)
        context = context_of(request, origin, None if delayed is None else delayed[1])
    except PayloadError as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"{where}{exc}") from None
    if request.qos > limits.max_qos:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            f"{where}qos: this broker's maximum QoS is {limits.max_qos}",
        )
    if request.retain and not limits.retain_available:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST, f"{where}retain: not available on this broker"
        )
    if len(context.payload) > limits.max_packet_size:
        raise HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE,
            f"{where}payload: larger than mqtt.max_packet_size ({limits.max_packet_size} bytes)",
        )
    return context, None if delayed is None else delayed[0]


class _Quotas:
    """The broker's refusable quotas (``$delayed/`` and retained bounds) as a sequence of
    messages would use them: ``check`` each in order, then publish them all. Nothing is
    changed until a message is refused: that one is counted as the broker counts it."""

    def __init__(self, gateway: GatewayView) -> None:
        broker = gateway.broker
        self._broker = broker
        retained = broker.retained
        retained.expire()  # the bounds count live messages, as RetainedStore.over_limit's
        self._retained = retained
        self._delayed_room = (
            None
            if not broker.delayed.max_messages
            else broker.delayed.max_messages - len(broker.delayed)
        )
        delayed = broker.delayed
        self._delayed_bytes = None if not delayed.max_bytes else delayed.max_bytes - delayed.bytes
        self._count = len(retained) - retained.own
        self._bytes = retained.bytes - retained.own_bytes
        self._sizes: dict[str, int | None] = {}  # retained topics the messages change

    def check(self, context: Context, delay: int | None, where: str) -> None:
        if delay is not None:
            if self._delayed_room is not None:
                if self._delayed_room <= 0:
                    self._refuse_delayed(context, where)
                self._delayed_room -= 1
            if self._delayed_bytes is not None:
                self._delayed_bytes -= message_size(context)
                if self._delayed_bytes < 0:
                    self._refuse_delayed(context, where, "max_delayed_bytes")
            return  # retained when it is released, not now
        if context.retain:
            self._check_retained(context, where)

    def _check_retained(self, context: Context, where: str) -> None:
        retained = self._retained
        topic = context.topic
        if topic in self._sizes:
            existing = self._sizes[topic]
        else:
            held = retained.get(topic)
            existing = None if held is None or is_broker_own(held) else retained_size(held)
        if not context.payload:  # clears: always works
            if existing is not None:
                self._count -= 1
                self._bytes -= existing
            self._sizes[topic] = None
            return
        size = retained_size(context)
        grow = size - (existing or 0)
        if existing is None and retained.max_messages and self._count >= retained.max_messages:
            self._refuse_retained(context, "retained_messages", where)
        if retained.max_bytes and grow > 0 and self._bytes + grow > retained.max_bytes:
            self._refuse_retained(context, "retained_bytes", where)
        self._count += existing is None
        self._bytes += grow
        self._sizes[topic] = size

    def _refuse_retained(self, context: Context, limit: str, where: str) -> NoReturn:
        broker = self._broker
        broker.retained.refuse(limit)
        if broker.observers.message_dropped:
            broker.observers.report_dropped(context, "retained_limit", None, None, None)
        store = broker.retained
        bound = store.max_messages if limit == "retained_messages" else store.max_bytes
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"{where}retain: not retained, over mqtt.max_{limit} ({bound}); nothing was published",
        )

    def _refuse_delayed(
        self, context: Context, where: str, limit: str = "max_delayed_messages"
    ) -> NoReturn:
        delayed = self._broker.delayed
        delayed.refused += 1  # counted as DelayedMessages.schedule counts a refusal
        if delayed.on_refused is not None:
            delayed.on_refused(context)
        what = "messages" if limit == "max_delayed_messages" else "bytes"
        bound = delayed.max_messages if limit == "max_delayed_messages" else delayed.max_bytes
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"{where}topic: too many delayed {what} waiting (mqtt.{limit}: "
            f"{bound}); nothing was published",
        )


def _send(gateway: GatewayView, context: Context, delay: int | None) -> PublishResult:
    """Publishes a message whose quotas were checked (``_Quotas``)."""
    broker = gateway.broker
    now = clock_now()
    if delay is not None:
        if not broker.delayed.schedule(context, delay, now):  # checked: cannot happen
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                "too many delayed messages waiting (mqtt.max_delayed_messages/_bytes)",
            )
        reached = 0
    else:
        reached = broker.publish(context, now=now)
    broker.counters.count_received("api", len(context.payload))
    return PublishResult(
        id=context.id, topic=context.topic, reached=reached, delayed=delay is not None
    )


@router.post("/publish", summary="Publish one message", responses=_ERRORS)
async def publish(gateway: Gw, caller: Caller, message: PublishRequest) -> PublishResult:
    context, delay = _prepare(gateway, message, Origin("api", caller.name))
    _Quotas(gateway).check(context, delay, "")
    result = _send(gateway, context, delay)
    if context.qos:
        await _acknowledge(gateway, "the message")
    return result


@router.post("/publish/batch", summary="Publish several messages, in order", responses=_ERRORS)
async def publish_batch(
    gateway: Gw,
    caller: Caller,
    messages: Annotated[list[PublishRequest], Body(min_length=1, max_length=MAX_BATCH)],
) -> list[PublishResult]:
    """Every message is checked before the first is published, the broker's quotas
    (``$delayed/``, retained bounds) included, as the messages before it would use them:
    when one is refused (400, 413, 503, its index in the detail), none was published."""
    origin = Origin("api", caller.name)
    quotas = _Quotas(gateway)
    prepared = []
    for index, message in enumerate(messages):
        where = f"[{index}]."
        context, delay = _prepare(gateway, message, origin, where)
        quotas.check(context, delay, where)
        prepared.append((context, delay))
    results = [_send(gateway, context, delay) for context, delay in prepared]
    if any(context.qos for context, _ in prepared):
        await _acknowledge(gateway, "the messages")
    return results


async def _acknowledge(gateway: GatewayView, what: str) -> None:
    """Returns once the QoS 1/2 messages just published are durable; 503 when a write
    failed (they may have reached subscribers online, but are not stored)."""
    if not await written(gateway.broker):
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"the store could not write {what} (the gateway's log says why, e.g. the disk is"
            " full); not acknowledged: subscribers online may have received them, but they"
            " are not stored; publish again once the store can write",
        )
