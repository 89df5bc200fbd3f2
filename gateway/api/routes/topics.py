"""``/topics``: the topic tree of subscriptions and retained messages (see topic_tree).

An answer holds at most ``limit`` nodes (``MAX_NODES`` at most): it is built and sent in
one turn of the event loop. The tries are walked breadth first, both at once (every
node of a level before any of the next), so an answer cut at ``limit`` holds the tree
whole down to its deepest level, and that level in part; it says ``truncated`` and marks
``more`` the nodes whose children it leaves out, to be asked for with ``root``.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Iterable, Iterator
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status

from gateway.api.deps import MAX_QUERY, Gw
from gateway.api.schemas import TopicTree
from gateway.api.topic_tree import LevelTreeBuilder

__all__ = ["DEFAULT_NODES", "MAX_DEPTH", "MAX_NODES", "router"]

#: Deepest tree the API returns (MQTT topics may have thousands of levels).
MAX_DEPTH = 64

#: Most nodes in one answer (``limit``), and the default: building and encoding an
#: answer holds the event loop about 10 ms per 1,000 nodes (110,001 nodes uncut: ~1 s).
MAX_NODES = 10_000
DEFAULT_NODES = 1_000

#: Levels added to the answer between two turns of the event loop.
_CHUNK = 2000

router = APIRouter(tags=["topics"])

_Item = tuple[str, int, bool]  # topic, subscriptions ending there, a retained message held


def _level(item: _Item) -> int:
    return item[0].count("/")


def _subscribed(levels: Iterable[tuple[str, int]] | None) -> Iterator[_Item]:
    for topic, count in levels or ():
        yield topic, count, False


def _retained(levels: Iterable[tuple[str, bool]] | None) -> Iterator[_Item]:
    for topic, held in levels or ():
        yield topic, 0, held


@router.get(
    "/topics",
    summary="The topic tree",
    responses={404: {"description": "`root` is not in the tree"}},
    response_model_exclude_none=True,  # ``truncated`` and ``more`` only in a cut answer
)
async def topic_tree(
    gateway: Gw,
    root: Annotated[
        str | None,
        Query(max_length=MAX_QUERY, description="Show the tree below this topic, e.g. `a/b`."),
    ] = None,
    depth: Annotated[int, Query(ge=1, le=MAX_DEPTH, description="Levels shown.")] = 16,
    limit: Annotated[
        int, Query(ge=1, le=MAX_NODES, description="Most nodes in the answer.")
    ] = DEFAULT_NODES,
) -> TopicTree:
    broker = gateway.broker
    # An empty root is a topic too, the empty first level (of ``/a/b``); no root: all.
    levels = root.split("/") if root is not None else []
    subscribed = broker.router.levels(levels, depth)
    broker.retained.expire()  # show no expired message
    retained = broker.retained.levels(levels, depth)
    if subscribed is None and retained is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no topic {root!r} in the tree")
    # Only the levels shown are walked; the loop runs every _CHUNK of them (the tries'
    # walks copy each node's children when they reach it, so changes meanwhile are safe).
    # Both walks are breadth first: merged by level, a parent still comes before its
    # children, and the subscriptions of a level before its retained messages.
    builder = LevelTreeBuilder(root)
    cut = -1  # the level ("/"s in its topic) of the first node left out
    merged = heapq.merge(_subscribed(subscribed), _retained(retained), key=_level)
    for done, item in enumerate(merged, 1):
        topic = item[0]
        if builder.nodes >= limit and topic not in builder:
            if cut < 0:
                cut = topic.count("/")
            elif topic.count("/") > cut:
                break  # the rest of the cut level was read: its nodes shown are whole
        else:
            builder.add(*item)
        if not done % _CHUNK:
            await asyncio.sleep(0)
    if cut >= 0:
        builder.truncated = True
        await _mark_more(gateway, builder, cut, len(levels) + depth - 1)
    return builder.tree()


async def _mark_more(gateway: Gw, builder: LevelTreeBuilder, cut: int, deepest: int) -> None:
    """Marks ``more`` the nodes of ``builder`` whose children (no deeper than the level
    ``deepest``) it leaves out: those of the level ``cut - 1``, whose children are of the
    cut level, and those of the cut level that have any."""
    broker = gateway.broker
    read = 0
    for topic in builder.topics():
        level = topic.count("/")
        if level < cut - 1 or level >= deepest:
            continue
        below = topic.split("/")
        for walk in (broker.router.levels(below, 1), broker.retained.levels(below, 1)):
            for child, _ in walk or ():
                read += 1
                if child not in builder:
                    builder.mark_more(topic)
                    break
            else:
                continue
            break  # marked: the other trie need not be read
        read += 1
        if read >= _CHUNK:
            read = 0
            await asyncio.sleep(0)
