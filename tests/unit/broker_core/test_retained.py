from __future__ import annotations

from broker_core.context import Context
from broker_core.retained import RetainedStore


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
    store = RetainedStore(max_bytes=100, on_refused=hits.append)
    assert store.set(Context("a", b"x" * 49))  # 1 + 49 bytes
    assert store.set(Context("b", b"x" * 49))
    assert store.bytes == 100
    assert store.set(Context("c", b"x")) is False  # a new topic past the bound
    assert store.set(Context("a", b"x" * 60)) is False  # growing past it
    assert store.set(Context("a", b"x" * 10))  # shrinking always works
    assert store.bytes == 61
    assert store.set(Context("c", b"x" * 30))
    store.set(Context("b", b""))  # clearing frees its bytes
    assert store.bytes == 11 + 31
    assert hits == ["retained_bytes", "retained_bytes"]
    assert store.refused == 2


def test_over_limit_names_the_bound_without_counting() -> None:
    store = RetainedStore(max_messages=1, max_bytes=10)
    assert store.over_limit(Context("a", b"12345")) is None
    store.set(Context("a", b"12345"))
    assert store.over_limit(Context("b", b"1")) == "retained_messages"
    assert store.over_limit(Context("a", b"x" * 20)) == "retained_bytes"
    assert store.over_limit(Context("a", b"")) is None
    assert store.refused == 0
