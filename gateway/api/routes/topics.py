"""``/topics``: the topic tree of subscriptions and retained messages (see topic_tree)."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status

from gateway.api.deps import MAX_QUERY, Gw
from gateway.api.schemas import TopicTree
from gateway.api.topic_tree import LevelTreeBuilder

__all__ = ["MAX_DEPTH", "router"]

#: Deepest tree the API returns (MQTT topics may have thousands of levels).
MAX_DEPTH = 64

#: Levels added to the answer between two turns of the event loop.
_CHUNK = 2000

router = APIRouter(tags=["topics"])


@router.get(
    "/topics",
    summary="The topic tree",
    responses={404: {"description": "`root` is not in the tree"}},
)
async def topic_tree(
    gateway: Gw,
    root: Annotated[
        str | None,
        Query(max_length=MAX_QUERY, description="Show the tree below this topic, e.g. `a/b`."),
    ] = None,
    depth: Annotated[int, Query(ge=1, le=MAX_DEPTH, description="Levels shown.")] = 16,
) -> TopicTree:
    broker = gateway.broker
    levels = root.split("/") if root else []
    subscribed = broker.router.levels(levels, depth)
    broker.retained.expire()  # show no expired message
    retained = broker.retained.levels(levels, depth)
    if subscribed is None and retained is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no topic {root!r} in the tree")
    # Only the levels shown are walked; the loop runs every _CHUNK of them (the tries'
    # walks copy each node's children when they reach it, so changes meanwhile are safe).
    builder = LevelTreeBuilder(root or None)
    done = 0
    for topic, count in subscribed or ():
        builder.add(topic, subscriptions=count)
        done += 1
        if not done % _CHUNK:
            await asyncio.sleep(0)
    for topic, held in retained or ():
        builder.add(topic, retained=held)
        done += 1
        if not done % _CHUNK:
            await asyncio.sleep(0)
    return builder.tree()
