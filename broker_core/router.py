"""Subscription trie, shared-subscription groups and fan-out targets (MQTT 5.0 4.7, 4.8).

``Router.match(topic)`` returns the ``Targets`` of a topic: each subscriber with every
one of its subscriptions that match (a client with overlapping subscriptions gets one
message carrying the maximum QoS and all subscription identifiers [MQTT-3.3.4-2, -5]),
and the shared-subscription groups whose filter matches. Results are cached per topic
until the subscriptions change, so a steady stream to a fixed topic walks the trie once;
the cache is bounded in topics and in bytes (``_CACHE_LIMIT``, ``_CACHE_BYTES``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar

from broker_core.context import Context
from broker_core.mqtt.packets import SubscriptionOptions
from broker_core.mqtt.session_state import Subscription
from broker_core.mqtt.topics import parse_shared

__all__ = ["Entry", "Router", "SharedGroup", "Subscriber", "Targets", "walk_levels"]

V = TypeVar("V")

#: The match cache (``Router.match``) holds at most this many topics ...
_CACHE_LIMIT = 8192
#: ... and about this many bytes (``_cost``: the topic's characters and the targets'
#: objects); past either it is emptied, counted in ``cache_clears`` (limit
#: ``router_cache``). A topic whose targets alone cost more than a 64th of it (a 65 KB
#: topic name, a topic with thousands of subscribers) is matched every time instead.
_CACHE_BYTES = 8 * 1024 * 1024
_CACHE_ENTRY_MAX = _CACHE_BYTES // 64
# Estimated bytes of a cache entry beyond its topic's characters (the dict slot, the
# key's header, a Targets and its lists), and of each subscriber or group it holds (a
# tuple, its entries tuple, a list slot): measured with tracemalloc, rounded up.
_ENTRY_COST = 320
_TARGET_COST = 160


class Subscriber(Protocol):
    """What the router delivers to: a client's SessionState or an in-process consumer."""

    @property
    def online(self) -> bool: ...

    def deliver(
        self,
        context: Context,
        qos: int,
        retain: bool,
        subscription_ids: tuple[int, ...],
        cache: dict[Any, Any],
        now: float,
    ) -> None: ...


class Entry(Subscription):
    """One subscription of one subscriber to one filter: the subscriber's record of it
    too (a ``SessionState`` keeps its entries as its ``Subscription`` objects)."""

    __slots__ = ("no_local", "qos", "retain_as_published", "subscriber")

    def __init__(
        self,
        subscriber: Subscriber,
        topic_filter: str,
        options: SubscriptionOptions,
        subscription_id: int | None = None,
    ) -> None:
        super().__init__(topic_filter, options, subscription_id)
        self.subscriber = subscriber
        self.qos = options.qos
        self.no_local = options.no_local
        self.retain_as_published = options.retain_as_published


class SharedGroup:
    """``$share/{name}/{filter}``: each message goes to one member, round-robin."""

    __slots__ = ("members", "name", "next_index", "topic_filter")

    def __init__(self, name: str, topic_filter: str) -> None:
        self.name = name
        self.topic_filter = topic_filter
        self.members: list[Entry] = []
        self.next_index = 0

    def pick(self) -> Entry | None:
        """The next live member in turn; an offline one (to queue for) only if none is live."""
        members = self.members
        n = len(members)
        if not n:
            return None
        start = self.next_index % n
        for step in range(n):
            entry = members[(start + step) % n]
            if entry.subscriber.online:
                self.next_index = start + step + 1
                return entry
        self.next_index = start + 1
        return members[start]


_NO_CHILDREN: dict[str, _Node] = {}


class _Node:
    """A level of the trie. Its subscriptions (``entries``): None, the one ``Entry`` of a
    filter with a single subscriber (most filters: a client's own topic; a dict of one
    costs 224 bytes a client), or a dict by subscriber once there are more."""

    __slots__ = ("children", "entries", "shared")

    def __init__(self) -> None:
        # A leaf shares _NO_CHILDREN (never written to: _node makes its own dict first).
        self.children: dict[str, _Node] = _NO_CHILDREN
        self.entries: Entry | dict[Subscriber, Entry] | None = None
        self.shared: dict[str, SharedGroup] | None = None  # built on the first group

    def each(self) -> Iterable[Entry]:
        entries = self.entries
        if entries is None:
            return ()
        if type(entries) is Entry:
            return (entries,)
        return entries.values()  # type: ignore[union-attr]

    def put(self, entry: Entry) -> bool:
        """Adds or replaces ``entry.subscriber``'s entry; True when it replaced one."""
        entries = self.entries
        subscriber = entry.subscriber
        if entries is None or (type(entries) is Entry and entries.subscriber is subscriber):
            self.entries = entry
            return entries is not None
        if type(entries) is Entry:
            entries = self.entries = {entries.subscriber: entries}
        assert isinstance(entries, dict)
        existed = subscriber in entries
        entries[subscriber] = entry
        return existed

    def drop(self, subscriber: Subscriber) -> bool:
        """Removes ``subscriber``'s entry; False when it had none."""
        entries = self.entries
        if entries is None:
            return False
        if type(entries) is Entry:
            if entries.subscriber is not subscriber:
                return False
            self.entries = None
            return True
        assert isinstance(entries, dict)
        if entries.pop(subscriber, None) is None:
            return False
        if len(entries) == 1:
            [self.entries] = entries.values()
        return True


class Targets:
    """Subscribers of one topic: ``(subscriber, entries)`` pairs and shared groups."""

    __slots__ = ("empty", "groups", "subscribers")

    def __init__(
        self, subscribers: list[tuple[Subscriber, tuple[Entry, ...]]], groups: list[SharedGroup]
    ) -> None:
        self.subscribers = subscribers
        self.groups = groups
        self.empty = not subscribers and not groups

    def __bool__(self) -> bool:
        return not self.empty


class Router:
    def __init__(self, on_cache_full: Callable[[str], None] | None = None) -> None:
        self._root = _Node()
        self._cache: dict[str, Targets] = {}
        #: estimated bytes of the match cache (``_CACHE_BYTES``)
        self.cache_bytes = 0
        #: times the cache was emptied because it was full (not by a subscription change)
        self.cache_clears = 0
        self._on_cache_full = on_cache_full
        self.count = 0

    @property
    def cache_entries(self) -> int:
        return len(self._cache)

    def _clear_cache(self) -> None:
        self._cache.clear()
        self.cache_bytes = 0

    def subscribe(
        self,
        subscriber: Subscriber,
        topic_filter: str,
        options: SubscriptionOptions,
        subscription_id: int | None = None,
    ) -> bool:
        """Adds or replaces a subscription [MQTT-3.8.4-3]; True when it replaced one."""
        return self.add(Entry(subscriber, topic_filter, options, subscription_id))

    def add(self, entry: Entry) -> bool:
        """``subscribe`` with the entry built by the caller, who keeps it (a session's
        record of its subscription); True when it replaced one."""
        topic_filter = entry.topic_filter
        subscriber = entry.subscriber
        shared = parse_shared(topic_filter)
        node = self._node(shared.topic_filter if shared else topic_filter, create=True)
        assert node is not None
        self._clear_cache()
        if shared is None:
            existed = node.put(entry)
        else:
            if node.shared is None:
                node.shared = {}
            group = node.shared.get(shared.group)
            if group is None:
                group = node.shared[shared.group] = SharedGroup(shared.group, shared.topic_filter)
            existed = False
            for i, member in enumerate(group.members):
                if member.subscriber is subscriber:
                    group.members[i] = entry
                    existed = True
                    break
            else:
                group.members.append(entry)
        if not existed:
            self.count += 1
        return existed

    def unsubscribe(self, subscriber: Subscriber, topic_filter: str) -> bool:
        """Removes a subscription; False when there was none."""
        shared = parse_shared(topic_filter)
        path = (shared.topic_filter if shared else topic_filter).split("/")
        node = self._root
        trail: list[tuple[_Node, str]] = []
        for level in path:
            child = node.children.get(level)
            if child is None:
                return False
            trail.append((node, level))
            node = child
        if shared is None:
            if not node.drop(subscriber):
                return False
        else:
            groups = node.shared or {}
            group = groups.get(shared.group)
            if group is None:
                return False
            kept = [m for m in group.members if m.subscriber is not subscriber]
            if len(kept) == len(group.members):
                return False
            group.members = kept
            if not kept:
                del groups[shared.group]
                if not groups:
                    node.shared = None
        self.count -= 1
        self._clear_cache()
        # Prune empty branches so the trie does not grow with churn.
        for parent, level in reversed(trail):
            child = parent.children[level]
            if child.entries is not None or child.shared or child.children:
                break
            del parent.children[level]
        return True

    def match(self, topic: str) -> Targets:
        targets = self._cache.get(topic)
        if targets is not None:
            return targets
        nodes = self._matching_nodes(topic)
        by_subscriber: dict[Subscriber, list[Entry]] = {}
        groups: list[SharedGroup] = []
        for node in nodes:
            for entry in node.each():
                subscriber = entry.subscriber
                found = by_subscriber.get(subscriber)
                if found is None:
                    by_subscriber[subscriber] = [entry]
                else:
                    found.append(entry)
            if node.shared:
                groups.extend(node.shared.values())
        subscribers = [(s, tuple(e)) for s, e in by_subscriber.items()]
        targets = Targets(subscribers, groups)
        cost = len(topic) + _ENTRY_COST + _TARGET_COST * (len(subscribers) + len(groups))
        if cost > _CACHE_ENTRY_MAX:
            return targets
        cache = self._cache
        if len(cache) >= _CACHE_LIMIT or self.cache_bytes + cost > _CACHE_BYTES:
            cache.clear()
            self.cache_bytes = 0
            self.cache_clears += 1
            if self._on_cache_full is not None:
                self._on_cache_full("router_cache")
        cache[topic] = targets
        self.cache_bytes += cost
        return targets

    def has_first_level(self, level: str) -> bool:
        """Some filter (shared or not) starts with ``level``: for ``$SYS``, whether any
        subscription could match a ``$SYS`` topic at all (wildcards at the first level
        do not match ``$`` topics [MQTT-4.7.2-1])."""
        return level in self._root.children

    def entries(self) -> Iterator[Entry]:
        """Every subscription, shared ones included (for the API and $SYS)."""
        stack = [self._root]
        while stack:
            node = stack.pop()
            yield from node.each()
            for group in (node.shared or {}).values():
                yield from group.members
            stack.extend(node.children.values())

    def levels(self, root: list[str], depth: int) -> Iterator[tuple[str, int]] | None:
        """The trie below the filter levels ``root`` ([]: all of it), at most ``depth``
        levels deep, for the API's topic tree: ``(filter, subscriptions ending there)``
        for each level, a parent before its children; None when ``root`` is in no
        filter. Each node's children are copied when it is reached, so the caller may
        let the loop run between items (subscriptions changing meanwhile)."""
        return walk_levels(self._root, root, depth, _subscribers)

    def shared_group(self, topic_filter: str) -> SharedGroup | None:
        """The group of a ``$share/{group}/{filter}`` subscription; None when it has none."""
        shared = parse_shared(topic_filter)
        if shared is None:
            return None
        node = self._node(shared.topic_filter, create=False)
        if node is None or not node.shared:
            return None
        return node.shared.get(shared.group)

    def _node(self, topic_filter: str, create: bool) -> _Node | None:
        node = self._root
        for level in topic_filter.split("/"):
            child = node.children.get(level)
            if child is None:
                if not create:
                    return None
                if node.children is _NO_CHILDREN:
                    node.children = {}
                child = node.children[level] = _Node()
            node = child
        return node

    def _matching_nodes(self, topic: str) -> list[_Node]:
        levels = topic.split("/")
        depth = len(levels)
        # Filters starting with a wildcard do not match $-topics [MQTT-4.7.2-1].
        dollar = topic.startswith("$")
        found: list[_Node] = []
        stack = [(self._root, 0)]
        while stack:
            node, i = stack.pop()
            children = node.children
            if i == depth:
                found.append(node)
                multi = children.get("#")  # "a/#" also matches "a" (4.7.1.2)
                if multi is not None:
                    found.append(multi)
                continue
            if i or not dollar:
                multi = children.get("#")
                if multi is not None:
                    found.append(multi)
                single = children.get("+")
                if single is not None:
                    stack.append((single, i + 1))
            child = children.get(levels[i])
            if child is not None:
                stack.append((child, i + 1))
        return found


def walk_levels(
    top: Any, root: list[str], depth: int, value: Callable[[Any], V]
) -> Iterator[tuple[str, V]] | None:
    """``(topic, value(node))`` for every node of a topic trie (nodes with a ``children``
    dict, the router's and the retained store's) below the levels ``root`` of ``top``
    ([]: all of it), ``depth`` levels deep, a parent before its children; None when
    ``root`` is in no topic. Breadth first: every node of a level before any of the next
    (the API cuts a long answer after whole levels but the last). Each node's children
    are copied when it is reached, so the caller may let the loop run between items."""
    node = top
    for level in root:
        node = node.children.get(level)
        if node is None:
            return None
    return _walk(node, "/".join(root) + "/" if root else "", depth, value)


def _walk(
    top: Any, prefix: str, depth: int, value: Callable[[Any], V]
) -> Iterator[tuple[str, V]]:
    queue = deque([(top, prefix, depth)])
    while queue:
        node, prefix, left = queue.popleft()
        if left <= 0 or not node.children:
            continue
        for name, child in list(node.children.items()):
            topic = prefix + name
            yield topic, value(child)
            queue.append((child, topic + "/", left - 1))


def _subscribers(node: _Node) -> int:
    count = sum(len(g.members) for g in node.shared.values()) if node.shared else 0
    entries = node.entries
    if entries is not None:
        count += 1 if type(entries) is Entry else len(entries)  # type: ignore[arg-type]
    return count
