from __future__ import annotations

from typing import Any

from broker_core.context import Context
from broker_core.mqtt.packets import SubscriptionOptions
from broker_core.router import Router


class Sink:
    def __init__(self, name: str, online: bool = True) -> None:
        self.name = name
        self.online = online
        self.got: list[tuple[str, int, bool, tuple[int, ...]]] = []

    def deliver(
        self,
        context: Context,
        qos: int,
        retain: bool,
        ids: tuple[int, ...],
        cache: dict[Any, Any],
        now: float,
    ) -> None:
        self.got.append((context.topic, qos, retain, ids))

    def __repr__(self) -> str:
        return self.name


def names(router: Router, topic: str) -> set[str]:
    targets = router.match(topic)
    return {s.name for s, _ in targets.subscribers}  # type: ignore[attr-defined]


def test_wildcards_and_dollar_topics() -> None:
    router = Router()
    a, b, c, d = Sink("a"), Sink("b"), Sink("c"), Sink("d")
    router.subscribe(a, "x/+/z", SubscriptionOptions())
    router.subscribe(b, "x/#", SubscriptionOptions())
    router.subscribe(c, "#", SubscriptionOptions())
    router.subscribe(d, "$SYS/#", SubscriptionOptions())
    assert names(router, "x/y/z") == {"a", "b", "c"}
    assert names(router, "x") == {"b", "c"}
    assert names(router, "$SYS/load") == {"d"}
    assert names(router, "q") == {"c"}


def test_overlapping_subscriptions_group_per_subscriber() -> None:
    router = Router()
    a = Sink("a")
    router.subscribe(a, "x/#", SubscriptionOptions(1), 1)
    router.subscribe(a, "x/y", SubscriptionOptions(2), 2)
    [(subscriber, entries)] = router.match("x/y").subscribers
    assert subscriber is a
    assert sorted(e.qos for e in entries) == [1, 2]
    assert sorted(e.subscription_ids for e in entries) == [(1,), (2,)]


def test_resubscribe_replaces_and_unsubscribe_prunes() -> None:
    router = Router()
    a = Sink("a")
    assert router.subscribe(a, "x/y", SubscriptionOptions(0)) is False
    assert router.subscribe(a, "x/y", SubscriptionOptions(2)) is True
    [(_, (entry,))] = router.match("x/y").subscribers
    assert entry.qos == 2
    assert router.count == 1
    assert router.unsubscribe(a, "x/y") is True
    assert router.unsubscribe(a, "x/y") is False
    assert not router.match("x/y")
    assert router._root.children == {}
    assert router.count == 0


def test_cache_is_invalidated_by_changes() -> None:
    router = Router()
    a, b = Sink("a"), Sink("b")
    router.subscribe(a, "t", SubscriptionOptions())
    assert names(router, "t") == {"a"}
    router.subscribe(b, "+", SubscriptionOptions())
    assert names(router, "t") == {"a", "b"}
    router.unsubscribe(a, "t")
    assert names(router, "t") == {"b"}


def test_shared_group_round_robin_prefers_live_members() -> None:
    router = Router()
    members = [Sink(f"m{i}") for i in range(3)]
    for m in members:
        router.subscribe(m, "$share/g/job/#", SubscriptionOptions(1))
    [group] = router.match("job/1").groups
    picks = [group.pick().subscriber.name for _ in range(6)]  # type: ignore[union-attr]
    assert picks == ["m0", "m1", "m2", "m0", "m1", "m2"]
    members[1].online = False
    picks = [group.pick().subscriber.name for _ in range(4)]  # type: ignore[union-attr]
    assert "m1" not in picks
    assert router.unsubscribe(members[0], "$share/g/job/#") is True
    [group] = router.match("job/1").groups
    assert [m.subscriber for m in group.members] == members[1:]


def test_entries_lists_everything() -> None:
    router = Router()
    a = Sink("a")
    router.subscribe(a, "x", SubscriptionOptions())
    router.subscribe(a, "$share/g/y", SubscriptionOptions())
    assert sorted(e.topic_filter for e in router.entries()) == ["$share/g/y", "x"]


def test_a_filter_goes_from_one_subscriber_to_many_and_back() -> None:
    # One subscriber is held as its entry, more as a dict: every step matches the same.
    router = Router()
    a, b, c = Sink("a"), Sink("b"), Sink("c")
    assert router.subscribe(a, "t/1", SubscriptionOptions(0)) is False
    assert router.subscribe(a, "t/1", SubscriptionOptions(1)) is True  # replaced
    assert [e.qos for _, (e,) in router.match("t/1").subscribers] == [1]
    assert router.subscribe(b, "t/1", SubscriptionOptions()) is False
    assert router.subscribe(c, "t/1", SubscriptionOptions()) is False
    assert router.subscribe(b, "t/1", SubscriptionOptions(2)) is True
    assert names(router, "t/1") == {"a", "b", "c"}
    assert router.count == 3
    assert router.unsubscribe(a, "t/1") is True
    assert router.unsubscribe(a, "t/1") is False
    assert names(router, "t/1") == {"b", "c"}
    assert router.unsubscribe(c, "t/1") is True
    assert names(router, "t/1") == {"b"}
    assert router.unsubscribe(c, "t/1") is False
    assert {(e.subscriber, e.qos) for e in router.entries()} == {(b, 2)}
    assert router.unsubscribe(b, "t/1") is True
    assert not router.match("t/1")
    assert router.count == 0
    assert not router.has_first_level("t")  # the emptied branch was pruned
