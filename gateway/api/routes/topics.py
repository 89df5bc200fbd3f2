"""``/topics``: the topic tree of subscriptions and retained messages (see topic_tree)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status

from gateway.api.deps import MAX_QUERY, Gw
from gateway.api.schemas import TopicTree
from gateway.api.topic_tree import TopicTreeBuilder

__all__ = ["MAX_DEPTH", "router"]

#: Deepest tree the API returns (MQTT topics may have thousands of levels).
MAX_DEPTH = 64

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
    builder = TopicTreeBuilder()
    for entry in broker.router.entries():
        builder.add_filter(entry.topic_filter)
    for context in broker.retained:
        builder.add_retained(context.topic)
    tree = builder.tree(root, depth)
    if tree is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no topic {root!r} in the tree")
    return tree
