from __future__ import annotations

import time

from broker_core.context import Context
from broker_core.mqtt.properties import Properties
from broker_core.retained import LEVEL_BYTES as L
from broker_core.retained import RetainedStore, as_of, retained_size


def topics(store: RetainedStore, topic_filter: str) -> list[str]:
    return sorted(c.topic for c in store.match(topic_filter))


def test_set_replace_clear() -> None:
    store = RetainedStore()
    store.set(Context("a/b", b"1", retain=True))
    store.set(Context("a/b", b"2", retain=True))
    assert len(store) == 1
    assert store.get("a/b").payload == b"2"  # type: ignore[union-attr]
    store.set(Context("a/b", b"", retain=True))  # [MQTT-3.3.1-6]
    assert len(store) == 0
    assert store.get("a/b") is None


def test_wildcard_lookup() -> None:
    store = RetainedStore()
    for topic in ("a", "a/b", "a/b/c", "a/x/c", "b", "$SYS/x", "/lead"):
        store.set(Context(topic, b"v", retain=True))
    assert topics(store, "a/#") == ["a", "a/b", "a/b/c", "a/x/c"]
    assert topics(store, "a/+/c") == ["a/b/c", "a/x/c"]
    assert topics(store, "#") == ["/lead", "a", "a/b", "a/b/c", "a/x/c", "b"]
    assert topics(store, "+") == ["a", "b"]
    assert topics(store, "+/+") == ["/lead", "a/b"]
    assert topics(store, "$SYS/#") == ["$SYS/x"]
    assert topics(store, "a/b") == ["a/b"]


def test_limit_refuses_new_topics_but_allows_replacing() -> None:
    store = RetainedStore(max_messages=2)
    assert store.set(Context("a", b"1")) is True
    assert store.set(Context("b", b"1")) is True
    assert store.set(Context("c", b"1")) is False
    assert store.refused == 1
    assert store.set(Context("a", b"2")) is True
    assert store.set(Context("a", b"")) is True
    assert store.set(Context("c", b"1")) is True


def test_byte_bound_refuses_growth_and_counts_by_limit() -> None:
    hits: list[str] = []
    store = RetainedStore(max_bytes=100 + 2 * L, on_refused=hits.append)
    assert store.set(Context("a", b"x" * 49))  # 1 + 49 bytes and one level
    assert store.set(Context("b", b"x" * 49))
    assert store.bytes == 100 + 2 * L
    assert store.set(Context("c", b"x")) is False  # a new topic past the bound
    assert store.set(Context("a", b"x" * 60)) is False  # growing past it
    assert store.set(Context("a", b"x" * 10))  # shrinking always works
    assert store.bytes == 61 + 2 * L
    store.set(Context("b", b""))  # clearing frees its bytes
    assert store.set(Context("c", b"x" * 30))
    assert store.bytes == 11 + 31 + 2 * L
    assert hits == ["retained_bytes", "retained_bytes"]
    assert store.refused == 2


def test_each_topic_level_counts_what_the_trie_costs() -> None:
    """A deep topic counts ``LEVEL_BYTES`` a level: its trie nodes, not only its
    characters, are bounded by ``max_bytes``."""
    store = RetainedStore(max_bytes=10 * L)
    assert retained_size(Context("a/b/c", b"1")) == 5 + 1 + 3 * L
    assert store.over_limit(Context("/" * 8, b"1")) is None  # 9 levels
    assert store.over_limit(Context("/" * 9, b"1")) == "retained_bytes"  # 10 levels and more


def test_over_limit_names_the_bound_without_counting() -> None:
    store = RetainedStore(max_messages=1, max_bytes=10 + L)
    assert store.over_limit(Context("a", b"12345")) is None
    store.set(Context("a", b"12345"))
    assert store.over_limit(Context("b", b"1")) == "retained_messages"
    assert store.over_limit(Context("a", b"x" * 20)) == "retained_bytes"
    assert store.over_limit(Context("a", b"")) is None
    assert store.refused == 0


def _expiring(topic: str, interval: int, at_s: float, payload: bytes = b"v") -> Context:
    props = Properties(message_expiry_interval=interval)
    return Context(topic, payload, 1, True, props, received_at=int(at_s * 1e9))


def test_expired_messages_are_gone_from_every_read_and_reported() -> None:
    T = time.time()  # near the real clock: storing removes what has expired by it
    gone: list[str] = []
    store = RetainedStore(on_expired=lambda c: gone.append(c.topic))
    store.set(_expiring("e/short", 10, T))
    store.set(_expiring("e/long", 100, T))
    store.set(Context("e/never", b"v", retain=True))
    assert topics(store, "e/#") == ["e/long", "e/never", "e/short"]
    assert store.get("e/short", T + 9.9) is not None
    assert store.get("e/short", T + 10.0) is None  # [MQTT-3.3.2-5]: expired, removed
    assert gone == ["e/short"]
    assert len(store) == 2
    assert sorted(c.topic for c in store.match("e/#", T + 200.0)) == ["e/never"]
    assert gone == ["e/short", "e/long"]
    assert (len(store), store.expired) == (1, 2)
    assert store.bytes == len("e/never") + 1 + 2 * L


def test_expire_removes_in_order_of_expiry_a_batch_at_a_time() -> None:
    T = time.time()  # near the real clock: storing removes what has expired by it
    gone: list[str] = []
    store = RetainedStore(on_expired=lambda c: gone.append(c.topic))
    for i in range(5):
        store.set(_expiring(f"t/{i}", 10 - i, T))  # t/4 expires first
    assert store.expire(T + 5.0) == 0
    assert store.expire(T + 8.0, limit=2) == 2
    assert gone == ["t/4", "t/3"]
    assert store.expire(T + 100.0) == 3
    assert len(store) == 0


def test_a_replaced_or_cleared_message_does_not_expire_its_successor() -> None:
    T = time.time()  # near the real clock: storing removes what has expired by it
    store = RetainedStore()
    store.set(_expiring("a", 10, T))
    store.set(_expiring("a", 100, T, b"second"))  # the first heap entry is stale
    store.set(_expiring("b", 10, T))
    store.set(Context("b", b"no expiry", retain=True))
    store.set(_expiring("c", 10, T))
    store.clear("c")
    store.set(Context("c", b"back", retain=True))
    assert store.expire(T + 50.0) == 0
    kept = [store.get(t, T + 50.0) for t in "abc"]
    assert [m.payload if m else None for m in kept] == [b"second", b"no expiry", b"back"]
    assert store.expire(T + 100.0) == 1
    assert store.get("a", T + 100.0) is None


def test_the_heap_of_replaced_entries_stays_bounded() -> None:
    T = time.time()  # near the real clock: storing removes what has expired by it
    store = RetainedStore()
    for i in range(10_000):
        store.set(_expiring("same", 3600, T + i))
    assert len(store._due) <= 2 * 1 + 64 + 1


def test_expired_messages_do_not_count_against_the_bounds() -> None:
    store = RetainedStore(max_messages=2)
    now = time.time()
    assert store.set(_expiring("x", 1, now - 5))  # already expired
    assert store.set(Context("y", b"v", retain=True))
    assert store.over_limit(Context("z", b"v", retain=True), now) is None
    assert store.set(Context("z", b"v", retain=True))
    assert sorted(c.topic for c in store) == ["y", "z"]


def test_as_of_gives_the_seconds_left() -> None:
    T = time.time()  # near the real clock: storing removes what has expired by it
    message = _expiring("a", 60, T)
    assert as_of(message, T + 0.5) is message
    assert as_of(message, T + 15.2).properties.message_expiry_interval == 45
    assert as_of(message, T + 59.9).properties.message_expiry_interval == 1
    assert as_of(Context("b", b"v"), 5000.0).properties.message_expiry_interval is None
