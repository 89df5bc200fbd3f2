"""``/retained``: list, read and delete retained messages.

Deleting is what an empty retained PUBLISH does: the message is gone from memory and,
with persistence, from the store; the answer waits until the store wrote the deletion
(503, the message retained again, when it could not). An expired message is gone (MQTT
5.0 3.3.2.3.3); a live one shows the seconds of its Message Expiry Interval left, as a
subscriber gets it.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status

from broker_core.clock import now as clock_now
from broker_core.context import Context
from broker_core.mqtt.topics import too_deep, topic_filter_problem
from broker_core.retained import as_of
from gateway.api.deps import MAX_QUERY, Caller, Gw, Limit, Offset, Responses, page
from gateway.api.durable import written
from gateway.api.messages import message_of
from gateway.api.schemas import Message, RetainedPage

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["retained"])

_NOT_FOUND: Responses = {404: {"description": "No retained message for this topic"}}
_DELETE: Responses = {
    **_NOT_FOUND,
    400: {"description": "A `$SYS` topic: the broker's own, as for a publish"},
    503: {"description": "The store could not write the deletion; the message stays retained"},
}


@router.get(
    "/retained",
    summary="Retained messages, a page at a time",
    responses={400: {"description": "Not a valid topic filter"}},
)
async def list_retained(
    gateway: Gw,
    offset: Offset = 0,
    limit: Limit = 100,
    topic: Annotated[
        str | None,
        Query(
            max_length=MAX_QUERY,
            description="A topic filter (`sensors/#`); none: all, `$SYS` topics included.",
        ),
    ] = None,
) -> RetainedPage:
    store = gateway.broker.retained
    now = clock_now()
    found: list[Context]
    if topic is None:
        found = list(store)
    else:
        problem = topic_filter_problem(topic)
        if problem is not None:
            raise HTTPException(status.HTTP_400_BAD_REQUEST, f"topic: {problem}")
        max_levels = gateway.broker.limits.max_topic_levels
        if too_deep(topic, max_levels):  # as a SUBSCRIBE's filter is refused
            raise HTTPException(
                status.HTTP_400_BAD_REQUEST,
                f"topic: {topic.count('/') + 1} levels, more than mqtt.max_topic_levels"
                f" ({max_levels})",
            )
        found = store.match(topic, now)
    found.sort(key=lambda context: context.topic)
    return RetainedPage(
        total=len(found),
        offset=offset,
        limit=limit,
        items=[message_of(as_of(context, now)) for context in page(found, offset, limit)],
    )


@router.get("/retained/{topic:path}", summary="One retained message", responses=_NOT_FOUND)
async def get_retained(gateway: Gw, topic: str) -> Message:
    now = clock_now()
    context = gateway.broker.retained.get(topic, now) if topic else None
    if context is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no retained message for {topic!r}")
    return message_of(as_of(context, now))


@router.delete(
    "/retained/{topic:path}",
    summary="Delete a retained message",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=_DELETE,
)
async def delete_retained(gateway: Gw, caller: Caller, topic: str) -> Response:
    if topic.startswith("$SYS"):  # as POST /publish refuses it (an empty retained publish)
        raise HTTPException(status.HTTP_400_BAD_REQUEST, "topic: $SYS topics belong to the broker")
    broker = gateway.broker
    context = broker.retained.get(topic) if topic else None
    if context is None or not broker.retained.clear(topic):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no retained message for {topic!r}")
    if context.origin.protocol != "sys":  # $SYS messages are never stored
        broker.store.retained_cleared(topic)
        if not await written(broker):
            if broker.retained.get(topic) is None:  # as the store still has it
                broker.retained.set(context)
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                f"the store could not write the deletion of the retained message on {topic!r}"
                " (the gateway's log says why, e.g. the disk is full); it is still retained:"
                " delete it again once the store can write",
            )
    log.info("retained message on %s deleted through the API by %s", topic, caller.name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
