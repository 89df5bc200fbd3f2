"""``/subscriptions``: every subscription, of clients and of local subscribers."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status

from broker_core.errors import MalformedPacket
from broker_core.mqtt.session_state import SessionState
from broker_core.mqtt.topics import (
    SHARE_PREFIX,
    filter_matches,
    parse_shared,
    topic_filter_problem,
    topic_name_problem,
)
from broker_core.router import Entry
from gateway.api.deps import MAX_QUERY, Gw, Limit, Offset, page
from gateway.api.schemas import SubscriptionInfo, SubscriptionPage

__all__ = ["router", "subscription_info"]

router = APIRouter(tags=["subscriptions"])


def subscription_info(entry: Entry) -> SubscriptionInfo:
    subscriber = entry.subscriber
    if isinstance(subscriber, SessionState):
        clientid, kind = subscriber.client_id, "mqtt"
    else:
        origin = getattr(subscriber, "origin", None)
        clientid = getattr(origin, "name", "") or ""
        kind = getattr(origin, "protocol", "local") or "local"
    group = None
    if entry.topic_filter.startswith(SHARE_PREFIX):
        group = entry.topic_filter[len(SHARE_PREFIX) :].partition("/")[0]
    options = entry.options
    return SubscriptionInfo(
        clientid=clientid,
        kind=kind,
        topic=entry.topic_filter,
        share_group=group,
        qos=options.qos,
        no_local=options.no_local,
        retain_as_published=options.retain_as_published,
        retain_handling=options.retain_handling,
        subscription_id=entry.subscription_ids[0] if entry.subscription_ids else None,
    )


def _inner(topic_filter: str) -> str:
    if topic_filter.startswith(SHARE_PREFIX):
        return topic_filter[len(SHARE_PREFIX) :].partition("/")[2]
    return topic_filter


def _filter_problem(topic_filter: str) -> str | None:
    """Why ``topic_filter`` cannot be a subscription's filter (``$share/...`` included)."""
    if topic_filter.startswith(SHARE_PREFIX):
        try:
            parse_shared(topic_filter)
        except MalformedPacket as exc:
            return str(exc)
        return None
    return topic_filter_problem(topic_filter)


@router.get(
    "/subscriptions",
    summary="Subscriptions, a page at a time",
    responses={400: {"description": "`topic` is not a topic filter, `matches` not a topic name"}},
)
async def list_subscriptions(
    gateway: Gw,
    offset: Offset = 0,
    limit: Limit = 100,
    clientid: Annotated[
        str | None, Query(max_length=MAX_QUERY, description="Only this subscriber's.")
    ] = None,
    topic: Annotated[
        str | None, Query(max_length=MAX_QUERY, description="Only this exact filter.")
    ] = None,
    matches: Annotated[
        str | None,
        Query(max_length=MAX_QUERY, description="Only filters matching this topic name."),
    ] = None,
    share_group: Annotated[str | None, Query(max_length=MAX_QUERY)] = None,
    kind: Annotated[
        str | None, Query(max_length=64, description="`mqtt`, or a local protocol.")
    ] = None,
) -> SubscriptionPage:
    # As /retained answers a filter that is not one: 400, not an empty page.
    problem = None if topic is None else _filter_problem(topic)
    if problem is not None:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"topic: {problem}")
    problem = None if matches is None else topic_name_problem(matches)
    if problem is not None:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"matches: {problem}")
    items: list[SubscriptionInfo] = []
    for entry in gateway.broker.router.entries():
        if topic is not None and entry.topic_filter != topic:
            continue
        if matches is not None and not filter_matches(_inner(entry.topic_filter), matches):
            continue
        info = subscription_info(entry)
        if clientid is not None and info.clientid != clientid:
            continue
        if share_group is not None and info.share_group != share_group:
            continue
        if kind is not None and info.kind != kind:
            continue
        items.append(info)
    items.sort(key=lambda item: (item.clientid, item.topic))
    return SubscriptionPage(
        total=len(items), offset=offset, limit=limit, items=page(items, offset, limit)
    )
