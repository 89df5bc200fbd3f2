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
