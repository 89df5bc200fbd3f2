"""The topic tree the API shows: every topic level that a subscription or a retained
message names.

Built from two sources at request time: the router's subscription filters (a shared
subscription ``$share/g/a/b`` counts at ``a/b``; wildcard levels ``+`` and ``#`` are
nodes of their own) and the topics of the retained messages. A node counts the
subscriptions whose filter ends there and says whether a retained message is held for
exactly that topic. Topics that only pass through the broker, with neither a subscriber
nor a retained message, leave no trace and are not shown.

The API builds it with ``LevelTreeBuilder`` from the levels the router's and the
retained store's tries give down to the depth asked (``Router.levels``,
``RetainedStore.levels``): the work is that of the nodes shown, not of the whole tree.
``TopicTreeBuilder`` builds it from lists of filters and topics.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker_core.mqtt.topics import SHARE_PREFIX
from gateway.api.schemas import TopicNode, TopicTree

__all__ = ["LevelTreeBuilder", "TopicTreeBuilder", "build_topic_tree"]


@dataclass
class _Node:
    subscriptions: int = 0
    retained: bool = False
    children: dict[str, _Node] = field(default_factory=dict)
    more: bool | None = None  # None, or True: children left out of a cut answer


def _strip_share(topic_filter: str) -> str:
    if topic_filter.startswith(SHARE_PREFIX):
        _, _, rest = topic_filter[len(SHARE_PREFIX) :].partition("/")
        return rest
    return topic_filter


class TopicTreeBuilder:
    def __init__(self) -> None:
        self._root = _Node()
        self.nodes = 0

    def _walk(self, topic: str) -> _Node:
        node = self._root
        for level in topic.split("/"):
            child = node.children.get(level)
            if child is None:
                child = node.children[level] = _Node()
                self.nodes += 1
            node = child
        return node

    def add_filter(self, topic_filter: str) -> None:
        inner = _strip_share(topic_filter)
        if inner:
            self._walk(inner).subscriptions += 1

    def add_retained(self, topic: str) -> None:
        self._walk(topic).retained = True

    def tree(self, root: str | None = None, depth: int | None = None) -> TopicTree | None:
        """The tree below ``root`` (a topic, e.g. ``sensors/line1``; None: everything),
        ``depth`` levels deep (None: all); None when ``root`` is not in the tree."""
        node = self._root
        prefix = ""
        if root:
            for level in root.split("/"):
                found = node.children.get(level)
                if found is None:
                    return None
                node = found
            prefix = root + "/"
        return TopicTree(nodes=self.nodes, children=_children(node, prefix, depth))


class LevelTreeBuilder:
    """The tree below ``root`` (a topic; None: everything) from its levels, each given
    as its whole topic (``a/b/c``) after its parent's: ``nodes`` counts those given.
    A cut answer (``truncated``) marks the nodes whose children it leaves out
    (``mark_more``)."""

    def __init__(self, root: str | None = None) -> None:
        self._root = _Node()
        self._root_topic = root
        self._nodes: dict[str, _Node] = {}
        self.truncated = False

    @property
    def nodes(self) -> int:
        return len(self._nodes)

    def __contains__(self, topic: str) -> bool:
        return topic in self._nodes

    def topics(self) -> list[str]:
        """The topics given so far, in the order given."""
        return list(self._nodes)

    def mark_more(self, topic: str) -> None:
        """The node of ``topic`` has children the answer leaves out."""
        self._nodes[topic].more = True

    def add(self, topic: str, subscriptions: int = 0, retained: bool = False) -> None:
        node = self._nodes.get(topic)
        if node is None:
            parent_topic, sep, name = topic.rpartition("/")
            if not sep or parent_topic == self._root_topic:
                parent = self._root
            else:
                parent = self._nodes[parent_topic]
            node = self._nodes[topic] = parent.children[name] = _Node()
        node.subscriptions += subscriptions
        node.retained = node.retained or retained

    def tree(self) -> TopicTree:
        prefix = self._root_topic + "/" if self._root_topic is not None else ""
        return TopicTree(
            nodes=len(self._nodes),
            children=_children(self._root, prefix, None),
            truncated=True if self.truncated else None,
        )


def _children(node: _Node, prefix: str, depth: int | None) -> list[TopicNode]:
    if depth is not None and depth <= 0:
        return []
    below = None if depth is None else depth - 1
    return [
        TopicNode(
            name=name,
            topic=prefix + name,
            subscriptions=child.subscriptions,
            retained=child.retained,
            children=_children(child, prefix + name + "/", below),
            more=child.more,
        )
        for name, child in sorted(node.children.items())
    ]


def build_topic_tree(
    filters: Iterable[str],
    retained_topics: Iterable[str],
    root: str | None = None,
    depth: int | None = None,
) -> TopicTree | None:
    builder = TopicTreeBuilder()
    for topic_filter in filters:
        builder.add_filter(topic_filter)
    for topic in retained_topics:
        builder.add_retained(topic)
    return builder.tree(root, depth)
