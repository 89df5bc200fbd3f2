"""``/publish`` and ``/publish/batch``: messages into the broker, origin ``api``.

A published message goes through the same path as an MQTT client's after the ACL:
retained store, routing, delivery; ``$delayed/<seconds>/<topic>`` schedules it. The
API caller is trusted (it holds a key or is a configured user): the topic ACL, which
governs MQTT clients and adapters, does not apply. The message's origin is
``api``/<caller>, e.g. ``api``/``key-0`` or ``api``/``operator``.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Body, HTTPException, status

from broker_core.context import Context, Origin
from gateway.api.components import GatewayView
from gateway.api.deps import Caller, Gw, Responses
from gateway.api.messages import PayloadError, check_topic, context_of
from gateway.api.schemas import PublishRequest, PublishResult

__all__ = ["MAX_BATCH", "router"]

#: Most messages in one ``/publish/batch`` request.
MAX_BATCH = 1000

router = APIRouter(tags=["publish"])

_ERRORS: Responses = {
    400: {"description": "The message cannot be published (the detail says why)"},
    413: {"description": "The payload is larger than `mqtt.max_packet_size`"},
}


def _prepare(
    gateway: GatewayView, request: PublishRequest, origin: Origin, where: str = ""
) -> tuple[Context, int | None]:
    """The Context to publish and its delay, or an HTTPException saying what is wrong
    (``where`` prefixes the message: ``[3]`` in a batch)."""
    limits = gateway.broker.limits
    try:
        delayed = check_topic(request.topic)
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


def _send(gateway: GatewayView, context: Context, delay: int | None) -> PublishResult:
    broker = gateway.broker
    now = time.time()
    if delay is not None:
        if not broker.delayed.schedule(context, delay, now):
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                "too many delayed messages waiting (mqtt.max_delayed_messages)",
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
    return _send(gateway, context, delay)


@router.post("/publish/batch", summary="Publish several messages, in order", responses=_ERRORS)
async def publish_batch(
    gateway: Gw,
    caller: Caller,
    messages: Annotated[list[PublishRequest], Body(min_length=1, max_length=MAX_BATCH)],
) -> list[PublishResult]:
    """Every message is checked before the first is published: when one is refused
    (400, 413, its index in the detail), none was published."""
    origin = Origin("api", caller.name)
    prepared = [
        _prepare(gateway, message, origin, f"[{index}].") for index, message in enumerate(messages)
    ]
    return [_send(gateway, context, delay) for context, delay in prepared]
