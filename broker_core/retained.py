"""Retained messages (MQTT 5.0 3.3.1.3): one per topic, found by topic filter.

Kept in a topic trie so a wildcard subscription walks only the matching branches.
A retained message with an empty payload clears the topic [MQTT-3.3.1-6, -7]. The
clients' messages are bounded by ``max_messages`` and by ``max_bytes`` (their topics,
payloads and properties; 0: no limit). A message that would pass a bound is refused and
counted in ``refused`` (and by ``on_refused`` with the bound's name); replacing a topic
with a message no larger, and clearing one, always work.

The broker's own messages (``is_broker_own``: origin ``sys`` on a ``$SYS/`` topic, the
statistics of ``broker_core.sys_topics``) are held beside those bounds: neither counted
against them nor refused by them, so a small ``max_messages`` is the clients' to use and
the statistics stay retained. The broker bounds them itself: the 13 statistics topics
of ``broker_core.sys_topics`` (short numbers and the version, under
``$SYS/brokers/<node>/``); its client and component events are not retained, and
clients cannot publish to ``$SYS``.
``len()`` and ``bytes`` count every message held, the broker's included (``own`` and
``own_bytes`` count those).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from broker_core.context import Context
from broker_core.mqtt.properties import EMPTY

__all__ = ["RetainedStore", "is_broker_own", "retained_size"]


def retained_size(context: Context) -> int:
    """What a retained message counts against ``max_bytes``."""
    props = context.properties
    size = len(context.topic) + len(context.payload)
    return size if props is EMPTY else size + len(props.encoded())


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

    def __len__(self) -> int:
        return self._count

    def over_limit(self, context: Context) -> str | None:
        """The bound storing ``context`` would pass (``retained_messages`` or
        ``retained_bytes``), or None; counts nothing."""
        if not context.payload or is_broker_own(context):
            return None
        existing = self.get(context.topic)
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
        """Stores, replaces or (empty payload) clears; False when refused by a bound."""
        if not context.payload:
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
        return True

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
        for parent, level in reversed(trail):
            child = parent.children[level]
            if child.message is not None or child.children:
                break
            del parent.children[level]
        return True

    def get(self, topic: str) -> Context | None:
        node = self._root
        for level in topic.split("/"):
            child = node.children.get(level)
            if child is None:
                return None
            node = child
        return node.message

    def match(self, topic_filter: str) -> list[Context]:
        """Retained messages whose topic matches ``topic_filter``."""
        if "+" not in topic_filter and "#" not in topic_filter:
            found = self.get(topic_filter)
            return [] if found is None else [found]
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

    def __iter__(self) -> Iterator[Context]:
        stack = [self._root]
        while stack:
            node = stack.pop()
            if node.message is not None:
                yield node.message
            stack.extend(node.children.values())
