"""The topic tree built from subscription filters and retained topics."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from broker_core.context import Context
from broker_core.mqtt.packets import SubscriptionOptions
from broker_core.retained import RetainedStore
from broker_core.router import Router
from gateway.api.schemas import TopicNode
from gateway.api.topic_tree import LevelTreeBuilder, build_topic_tree


def flat(nodes: list[TopicNode]) -> list[tuple[str, int, bool]]:
    out: list[tuple[str, int, bool]] = []
    for node in nodes:
        out.append((node.topic, node.subscriptions, node.retained))
        out.extend(flat(node.children))
    return out


def test_filters_and_retained_topics_make_one_tree() -> None:
    tree = build_topic_tree(["a/+/c", "a/b", "$share/g/a/b", "#", "$SYS/#"], ["a/b/c", "a/b", "x"])
    assert tree is not None
    assert tree.nodes == 9
    assert flat(tree.children) == [
        ("#", 1, False),
        ("$SYS", 0, False),
        ("$SYS/#", 1, False),
        ("a", 0, False),
        ("a/+", 0, False),
        ("a/+/c", 1, False),
        ("a/b", 2, True),
        ("a/b/c", 0, True),
        ("x", 0, True),
    ]


def test_root_and_depth() -> None:
    filters = ["a/b/c/d"]
    below = build_topic_tree(filters, [], root="a/b")
    assert below is not None
    assert flat(below.children) == [("a/b/c", 0, False), ("a/b/c/d", 1, False)]
    shallow = build_topic_tree(filters, [], depth=2)
    assert shallow is not None
    assert flat(shallow.children) == [("a", 0, False), ("a/b", 0, False)]
    assert build_topic_tree(filters, [], root="a/x") is None


def test_empty_levels_are_nodes() -> None:
    tree = build_topic_tree([], ["/a", "a//b"])
    assert tree is not None
    assert flat(tree.children) == [
        ("", 0, False),
        ("/a", 0, True),
        ("a", 0, False),
        ("a/", 0, False),
        ("a//b", 0, True),
    ]


topics = (
    st.lists(st.sampled_from(["a", "b", "", "+"]), min_size=1, max_size=4)
    .map("/".join)
    .filter(bool)  # MQTT topics and filters are never empty
)


@given(st.lists(topics, max_size=20), st.lists(topics, max_size=20))
def test_every_prefix_is_a_node_once(filters: list[str], retained: list[str]) -> None:
    tree = build_topic_tree(filters, retained)
    assert tree is not None
    shown = flat(tree.children)
    prefixes = {
        "/".join(topic.split("/")[:n])
        for topic in filters + retained
        for n in range(1, len(topic.split("/")) + 1)
    }
    assert sorted(topic for topic, _, _ in shown) == sorted(prefixes)
    assert tree.nodes == len(prefixes)
    assert sum(count for _, count, _ in shown) == len(filters)
    assert {topic for topic, _, kept in shown if kept} == set(retained)


class _Subscriber:
    online = True

    def deliver(self, *args: Any) -> None:
        raise AssertionError("nothing is published")


@given(
    st.lists(topics, max_size=20),
    st.lists(topics.filter(lambda t: "+" not in t), max_size=20),
    st.sampled_from([None, "a", "a/b", ""]),
    st.integers(1, 5),
)
def test_the_tries_levels_make_the_same_tree(
    filters: list[str], retained: list[str], root: str | None, depth: int
) -> None:
    """``LevelTreeBuilder`` from ``Router.levels`` and ``RetainedStore.levels`` (what the
    API uses, reading only the levels shown) answers as ``build_topic_tree`` from the
    filters and topics, but for ``nodes``: the nodes shown."""
    router = Router()
    for i, topic_filter in enumerate(filters):
        router.subscribe(_Subscriber(), topic_filter + "/#" * (i % 2), SubscriptionOptions(0))
    store = RetainedStore()
    for topic in retained:
        store.set(Context(topic, b"1"))
    expected = build_topic_tree(
        [f + "/#" * (i % 2) for i, f in enumerate(filters)], retained, root or None, depth
    )
    levels = root.split("/") if root else []
    subscribed, held = router.levels(levels, depth), store.levels(levels, depth)
    if subscribed is None and held is None:
        assert expected is None
        return
    builder = LevelTreeBuilder(root or None)
    for topic, count in subscribed or ():
        builder.add(topic, subscriptions=count)
    for topic, kept in held or ():
        builder.add(topic, retained=kept)
    tree = builder.tree()
    assert expected is not None
    assert tree.children == expected.children
    assert tree.nodes == len(flat(tree.children))
