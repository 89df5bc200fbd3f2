"""Retained messages (MQTT 5.0 3.3.1.3): one per topic, found by topic filter.

Kept in a topic trie so a wildcard subscription walks only the matching branches.
A retained message with an empty payload clears the topic [MQTT-3.3.1-6, -7]. The
clients' messages are bounded by ``max_messages`` and by ``max_bytes`` (their topics,
payloads and properties, and ``LEVEL_BYTES`` a topic level for the trie; 0: no limit).
A message that would pass a bound is refused and counted in ``refused`` (and by
``on_refused`` with the bound's name); replacing a topic with a message no larger, and
clearing one, always work.

The broker's own messages (``is_broker_own``: origin ``sys`` on a ``$SYS/`` topic, the
statistics of ``broker_core.sys_topics``) are held beside those bounds: neither counted
against them nor refused by them, so a small ``max_messages`` is the clients' to use and
the statistics stay retained. The broker bounds them itself: the 13 statistics topics
of ``broker_core.sys_topics`` (short numbers and the version, under
``$SYS/brokers/<node>/``); its client and component events are not retained, and
clients cannot publish to ``$SYS``.
``len()`` and ``bytes`` count every message held, the broker's included (``own`` and
``own_bytes`` count those).

A message with a Message Expiry Interval is deleted once it has passed (MQTT 5.0
3.3.2.3.3; mosquitto and EMQX delete them too): ``get``, ``match`` and iteration never
return an expired one and remove what they find, ``over_limit`` first removes what has
expired (so the bounds count only live messages), and ``expire(now, limit)`` removes the
expired ones in order of expiry, a bounded batch per call: the broker's periodic sweep
(``Broker.run``) and its statistics call it. A heap keyed by the expiry time finds them;
an entry whose topic was replaced or cleared since is skipped when it comes up, and the
heap is rebuilt when such entries outnumber the live ones. ``on_expired`` hears of each
removed message (the broker deletes it from the persistent store). Messages without an
expiry interval cost nothing of this.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import replace

from broker_core.clock import now as clock_now
from broker_core.context import Context
from broker_core.mqtt.session_state import message_size
from broker_core.router import walk_levels

__all__ = [
    "LEVEL_BYTES",
    "SWEEP_BATCH",
    "RetainedStore",
    "as_of",
    "clears",
    "is_broker_own",
    "retained_size",
]

#: expired messages one call of the periodic sweep removes at most (``Broker.run``)
SWEEP_BATCH = 10_000


#: what one level of a retained message's topic costs the store's trie (a node and its
#: children dict: ~234 bytes measured with tracemalloc on CPython 3.12), counted against
#: ``max_bytes`` so that the bound holds for memory and not only for topic characters
LEVEL_BYTES = 240


def retained_size(context: Context) -> int:
    """What a retained message counts against ``max_bytes``: its topic, payload and
    properties, and ``LEVEL_BYTES`` for each level of its topic."""
    return message_size(context) + LEVEL_BYTES * (context.topic.count("/") + 1)


def as_of(context: Context, now: float) -> Context:
    """``context`` as it would be sent at wall time ``now``: its Message Expiry Interval
    is the whole seconds left (at least 1, as on the wire, ``mqtt.delivery``)."""
    remaining = context.expiry_remaining(now)
    props = context.properties
    if remaining is None or remaining == props.message_expiry_interval:
        return context
    return replace(context, properties=replace(props, message_expiry_interval=max(remaining, 1)))


def clears(context: Context) -> bool:
    """A retained PUBLISH that leaves its topic no retained message: an empty payload
    [MQTT-3.3.1-6], or a Message Expiry Interval of 0, whose lifetime has passed when it
    would be stored: it replaces what the topic had [MQTT-3.3.1-5] and expires at once
    (MQTT 5.0 3.3.2.3.3). Either way it is still delivered to the subscribers."""
    return not context.payload or context.properties.message_expiry_interval == 0


def _expires_at(context: Context) -> float | None:
    """Wall time at which ``context`` has expired (``Context.expiry_remaining`` <= 0)."""
    interval = context.properties.message_expiry_interval
    return None if interval is None else context.received_at / 1e9 + interval


def is_broker_own(context: Context) -> bool:
    """A message the broker publishes about itself (``$SYS`` statistics): outside the
    clients' bounds, and never persisted (``Broker._retain``)."""
    return context.origin.protocol == "sys" and context.topic.startswith("$SYS/")


class _Node:
    __slots__ = ("children", "message")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.message: Context | None = None


class RetainedStore:
    def __init__(
        self,
        max_messages: int = 0,
        max_bytes: int = 0,
        on_refused: Callable[[str], None] | None = None,
        on_expired: Callable[[Context], None] | None = None,
    ) -> None:
        self._root = _Node()
        self._count = 0
        self.bytes = 0
        #: the broker's own messages among them (``is_broker_own``), outside the bounds
        self.own = 0
        self.own_bytes = 0
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.on_refused = on_refused
        self.refused = 0
        self.on_expired = on_expired
        #: messages removed because their Message Expiry Interval passed
        self.expired = 0
        # The messages with an expiry interval: topic -> when it has expired (wall time),
        # and a heap of (that time, topic); a heap entry that disagrees is stale.
        self._expires: dict[str, float] = {}
        self._due: list[tuple[float, str]] = []

    def __len__(self) -> int:
        """Messages held; one expired since the last ``expire`` or access may be among
        them (the periodic sweep removes it)."""
        return self._count

    def expire(self, now: float | None = None, limit: int | None = None) -> int:
        """Removes the messages expired at ``now`` (at most ``limit``), soonest first;
        returns how many."""
        due = self._due
        if not due:
            return 0
        if now is None:
            now = clock_now()
        expires = self._expires
        removed = 0
        while due and due[0][0] <= now and (limit is None or removed < limit):
            at, topic = heapq.heappop(due)
            if expires.get(topic) != at:
                continue  # replaced or cleared since
            message = self._find(topic)
            if message is not None:
                self._remove_expired(message)
                removed += 1
        return removed

    def _remove_expired(self, message: Context) -> None:
        self.clear(message.topic)
        self.expired += 1
        if self.on_expired is not None:
            self.on_expired(message)

    def over_limit(self, context: Context, now: float | None = None) -> str | None:
        """The bound storing ``context`` would pass (``retained_messages`` or
        ``retained_bytes``), or None; counts nothing (expired messages are removed first)."""
        if clears(context) or is_broker_own(context):
            return None
        if self._due:
            self.expire(now)
        existing = self._find(context.topic)
        if existing is not None and is_broker_own(existing):
            existing = None  # not counted: the topic is new to the bounds
        if existing is None and self.max_messages and self._count - self.own >= self.max_messages:
            return "retained_messages"
        if self.max_bytes:
            grow = retained_size(context) - (0 if existing is None else retained_size(existing))
            if grow > 0 and self.bytes - self.own_bytes + grow > self.max_bytes:
                return "retained_bytes"
        return None

    def refuse(self, limit: str) -> None:
        """Counts a message refused for ``limit``."""
        self.refused += 1
        if self.on_refused is not None:
            self.on_refused(limit)

    def set(self, context: Context) -> bool:
        """Stores, replaces or clears (``clears``); False when refused by a bound."""
        if clears(context):
            self.clear(context.topic)
            return True
        limit = self.over_limit(context)
        if limit is not None:
            self.refuse(limit)
            return False
        node = self._root
        for level in context.topic.split("/"):
            child = node.children.get(level)
            if child is None:
                child = node.children[level] = _Node()
            node = child
        if node.message is None:
            self._count += 1
        else:
            self._forget(node.message)
        size = retained_size(context)
        self.bytes += size
        if is_broker_own(context):
            self.own += 1
            self.own_bytes += size
        node.message = context
        if context.properties.message_expiry_interval is not None:
            self._expiring(context)
        elif self._expires:
            self._expires.pop(context.topic, None)
        return True

    def _expiring(self, context: Context) -> None:
        """Tracks a message with an expiry interval (it replaced any other on its topic)."""
        at = _expires_at(context)
        assert at is not None
        self._expires[context.topic] = at
        due = self._due
        heapq.heappush(due, (at, context.topic))
        if len(due) > 2 * len(self._expires) + 64:  # mostly replaced or cleared entries
            self._due = [(when, topic) for topic, when in self._expires.items()]
            heapq.heapify(self._due)

    def _forget(self, message: Context) -> None:
        """Takes a replaced or cleared message's bytes (and broker's own) off the counts."""
        size = retained_size(message)
        self.bytes -= size
        if is_broker_own(message):
            self.own -= 1
            self.own_bytes -= size

    def clear(self, topic: str) -> bool:
        node = self._root
        trail: list[tuple[_Node, str]] = []
        for level in topic.split("/"):
            child = node.children.get(level)
            if child is None:
                return False
            trail.append((node, level))
            node = child
        if node.message is None:
            return False
        self._forget(node.message)
        node.message = None
        self._count -= 1
        if self._expires:
            self._expires.pop(topic, None)
        for parent, level in reversed(trail):
            child = parent.children[level]
            if child.message is not None or child.children:
                break
            del parent.children[level]
        return True

    def get(self, topic: str, now: float | None = None) -> Context | None:
        """The message retained on ``topic``; None when there is none or it has expired
        at ``now`` (then it is removed)."""
        found = self._find(topic)
        if found is None or found.properties.message_expiry_interval is None:
            return found
        if self._expired(found, now):
            self._remove_expired(found)
            return None
        return found

    def _expired(self, message: Context, now: float | None) -> bool:
        at = _expires_at(message)
        return at is not None and at <= (clock_now() if now is None else now)

    def _find(self, topic: str) -> Context | None:
        node = self._root
        for level in topic.split("/"):
            child = node.children.get(level)
            if child is None:
                return None
            node = child
        return node.message

    def match(self, topic_filter: str, now: float | None = None) -> list[Context]:
        """Retained messages whose topic matches ``topic_filter``, none expired at ``now``
        (those found are removed)."""
        if "+" not in topic_filter and "#" not in topic_filter:
            found = self.get(topic_filter, now)
            return [] if found is None else [found]
        out = self._match(topic_filter)
        if not self._expires:
            return out
        if now is None:
            now = clock_now()
        expired = [m for m in out if self._expired(m, now)]
        for message in expired:
            self._remove_expired(message)
        return [m for m in out if not self._expired(m, now)] if expired else out

    def _match(self, topic_filter: str) -> list[Context]:
        levels = topic_filter.split("/")
        depth = len(levels)
        out: list[Context] = []
        stack = [(self._root, 0)]
        while stack:
            node, i = stack.pop()
            if i == depth:
                if node.message is not None:
                    out.append(node.message)
                continue
            level = levels[i]
            if level == "#":
                # Everything at and below this level, but a leading wildcard skips
                # $-topics [MQTT-4.7.2-1].
                if node.message is not None and i:
                    out.append(node.message)
                sub = [(node, i)]
                while sub:
                    n, j = sub.pop()
                    for name, child in n.children.items():
                        if j == 0 and name.startswith("$"):
                            continue
                        if child.message is not None:
                            out.append(child.message)
                        sub.append((child, j + 1))
                continue
            if level == "+":
                for name, child in node.children.items():
                    if i == 0 and name.startswith("$"):
                        continue
                    stack.append((child, i + 1))
            else:
                branch = node.children.get(level)
                if branch is not None:
                    stack.append((branch, i + 1))
        return out

    def levels(self, root: list[str], depth: int) -> Iterator[tuple[str, bool]] | None:
        """The trie below the topic levels ``root`` ([]: all of it), at most ``depth``
        levels deep, for the API's topic tree: ``(topic, whether a message is held
        there)`` for each level, a parent before its children; None when ``root`` is in
        no topic. Each node's children are copied when it is reached, so the caller may
        let the loop run between items. Call ``expire`` first to leave expired ones out."""
        return walk_levels(self._root, root, depth, _holds)

    def __iter__(self) -> Iterator[Context]:
        """Every message held, once those expired are removed."""
        self.expire()
        stack = [self._root]
        while stack:
            node = stack.pop()
            if node.message is not None:
                yield node.message
            stack.extend(node.children.values())


def _holds(node: _Node) -> bool:
    return node.message is not None
