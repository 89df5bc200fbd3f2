"""``/publish`` and ``/publish/batch``: messages into the broker, origin ``api``.

A published message goes through the same path as an MQTT client's after the ACL:
retained store, routing, delivery; ``$delayed/<seconds>/<topic>`` schedules it. The
API caller is trusted (it holds a key or is a configured user): the topic ACL, which
governs MQTT clients and adapters, does not apply. The message's origin is
``api``/<caller>, e.g. ``api``/``key-0`` or ``api``/``operator``.

A QoS 1 or 2 message is acknowledged as an MQTT PUBACK is: the answer comes once what it
changed is durable, in the broker's store and every durable participant (a bridge's
queue, the stream log; ``broker_core.acks``). A batch waits once, after its last message.
QoS 0 is answered at once, as MQTT's is fire-and-forget.

The status says whether the message was published, so that a client knows whether to
send it again:

- 4xx and 503: nothing was published. A 503 is a refusal before anything took the
  message: a broker quota (``$delayed/``, retained bounds), or a durable component that
  cannot store it now (``Broker.refusals``: a bridge queue or stream log that cannot be
  opened; an MQTT client's QoS 1/2 message there is refused whole too, 0x80).
- 200: published, and stored (QoS 1/2: ``stored`` true).
- 202: published (routed: the subscribers online may have it, the offline ones have it
  queued in memory, a retained one is retained in memory), but a write failed once it
  was routed (a full disk): not durable (``stored`` false, ``detail`` says so). The
  failure is known only after routing, and a routed message cannot be taken back; a
  503 there made a client that retries deliver it twice and one that does not believe
  it was not delivered. Publishing it again delivers it again.
"""

from __future__ import annotations

from typing import Annotated, NoReturn

from fastapi import APIRouter, Body, HTTPException, Response, status

from broker_core.clock import now as clock_now
from broker_core.context import Context, Origin
from broker_core.mqtt.session_state import message_size
from broker_core.retained import is_broker_own, retained_size
from gateway.api.components import GatewayView
from gateway.api.deps import Caller, Gw, Responses
from gateway.api.durable import written
from gateway.api.messages import PayloadError, TopicDenied, check_topic, context_of
from gateway.api.schemas import PublishRequest, PublishResult

__all__ = ["MAX_BATCH", "router"]

#: Most messages in one ``/publish/batch`` request.
MAX_BATCH = 1000

router = APIRouter(tags=["publish"])

_ERRORS: Responses = {
    400: {"description": "The message cannot be published (the detail says why)"},
    413: {"description": "The payload is larger than `mqtt.max_packet_size`"},
    503: {
        "description": "Nothing was published: over `mqtt.max_delayed_messages` or `_bytes`,"
        " or the retained bounds, or a QoS 1/2 message a durable component cannot store now"
        " (a bridge queue or the stream log that cannot be opened)"
    },
}
_NOT_STORED = "Published but not stored: a write failed after routing (`stored` false)"


def _prepare(
    gateway: GatewayView, request: PublishRequest, origin: Origin, where: str = ""
) -> tuple[Context, int | None]:
    """The Context to publish and its delay, or an HTTPException saying what is wrong
    (``where`` prefixes the message: ``[3]`` in a batch)."""
    limits = gateway.broker.limits
    try:
        delayed = check_topic(request.topic, limits.max_topic_levels)
        context = context_of(request, origin, None if delayed is None else delayed[1])
    except TopicDenied as exc:
        # Counted as Broker.publish counts the same refusal from an MQTT client.
        counters = gateway.broker.counters
        if exc.limit is not None:
            counters.hit(exc.limit)
        counters.publish_denied += 1
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"{where}{exc}") from None
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


def _check_refusals(gateway: GatewayView, context: Context, where: str) -> None:
    """Refuses, before anything takes it, a QoS 1/2 message a durable component cannot
    store now (``Broker.refusals``: its queue or log cannot be opened), as the broker
    refuses an MQTT client's (``publish_checked``); counted by that component."""
    for refusal in gateway.broker.refusals if context.qos else ():
        if refusal.refuses(context):
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                f"{where}topic: a durable component cannot store QoS {context.qos} messages of"
                " this topic now (a bridge queue or the stream log that cannot be opened:"
                " /components and the gateway's log say which); nothing was published",
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


@router.post(
    "/publish",
    summary="Publish one message",
    responses={**_ERRORS, 202: {"model": PublishResult, "description": _NOT_STORED}},
)
async def publish(
    gateway: Gw, caller: Caller, message: PublishRequest, response: Response
) -> PublishResult:
    context, delay = _prepare(gateway, message, Origin("api", caller.name))
    _Quotas(gateway).check(context, delay, "")
    _check_refusals(gateway, context, "")
    result = _send(gateway, context, delay)
    if context.qos:
        [result] = await _acknowledge(gateway, [(context, result)], response)
    return result


@router.post(
    "/publish/batch",
    summary="Publish several messages, in order",
    responses={**_ERRORS, 202: {"model": list[PublishResult], "description": _NOT_STORED}},
)
async def publish_batch(
    gateway: Gw,
    caller: Caller,
    messages: Annotated[list[PublishRequest], Body(min_length=1, max_length=MAX_BATCH)],
    response: Response,
) -> list[PublishResult]:
    """Every message is checked before the first is published, the broker's quotas
    (``$delayed/``, retained bounds) and refusals included, as the messages before it
    would use them: when one is refused (400, 413, 503, its index in the detail), none
    was published."""
    origin = Origin("api", caller.name)
    quotas = _Quotas(gateway)
    prepared = []
    for index, message in enumerate(messages):
        where = f"[{index}]."
        context, delay = _prepare(gateway, message, origin, where)
        quotas.check(context, delay, where)
        _check_refusals(gateway, context, where)
        prepared.append((context, delay))
    sent = [(context, _send(gateway, context, delay)) for context, delay in prepared]
    if any(context.qos for context, _ in sent):
        return await _acknowledge(gateway, sent, response)
    return [result for _, result in sent]


async def _acknowledge(
    gateway: GatewayView, sent: list[tuple[Context, PublishResult]], response: Response
) -> list[PublishResult]:
    """The results of the messages just published, once their QoS 1/2 ones are durable
    (``stored`` true). When a write failed they are published all the same (routed, not
    to be taken back), not stored: ``stored`` false with a ``detail``, status 202."""
    ok = await written(gateway.broker)
    if not ok:
        response.status_code = status.HTTP_202_ACCEPTED
    results = []
    for context, result in sent:
        if not context.qos:
            results.append(result)
        elif ok:
            results.append(result.model_copy(update={"stored": True}))
        else:
            results.append(result.model_copy(update={"stored": False, "detail": _detail(result)}))
    return results


def _detail(result: PublishResult) -> str:
    done = (
        "scheduled ($delayed/)"
        if result.delayed
        else f"published: routed to {result.reached} subscriber(s) (those online may have"
        " received it, the offline ones have it queued in memory; retained in memory when"
        " retained)"
    )
    return (
        f"{done}, but not stored: the store could not write it (the gateway's log says why,"
        " e.g. a full disk). It does not survive a restart, and a bridge queue or the stream"
        " log whose write failed may not have it. Publishing it again delivers it again"
        " to those that have it."
    )
